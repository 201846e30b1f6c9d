package harness_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/harness"
	"github.com/troupe-rt/troupe/messages"
)

// seq builds a history of operations that do not overlap, in order.
type seq struct {
	t   int64
	ops []porcupine.Operation
}

func (s *seq) op(in harness.Input, out harness.Output) *seq {
	s.t += 2
	s.ops = append(s.ops, porcupine.Operation{Input: in, Output: out, Call: s.t, Return: s.t + 1})
	return s
}

func offer(st job.Status, detail, output string) harness.Input {
	return harness.Input{Op: harness.OpOffer, Source: "producer", Outcome: job.Outcome{Status: st, Detail: detail, Output: output}}
}

func snap(st job.Status, detail string, reported bool) harness.Output {
	s := harness.Snap{Status: st, Reported: reported}
	if st.Terminal() {
		s.Finished = true
		if detail != "" {
			s.Detail, s.HasDetail = detail, true
		}
	}
	return harness.Output{HasSnap: true, Snap: s}
}

func kill(reason string, noClaim bool) harness.Input {
	return harness.Input{Op: harness.OpKill, Reason: reason, NoClaim: noClaim}
}

func killOut(r messages.KillResult, o harness.Output) harness.Output {
	o.Kill = r
	return o
}

var (
	get       = harness.Input{Op: harness.OpGet}
	wait      = harness.Input{Op: harness.OpWait}
	announce  = harness.Input{Op: harness.OpAnnounce}
	requested = messages.KillResult_KILL_RESULT_REQUESTED
	finished  = messages.KillResult_KILL_RESULT_ALREADY_FINISHED
)

func legal(t *testing.T, s *seq) {
	t.Helper()
	require.NoError(t, harness.CheckSettlement(t.Name(), s.ops))
}

func illegal(t *testing.T, s *seq) {
	t.Helper()
	err := harness.CheckSettlement(t.Name(), s.ops)
	var le *harness.LinearizabilityError
	require.True(t, errors.As(err, &le), "want a violation, got %v", err)
	require.Equal(t, porcupine.Illegal, le.Result)
}

func TestModelFirstOutcomeWinsAndRepliesAgree(t *testing.T) {
	ok := (&seq{}).
		op(get, snap(job.Running, "", false)).
		op(offer(job.Completed, "exit code: 0", "out"), harness.Output{}).
		op(offer(job.Failed, "late", ""), harness.Output{}). // ignored: first wins
		op(announce, snap(job.Completed, "exit code: 0", false)).
		op(get, snap(job.Completed, "exit code: 0", false)).
		op(harness.Input{Op: harness.OpRead}, harness.Output{HasSnap: true, Text: "out",
			Snap: snap(job.Completed, "exit code: 0", true).Snap}).
		op(wait, snap(job.Completed, "exit code: 0", true))
	legal(t, ok)

	t.Run("later observation disagrees", func(t *testing.T) {
		illegal(t, (&seq{}).
			op(offer(job.Completed, "exit code: 0", ""), harness.Output{}).
			op(get, snap(job.Completed, "exit code: 0", false)).
			op(get, snap(job.Failed, "late", false)))
	})
	t.Run("announced twice", func(t *testing.T) {
		illegal(t, (&seq{}).
			op(offer(job.Completed, "", ""), harness.Output{}).
			op(announce, snap(job.Completed, "", false)).
			op(announce, snap(job.Completed, "", false)))
	})
	t.Run("kill requested with a settled snapshot", func(t *testing.T) {
		illegal(t, (&seq{}).
			op(offer(job.Completed, "", ""), harness.Output{}).
			op(kill("", false), killOut(requested, snap(job.Completed, "", true))))
	})
	t.Run("settled wait that does not claim", func(t *testing.T) {
		illegal(t, (&seq{}).
			op(offer(job.Completed, "", ""), harness.Output{}).
			op(wait, snap(job.Completed, "", false)))
	})
}

func TestModelKillReasonAndClaim(t *testing.T) {
	// A claiming kill with a reason, then the producer settles killed: merged, claimed.
	legal(t, (&seq{}).
		op(kill("stop it", false), killOut(requested, snap(job.Stopping, "", true))).
		op(offer(job.Killed, "signal: SIGTERM", ""), harness.Output{}).
		op(announce, snap(job.Killed, "signal: SIGTERM; stop it", true)))
	// Outran: the job completed after the kill; the reason is dropped, the claim lapses.
	legal(t, (&seq{}).
		op(kill("stop it", false), killOut(requested, snap(job.Stopping, "", true))).
		op(offer(job.Completed, "exit code: 0", ""), harness.Output{}).
		op(announce, snap(job.Completed, "exit code: 0", false)))
	// A human kill never claims; a later reason wins; an empty reason keeps the last.
	legal(t, (&seq{}).
		op(kill("first", true), killOut(requested, snap(job.Stopping, "", false))).
		op(kill("second", true), killOut(requested, snap(job.Stopping, "", false))).
		op(kill("", true), killOut(requested, snap(job.Stopping, "", false))).
		op(offer(job.Killed, "", ""), harness.Output{}).
		op(get, snap(job.Killed, "second", false)).
		op(kill("", true), killOut(finished, snap(job.Killed, "second", false))).
		op(kill("", false), killOut(finished, snap(job.Killed, "second", true))))
	// A failed cancel changes nothing.
	legal(t, (&seq{}).
		op(kill("nope", false), harness.Output{Err: harness.ErrCancelFailed}).
		op(offer(job.Killed, "", ""), harness.Output{}).
		op(get, snap(job.Killed, "", false)))
	illegal(t, (&seq{}).
		op(kill("stop it", false), killOut(requested, snap(job.Stopping, "", true))).
		op(offer(job.Killed, "signal: SIGTERM", ""), harness.Output{}).
		op(get, snap(job.Killed, "signal: SIGTERM", true)))
}

