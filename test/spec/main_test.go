// Package spec holds SPEC.md's acceptance cases as Go tests, named TestSpecNNN_…
// after the case number, run against troupe's public API.
package spec

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
