// Package exhaustion holds TESTING.md's exhaustion suite: troupe under more work
// than it admits or retains, checked with exact counters and heap high-waters.
//
//   - admission: 1,000 owners × 11 concurrent starts of jobs that stay live →
//     exactly 10,000 admitted and exactly one ErrCapacity refusal per owner; the
//     heap per live job is bounded; after every job settled each owner again has
//     exactly 10 slots (0 in flight).
//   - followup flood: 2,000 concurrent followups into a continuable child whose
//     first turn is held → every one accepted (troupe has no followup admission
//     bound), no goroutine per queued message, a bounded heap per queued message,
//     and after the hold every message runs exactly once in acceptance order
//     (exact comparison plus harness.CheckFIFO).
//   - outputs over the cap: a real shell job writing 20 MiB nobody reads → the read
//     returns at most the retention cap plus output.DroppedLine, valid UTF-8, with
//     a bounded heap high-water; job_output with outputLimitBytes truncates with
//     "[output truncated]" before the status line.
//
// Every figure is logged with t.Logf (run with -v to see them). Knob: -seed /
// TROUPE_SEED fixes the order in which the admission test's starts are launched
// and which of its jobs settle by completion and which by a kill.
package exhaustion

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
