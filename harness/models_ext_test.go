package harness_test

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/harness"
)

// ops turns (input, call, return) triples into a porcupine history.
func ops(in ...struct {
	op        any
	call, ret int64
}) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(in))
	for i, o := range in {
		out = append(out, porcupine.Operation{ClientId: i, Input: o.op, Call: o.call, Return: o.ret})
	}
	return out
}

type timed = struct {
	op        any
	call, ret int64
}

func dir(kind harness.DirectoryOpKind, epoch uint64, call, ret int64) timed {
	return timed{harness.DirectoryOp{Session: "s", Kind: kind, Epoch: epoch}, call, ret}
}

func TestDirectoryModel(t *testing.T) {
	legal := ops(dir(harness.Acquire, 1, 1, 2), dir(harness.TurnBegin, 1, 3, 3), dir(harness.TurnEnd, 1, 4, 4),
		dir(harness.Release, 1, 5, 5), dir(harness.Acquire, 2, 6, 7), dir(harness.Restart, 3, 8, 9),
		dir(harness.TurnBegin, 3, 10, 10), dir(harness.TurnEnd, 3, 11, 11), dir(harness.Release, 2, 12, 12))
	require.NoError(t, harness.CheckDirectory("legal", legal))

	violations := map[string][]porcupine.Operation{
		"a second activation while one is live": ops(dir(harness.Acquire, 1, 1, 2), dir(harness.Acquire, 2, 3, 4)),
		"a turn ending after its activation was released and another acquired": ops(dir(harness.Acquire, 1, 1, 2),
			dir(harness.TurnBegin, 1, 3, 3), dir(harness.Release, 1, 4, 4), dir(harness.Acquire, 2, 5, 5), dir(harness.TurnEnd, 1, 6, 6)),
		"an epoch reused":                ops(dir(harness.Acquire, 1, 1, 2), dir(harness.Release, 1, 3, 3), dir(harness.Acquire, 1, 4, 5)),
		"a turn with no live activation": ops(dir(harness.Acquire, 1, 1, 2), dir(harness.Release, 1, 3, 3), dir(harness.TurnBegin, 1, 4, 4)),
		"a turn at the epoch a restart fenced": ops(dir(harness.Acquire, 1, 1, 2), dir(harness.Restart, 2, 3, 4),
			dir(harness.TurnBegin, 1, 5, 5)),
		"a restart of nothing": ops(dir(harness.Restart, 1, 1, 2)),
	}
	for name, h := range violations {
		t.Run(name, func(t *testing.T) {
			err := harness.CheckDirectory(name, h)
			var le *harness.LinearizabilityError
			require.ErrorAs(t, err, &le)
			require.Equal(t, porcupine.Illegal, le.Result)
			require.Contains(t, le.History, "epoch 1")
		})
	}
	// Sessions are independent: two live activations of two sessions are fine.
	two := ops(timed{harness.DirectoryOp{Session: "a", Kind: harness.Acquire, Epoch: 1}, 1, 3},
		timed{harness.DirectoryOp{Session: "b", Kind: harness.Acquire, Epoch: 1}, 2, 4})
	require.NoError(t, harness.CheckDirectory("two sessions", two))
}

func TestFIFOModel(t *testing.T) {
	enq := func(text string, seq uint64, call, ret int64) timed {
		return timed{harness.FIFOOp{Session: "s", Kind: harness.Enqueue, Text: text, Seq: seq}, call, ret}
	}
	deq := func(text string, at int64) timed {
		return timed{harness.FIFOOp{Session: "s", Kind: harness.Dequeue, Text: text}, at, at}
	}
	require.NoError(t, harness.CheckFIFO("concurrent sends", ops(enq("a", 1, 1, 4), enq("b", 2, 2, 3), deq("a", 5), deq("b", 6))))
	violations := map[string][]porcupine.Operation{
		"turns out of acceptance order":  ops(enq("a", 1, 1, 2), enq("b", 2, 3, 4), deq("b", 5), deq("a", 6)),
		"acceptance against real time":   ops(enq("a", 2, 1, 2), enq("b", 1, 3, 4), deq("b", 5), deq("a", 6)),
		"a message run twice":            ops(enq("a", 1, 1, 2), deq("a", 3), deq("a", 4)),
		"a turn before its message sent": ops(deq("a", 1), enq("a", 1, 2, 3)),
	}
	for name, h := range violations {
		t.Run(name, func(t *testing.T) {
			var le *harness.LinearizabilityError
			require.ErrorAs(t, harness.CheckFIFO(name, h), &le)
			require.Equal(t, porcupine.Illegal, le.Result)
		})
	}
}

func TestCheckWritesArtifacts(t *testing.T) {
	dirPath := t.TempDir()
	t.Setenv(harness.ArtifactsEnv, dirPath)
	err := harness.CheckDirectory("two/live", ops(dir(harness.Acquire, 1, 1, 2), dir(harness.Acquire, 2, 3, 4)))
	var le *harness.LinearizabilityError
	require.ErrorAs(t, err, &le)
	require.FileExists(t, le.Artifact)
	require.FileExists(t, dirPath+"/two_live.txt")
	require.Contains(t, err.Error(), "porcupine timeline: "+le.Artifact)
}

func TestClock(t *testing.T) {
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	c := harness.NewClock(start)
	require.True(t, c.Now().Equal(start))
	require.True(t, c.Advance(time.Second).Equal(start.Add(time.Second)))
	require.True(t, c.Advance(-2*time.Second).Equal(start.Add(-time.Second)), "a clock stepped back")
	c.Set(start)
	require.True(t, c.Now().Equal(start))
	var zero harness.Clock
	require.Equal(t, int64(0), zero.Now().UnixNano())
}
