package workflow

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// The terminal precedence (WORKFLOW.md 3.9) as a table over the pure core.
func TestRunCorePrecedence(t *testing.T) {
	done := Result{Value: json.RawMessage("7"), StopReason: StopCompleted, AgentsStarted: 2}
	failedScript := Result{StopReason: StopError, Error: "boom", AgentsStarted: 1}
	for _, c := range []struct {
		name  string
		steps func(c *runCore) []Result // each claim that won, in order
		want  Result
	}{
		{"script result alone stands", func(c *runCore) []Result { return won(c.claimScript(done)) }, done},
		{"a cancel before a completed result makes it cancelled, with the script's count", func(c *runCore) []Result {
			c.cancel("user")
			return won(c.claimScript(done))
		}, Result{Value: nullValue, StopReason: StopCancelled, Error: "workflow run cancelled: user", AgentsStarted: 2}},
		{"a cancel before an error result makes it cancelled", func(c *runCore) []Result {
			c.cancel("user")
			return won(c.claimScript(failedScript))
		}, Result{Value: nullValue, StopReason: StopCancelled, Error: "workflow run cancelled: user", AgentsStarted: 1}},
		{"a cancel after the claim changes nothing", func(c *runCore) []Result {
			r := won(c.claimScript(done))
			require.False(t, c.cancel("late"))
			return r
		}, done},
		{"the first result wins over a second", func(c *runCore) []Result {
			return append(won(c.claimScript(done)), won(c.claimScript(failedScript))...)
		}, done},
		{"a script failure settles error with the host count", func(c *runCore) []Result {
			c.childStart()
			c.childStart()
			return won(c.claimFailure("workflow script failed: x"))
		}, Result{Value: nullValue, StopReason: StopError, Error: "workflow script failed: x", AgentsStarted: 2}},
		{"a script failure after a cancel settles cancelled", func(c *runCore) []Result {
			c.childStart()
			c.cancel("")
			return won(c.claimFailure("workflow script failed: x"))
		}, Result{Value: nullValue, StopReason: StopCancelled, Error: "workflow run cancelled: workflow cancelled", AgentsStarted: 1}},
		{"grace needs a cancel", func(c *runCore) []Result {
			r := won(c.claimGrace())
			require.Empty(t, r)
			c.cancel("stop")
			return won(c.claimGrace())
		}, Result{Value: nullValue, StopReason: StopCancelled, Error: "workflow run cancelled: stop", AgentsStarted: 0}},
		{"the script's late result after the grace changes nothing", func(c *runCore) []Result {
			c.cancel("stop")
			return append(won(c.claimGrace()), won(c.claimScript(done))...)
		}, Result{Value: nullValue, StopReason: StopCancelled, Error: "workflow run cancelled: stop"}},
		{"the first cancel reason wins", func(c *runCore) []Result {
			c.cancel("first")
			c.cancel("second")
			return won(c.claimGrace())
		}, Result{Value: nullValue, StopReason: StopCancelled, Error: "workflow run cancelled: first"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			core := newRunCore()
			claims := c.steps(core)
			require.Len(t, claims, 1, "exactly one claim wins")
			require.Equal(t, c.want, claims[0])
			require.Equal(t, c.want, core.result)
		})
	}
}

func won(r Result, ok bool) []Result {
	if ok {
		return []Result{r}
	}
	return nil
}

func TestRunCoreRefusalsAndDisposal(t *testing.T) {
	c := newRunCore()
	_, ok := c.childStart()
	require.True(t, ok)
	_, closed, publish := c.startReturned(1, true)
	require.True(t, publish)
	require.False(t, closed)
	start, ack := c.disposeChild(1)
	require.True(t, start)
	require.False(t, ack)
	start, ack = c.disposeChild(1)
	require.False(t, start, "disposal is memoized")
	require.False(t, ack)
	require.False(t, c.quiescent())
	require.True(t, c.childDisposed(1), "the script waits for the acknowledgement")
	require.True(t, c.quiescent())
	_, ack = c.disposeChild(1)
	require.True(t, ack, "a disposed child is acknowledged at once")
	_, ack = c.disposeChild(99)
	require.True(t, ack, "an unknown child is acknowledged at once")

	c.cancel("why")
	refusal, ok := c.childStart()
	require.False(t, ok)
	require.Equal(t, "workflow run cancelled: why", refusal)

	g := newRunCore()
	g.claimFailure("x")
	refusal, _ = g.childStart()
	require.Equal(t, "workflow script is no longer available", refusal)
	s := newRunCore()
	s.childStart()
	s.claimScript(Result{StopReason: StopCompleted})
	refusal, closed, publish = s.startReturned(1, true)
	require.True(t, closed)
	require.False(t, publish, "a run returned after closure is refused")
	require.Equal(t, "workflow run already settled", refusal)
}