func TestModelTeardown(t *testing.T) {
	teardown := harness.Input{Op: harness.OpTeardown, Reason: job.ReasonOwnerDisposed}
	// A cancel that panics force-fails the job; a later producer outcome is ignored.
	legal(t, (&seq{}).
		op(teardown, harness.Output{Cancel: harness.CancelPanicked, PanicMsg: "boom"}).
		op(offer(job.Completed, "", ""), harness.Output{}).
		op(announce, snap(job.Failed, harness.TeardownFailedDetail("boom"), true)).
		op(harness.Input{Op: harness.OpRemove}, harness.Output{}).
		op(get, harness.Output{Err: harness.ErrGone}))
	// A returning cancel claims: the settlement is reported.
	legal(t, (&seq{}).
		op(teardown, harness.Output{Cancel: harness.CancelReturned}).
		op(get, snap(job.Stopping, "", true)).
		op(offer(job.Completed, "", ""), harness.Output{}).
		op(announce, snap(job.Completed, "", true)))
	// Removal cannot come before settlement, and a cancel is never called on a settled job.
	illegal(t, (&seq{}).op(harness.Input{Op: harness.OpRemove}, harness.Output{}))
	illegal(t, (&seq{}).
		op(offer(job.Completed, "", ""), harness.Output{}).
		op(teardown, harness.Output{Cancel: harness.CancelReturned}))
}

// Concurrent offers: either may win, but everyone must agree on the one that did.
func TestModelConcurrentOffers(t *testing.T) {
	ops := []porcupine.Operation{
		{Input: offer(job.Completed, "a", ""), Call: 1, Return: 100},
		{Input: harness.Input{Op: harness.OpOffer, Closed: true}, Call: 2, Return: 100},
		{Input: announce, Output: snap(job.Failed, "Error: producer done channel closed without an outcome", false), Call: 10, Return: 10},
		{Input: get, Output: snap(job.Failed, "Error: producer done channel closed without an outcome", false), Call: 11, Return: 12},
	}
	require.NoError(t, harness.CheckSettlement(t.Name(), ops))
	ops[3].Output = snap(job.Completed, "a", false)
	require.Error(t, harness.CheckSettlement(t.Name(), ops))
}

func TestCheckSettlementWritesArtifacts(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(harness.ArtifactsEnv, dir)
	err := harness.CheckSettlement("bad history/1", (&seq{}).
		op(offer(job.Completed, "", ""), harness.Output{}).
		op(get, snap(job.Running, "", false)).ops)
	var le *harness.LinearizabilityError
	require.ErrorAs(t, err, &le)
	require.Equal(t, filepath.Join(dir, "bad_history_1.html"), le.Artifact)
	html, rerr := os.ReadFile(le.Artifact)
	require.NoError(t, rerr)
	require.Contains(t, string(html), "<html")
	_, rerr = os.Stat(filepath.Join(dir, "bad_history_1.txt"))
	require.NoError(t, rerr)
}

func TestErrOf(t *testing.T) {
	require.Equal(t, harness.ErrNone, harness.ErrOf(nil))
	require.Equal(t, harness.ErrGone, harness.ErrOf(messages.ErrNotFound))
	require.Equal(t, harness.ErrGone, harness.ErrOf(messages.ErrDisposed))
	require.Equal(t, harness.ErrCancelFailed, harness.ErrOf(messages.ErrCancelFailed))
	require.Equal(t, harness.ErrAborted, harness.ErrOf(messages.ErrWaitAborted))
	require.Contains(t, string(harness.ErrOf(errors.New("x"))), "other")
}

// The model's "done rejected" rule is its own reading of SPEC §1.3 rules 14–15,
// pinned here with SPEC's literal texts (case 38 for the closed channel): a wrong
// normalisation in the implementation then disagrees with the model.
func TestModelDoneRejectedAsSPECWritesIt(t *testing.T) {
	closed := harness.Input{Op: harness.OpOffer, Source: "producer", Closed: true}
	legal(t, (&seq{}).
		op(closed, harness.Output{}).
		op(get, snap(job.Failed, "Error: producer done channel closed without an outcome", false)))
	legal(t, (&seq{}).
		op(offer(job.Stopping, "still going", "partial"), harness.Output{}).
		op(get, snap(job.Failed, `Error: producer outcome has unknown status "stopping"`, false)).
		op(harness.Input{Op: harness.OpRead}, harness.Output{HasSnap: true, Text: "",
			Snap: snap(job.Failed, `Error: producer outcome has unknown status "stopping"`, true).Snap}))
	legal(t, (&seq{}).
		op(offer(job.Status(42), "???", ""), harness.Output{}).
		op(get, snap(job.Failed, `Error: producer outcome has unknown status "42"`, false)))
	for name, detail := range map[string]string{
		"no Error: prefix":   "producer done channel closed without an outcome",
		"status enum's name": `Error: producer outcome has unknown status "JOB_STATUS_STOPPING"`,
	} {
		t.Run(name, func(t *testing.T) {
			in := closed
			if name == "status enum's name" {
				in = offer(job.Stopping, "", "")
			}
			illegal(t, (&seq{}).op(in, harness.Output{}).op(get, snap(job.Failed, detail, false)))
		})
	}
	t.Run("the rejected value's output is kept", func(t *testing.T) {
		illegal(t, (&seq{}).
			op(offer(job.Running, "", "partial"), harness.Output{}).
			op(harness.Input{Op: harness.OpRead}, harness.Output{HasSnap: true, Text: "partial",
				Snap: snap(job.Failed, `Error: producer outcome has unknown status "running"`, true).Snap}))
	})
}
