// Package workflow_test holds the workflow tool's acceptance cases (WORKFLOW.md
// WORKFLOW.md 6.9 as TestWorkflowWNN_…, SPEC cases 181–183 as TestSpecNNN_…), the race suite
// over a run's settle sources and the fan-out benchmark.
package workflow_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