// A dumb model of the core's guarantees, checked over random schedules of every
// input the shell can feed it.
func TestRunCoreModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := newRunCore()
		var (
			claims      int
			final       Result
			cancelledAt = -1
			admitted    int
			published   []int
			pending     []int
			nextSeq     int
			openModel   = map[int]bool{}
			closed      = map[int]int{} // seq → times closed
		)
		claim := func(step int, r Result, ok bool) {
			if ok {
				claims++
				final = r
				for _, a := range c.closeOpen() {
					closed[a.Seq]++
					delete(openModel, a.Seq)
				}
			}
		}
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0:
				if c.cancel(rapid.SampledFrom([]string{"", "a", "b"}).Draw(t, "reason")) {
					require.Equal(t, -1, cancelledAt, "only the first cancel is processed")
					require.Zero(t, claims, "no cancel after a claim")
					cancelledAt = i
				}
			case 1:
				if _, ok := c.childStart(); ok {
					require.Zero(t, claims)
					admitted++
					nextSeq++
					pending = append(pending, nextSeq)
				}
			case 2:
				if len(pending) > 0 {
					seq := pending[0]
					pending = pending[1:]
					if _, _, pub := c.startReturned(seq, rapid.Bool().Draw(t, "started")); pub {
						require.Zero(t, claims)
						published = append(published, seq)
					}
				}
			case 3:
				if len(published) > 0 {
					seq := rapid.SampledFrom(published).Draw(t, "seq")
					if _, seen := closed[seq]; !seen && !openModel[seq] {
						if c.agentStart(AgentInfo{Seq: seq, Label: "l", ChildID: "c"}) {
							require.Zero(t, claims, "no agent-start after the claim")
							openModel[seq] = true
						}
					}
				}
			case 4:
				if len(published) > 0 {
					seq := rapid.SampledFrom(published).Draw(t, "seq")
					if a, ok := c.agentEnd(seq); ok {
						require.True(t, openModel[seq], "an agent-end closes an open start")
						require.Equal(t, seq, a.Seq)
						delete(openModel, seq)
						closed[seq]++
					}
				}
			case 5:
				if len(published) > 0 {
					seq := rapid.SampledFrom(published).Draw(t, "seq")
					if start, _ := c.disposeChild(seq); start {
						c.childDisposed(seq)
					}
				}
			case 6:
				res := Result{StopReason: StopCompleted, Value: json.RawMessage("1"), AgentsStarted: admitted}
				if rapid.Bool().Draw(t, "error") {
					res = Result{StopReason: StopError, Error: "e", AgentsStarted: admitted}
				}
				r, ok := c.claimScript(res)
				if ok && cancelledAt >= 0 {
					require.Equal(t, StopCancelled, r.StopReason, "a cancel processed first wins over the script's result")
				}
				claim(i, r, ok)
			case 7:
				r, ok := c.claimFailure("f")
				if ok {
					require.Equal(t, admitted, r.AgentsStarted, "host count")
				}
				claim(i, r, ok)
			case 8:
				r, ok := c.claimGrace()
				if ok {
					require.GreaterOrEqual(t, cancelledAt, 0, "grace claims only a cancelled run")
				}
				claim(i, r, ok)
			case 9:
				for _, seq := range c.reap() {
					c.childDisposed(seq)
				}
			}
			require.Equal(t, admitted, c.accepted)
			require.LessOrEqual(t, claims, 1, "claimed at most once")
			if claims == 1 {
				require.Equal(t, final, c.result, "the first claim's result is final")
				require.False(t, c.narration())
				require.Empty(t, c.open, "no open agent-start survives the claim")
				require.Equal(t, final.StopReason != StopCompleted, final.Error != "")
			}
		}
		for seq, n := range closed {
			require.Equal(t, 1, n, "agent-start %d closed exactly once", seq)
		}
	})
}
