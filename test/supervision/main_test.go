// Package supervisionsuite checks the supervision tree (package supervision) on a
// real System: the snapshot and the event stream agree under a mixed workload; no
// actor outlives its parent, in the tree or in protoactor's process registry; and
// the crash semantics of DESIGN.md "Supervision", asserted through the event
// stream — a job actor's panic settles it failed (cause panic) and frees its slot,
// an owner's crash tears its jobs down (killed, cause teardown), an Activation's
// crash restarts it (cause panic) with its in-flight turn failed and its parked
// messages kept.
//
// Randomized orders come from harness.Seed (-seed or TROUPE_SEED, logged first).
package supervisionsuite

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
