package job

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"pgregory.net/rapid"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// step is one event fed to a live Core before the settlement under test.
type step struct {
	name string
	do   func(*Core)
}

func kill(claim bool, reason string) step {
	return step{fmt.Sprintf("kill(claim=%v,%q)", claim, reason), func(c *Core) { c.KillLanded(claim, reason) }}
}

var (
	teardownBegin     = step{"teardownBegin", func(c *Core) { c.TeardownBegin() }}
	teardownCancelled = step{"teardownCancelled", func(c *Core) { c.TeardownCancelled() }}
)

func addWaiter(tok uint64) step {
	return step{fmt.Sprintf("addWaiter(%d)", tok), func(c *Core) { c.AddWaiter(tok) }}
}

func removeWaiter(tok uint64) step {
	return step{fmt.Sprintf("removeWaiter(%d)", tok), func(c *Core) { c.RemoveWaiter(tok) }}
}

func TestSettleDecision(t *testing.T) {
	cases := []struct {
		name    string
		steps   []step
		outcome Outcome
		want    Decision
	}{
		// Plain producer outcomes.
		{
			name:    "completed with detail and output",
			outcome: Outcome{Status: Completed, Detail: "exit code: 0", Output: "out"},
			want:    Decision{Status: Completed, Detail: "exit code: 0", HasDetail: true, Output: "out"},
		},
		{
			name:    "completed without detail keeps detail absent",
			outcome: Outcome{Status: Completed},
			want:    Decision{Status: Completed},
		},
		{
			name:    "producer killed itself: no kill landed, producer detail only",
			outcome: Outcome{Status: Killed, Detail: "signal: terminated"},
			want:    Decision{Status: Killed, Detail: "signal: terminated", HasDetail: true},
		},
		{
			name:    "failed with detail",
			outcome: Outcome{Status: Failed, Detail: "Error: transport exploded"},
			want:    Decision{Status: Failed, Detail: "Error: transport exploded", HasDetail: true},
		},

		// Kill-reason merge (SPEC §2.9 Rev B).
		{
			name:    "killed: producer detail; reason",
			steps:   []step{kill(true, "not needed")},
			outcome: Outcome{Status: Killed, Detail: "signal: terminated"},
			want:    Decision{Status: Killed, Detail: "signal: terminated; not needed", HasDetail: true, Reported: true},
		},
		{
			name:    "killed: reason alone when the producer gave no detail",
			steps:   []step{kill(true, "not needed")},
			outcome: Outcome{Status: Killed},
			want:    Decision{Status: Killed, Detail: "not needed", HasDetail: true, Reported: true},
		},
		{
			name:    "killed: last writer wins",
			steps:   []step{kill(true, "first"), kill(true, "second")},
			outcome: Outcome{Status: Killed, Detail: "d"},
			want:    Decision{Status: Killed, Detail: "d; second", HasDetail: true, Reported: true},
		},
		{
			name:    "killed: a kill without a reason does not erase the earlier one",
			steps:   []step{kill(true, "first"), kill(true, "")},
			outcome: Outcome{Status: Killed},
			want:    Decision{Status: Killed, Detail: "first", HasDetail: true, Reported: true},
		},
		{
			name:    "killed: last writer wins across claiming and human kills",
			steps:   []step{kill(true, "model"), kill(false, "cancelled by the user")},
			outcome: Outcome{Status: Killed, Detail: "d"},
			want:    Decision{Status: Killed, Detail: "d; cancelled by the user", HasDetail: true, Reported: true},
		},
		{
			name:    "killed: no reason at all keeps the producer detail",
			steps:   []step{kill(true, "")},
			outcome: Outcome{Status: Killed, Detail: "signal: killed"},
			want:    Decision{Status: Killed, Detail: "signal: killed", HasDetail: true, Reported: true},
		},
		{
			name:    "killed: no reason and no producer detail leaves detail absent",
			steps:   []step{kill(true, "")},
			outcome: Outcome{Status: Killed},
			want:    Decision{Status: Killed, Reported: true},
		},

		// Outran-kill: the reason describes a kill that never landed.
		{
			name:    "outran kill: completed keeps the producer detail, claim lapses",
			steps:   []step{kill(true, "stop")},
			outcome: Outcome{Status: Completed, Detail: "exit code: 0", Output: "o"},
			want:    Decision{Status: Completed, Detail: "exit code: 0", HasDetail: true, Output: "o"},
		},
		{
			name:    "outran kill: failed keeps the producer detail, claim lapses",
			steps:   []step{kill(true, "stop")},
			outcome: Outcome{Status: Failed, Detail: "Error: boom"},
			want:    Decision{Status: Failed, Detail: "Error: boom", HasDetail: true},
		},
		{
			name:    "outran kill: no producer detail means no detail, not the reason",
			steps:   []step{kill(true, "stop")},
			outcome: Outcome{Status: Completed},
			want:    Decision{Status: Completed},
		},

		// Reported (SPEC §1.3 rule 4).
		{
			name:    "NoClaim kill never claims",
			steps:   []step{kill(false, "cancelled by the user")},
			outcome: Outcome{Status: Killed},
			want:    Decision{Status: Killed, Detail: "cancelled by the user", HasDetail: true},
		},
		{
			name:    "NoClaim kill does not clear an earlier claim",
			steps:   []step{kill(true, ""), kill(false, "")},
			outcome: Outcome{Status: Killed},
			want:    Decision{Status: Killed, Reported: true},
		},
		{
			name:    "a claim after a NoClaim kill claims",
			steps:   []step{kill(false, ""), kill(true, "")},
			outcome: Outcome{Status: Killed},
			want:    Decision{Status: Killed, Reported: true},
		},
		{
			name:    "a pending waiter claims a completion",
			steps:   []step{addWaiter(7)},
			outcome: Outcome{Status: Completed},
			want:    Decision{Status: Completed, Reported: true, Waiters: []uint64{7}},
		},
		{
			name:    "a pending waiter claims even after a NoClaim kill the job outran",
			steps:   []step{kill(false, "user"), addWaiter(1)},
			outcome: Outcome{Status: Failed},
			want:    Decision{Status: Failed, Reported: true, Waiters: []uint64{1}},
		},
		{
			name:    "a removed waiter claims nothing",
			steps:   []step{addWaiter(1), removeWaiter(1)},
			outcome: Outcome{Status: Completed},
			want:    Decision{Status: Completed},
		},
		{
			name:    "removing an unknown token changes nothing",
			steps:   []step{addWaiter(1), removeWaiter(2)},
			outcome: Outcome{Status: Completed},
			want:    Decision{Status: Completed, Reported: true, Waiters: []uint64{1}},
		},
		{
			name:    "waiters are released in registration order",
			steps:   []step{addWaiter(3), addWaiter(1), addWaiter(2), removeWaiter(1), addWaiter(9)},
			outcome: Outcome{Status: Completed},
			want:    Decision{Status: Completed, Reported: true, Waiters: []uint64{3, 2, 9}},
		},
		{
			name:    "teardown begun claims a completion",
			steps:   []step{teardownBegin},
			outcome: Outcome{Status: Completed, Detail: "exit code: 0"},
			want:    Decision{Status: Completed, Detail: "exit code: 0", HasDetail: true, Reported: true},
		},
		{
			name:    "teardown cancel then killed: no kill reason recorded by teardown",
			steps:   []step{teardownBegin, teardownCancelled},
			outcome: Outcome{Status: Killed, Detail: "signal: terminated"},
			want:    Decision{Status: Killed, Detail: "signal: terminated", HasDetail: true, Reported: true},
		},
		{
			name:    "teardown force-fail (cancel threw) is reported",
			steps:   []step{teardownBegin},
			outcome: Outcome{Status: Failed, Detail: "cancel threw during teardown; work may be orphaned: Error: x"},
			want:    Decision{Status: Failed, Detail: "cancel threw during teardown; work may be orphaned: Error: x", HasDetail: true, Reported: true},
		},
		{
			name:    "teardown after a human kill: reason merged, reported",
			steps:   []step{kill(false, "cancelled by the user"), teardownBegin, teardownCancelled},
			outcome: Outcome{Status: Killed, Detail: "d"},
			want:    Decision{Status: Killed, Detail: "d; cancelled by the user", HasDetail: true, Reported: true},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCore()
			for _, s := range tc.steps {
				s.do(&c)
				require.True(t, c.Live(), "after %s", s.name)
			}
			d, won := c.Settle(tc.outcome)
			require.True(t, won)
			if len(d.Waiters) == 0 {
				d.Waiters = nil // empty and nil are the same release list
			}
			require.Equal(t, tc.want, d)
			require.Equal(t, tc.outcome.Status, c.Status())
			require.False(t, c.Live())
			require.Empty(t, c.Waiters(), "settlement releases every waiter")
		})
	}
}

func TestLiveStateTransitions(t *testing.T) {
	cases := []struct {
		name     string
		steps    []step
		status   Status
		reported bool
	}{
		{"new", nil, Running, false},
		{"claiming kill", []step{kill(true, "")}, Stopping, true},
		{"human kill", []step{kill(false, "cancelled by the user")}, Stopping, false},
		{"human kill then claiming kill", []step{kill(false, ""), kill(true, "")}, Stopping, true},
		{"claiming kill then human kill", []step{kill(true, ""), kill(false, "")}, Stopping, true},
		{"teardown begun, cancel not yet returned", []step{teardownBegin}, Running, true},
		{"teardown cancel returned", []step{teardownBegin, teardownCancelled}, Stopping, true},
		{"waiter alone does not claim while live", []step{addWaiter(1)}, Running, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCore()
			for _, s := range tc.steps {
				s.do(&c)
			}
			require.Equal(t, tc.status, c.Status())
			require.True(t, c.Live())
			require.Equal(t, tc.reported, c.Reported())
		})
	}
}

func TestFirstOutcomeWins(t *testing.T) {
	outcomes := []Outcome{
		{Status: Completed, Detail: "exit code: 0", Output: "o"},
		{Status: Killed, Detail: "signal"},
		{Status: Failed, Detail: "Error: x"},
	}
	for _, first := range outcomes {
		for _, second := range outcomes {
			t.Run(first.Status.Name()+"-then-"+second.Status.Name(), func(t *testing.T) {
				c := NewCore()
				c.AddWaiter(1)
				d1, won := c.Settle(first)
				require.True(t, won)
				require.Equal(t, first.Status, d1.Status)
				require.Equal(t, []uint64{1}, d1.Waiters)

				d2, won := c.Settle(second)
				require.False(t, won, "a second outcome must lose")
				require.Equal(t, Decision{}, d2)
				require.Equal(t, first.Status, c.Status())

				// Events after settlement change nothing.
				c.KillLanded(true, "late")
				c.TeardownBegin()
				c.TeardownCancelled()
				require.Equal(t, first.Status, c.Status())
				require.False(t, c.Live())
				_, won = c.Settle(first)
				require.False(t, won)
			})
		}
	}
}

func TestSettleDecisionIsNotAliased(t *testing.T) {
	c := NewCore()
	c.AddWaiter(1)
	c.AddWaiter(2)
	d, won := c.Settle(Outcome{Status: Completed})
	require.True(t, won)
	// Whatever the core does with its waiter list afterwards must not reach the decision.
	c.AddWaiter(99)
	c.RemoveWaiter(1)
	require.Equal(t, []uint64{1, 2}, d.Waiters)
}

func TestWaiterAddRemove(t *testing.T) {
	c := NewCore()
	require.Empty(t, c.Waiters())
	require.False(t, c.RemoveWaiter(1), "removing from an empty list")

	c.AddWaiter(1)
	c.AddWaiter(2)
	c.AddWaiter(3)
	require.Equal(t, []uint64{1, 2, 3}, c.Waiters())

	require.True(t, c.RemoveWaiter(2))
	require.Equal(t, []uint64{1, 3}, c.Waiters())
	require.False(t, c.RemoveWaiter(2), "each wait is un-counted exactly once")
	require.Equal(t, []uint64{1, 3}, c.Waiters())

	require.True(t, c.RemoveWaiter(1))
	require.True(t, c.RemoveWaiter(3))
	require.Empty(t, c.Waiters())
	require.False(t, c.Reported(), "waiters never set the live claim")
}

func TestCheckOutcome(t *testing.T) {
	cases := []struct {
		name      string
		in        Outcome
		ok        bool
		want      Outcome
		violation string
	}{
		{
			name: "completed passes through",
			in:   Outcome{Status: Completed, Detail: "exit code: 0", Output: "o"}, ok: true,
			want: Outcome{Status: Completed, Detail: "exit code: 0", Output: "o"},
		},
		{
			name: "killed passes through",
			in:   Outcome{Status: Killed}, ok: true,
			want: Outcome{Status: Killed},
		},
		{
			name: "failed passes through",
			in:   Outcome{Status: Failed, Detail: "Error: x"}, ok: true,
			want: Outcome{Status: Failed, Detail: "Error: x"},
		},
		{
			name: "closed without a value",
			in:   Outcome{}, ok: false,
			want:      Outcome{Status: Failed, Detail: "Error: producer done channel closed without an outcome"},
			violation: "producer done channel closed without an outcome",
		},
		{
			name: "not ok wins over a terminal-looking value",
			in:   Outcome{Status: Completed, Detail: "d", Output: "o"}, ok: false,
			want:      Outcome{Status: Failed, Detail: "Error: producer done channel closed without an outcome"},
			violation: "producer done channel closed without an outcome",
		},
		{
			name: "running is an unknown outcome status",
			in:   Outcome{Status: Running, Detail: "d", Output: "o"}, ok: true,
			want:      Outcome{Status: Failed, Detail: `Error: producer outcome has unknown status "running"`},
			violation: `producer outcome has unknown status "running"`,
		},
		{
			name: "stopping is an unknown outcome status",
			in:   Outcome{Status: Stopping}, ok: true,
			want:      Outcome{Status: Failed, Detail: `Error: producer outcome has unknown status "stopping"`},
			violation: `producer outcome has unknown status "stopping"`,
		},
		{
			name: "the zero status",
			in:   Outcome{}, ok: true,
			want:      Outcome{Status: Failed, Detail: `Error: producer outcome has unknown status "JOB_STATUS_UNSPECIFIED"`},
			violation: `producer outcome has unknown status "JOB_STATUS_UNSPECIFIED"`,
		},
		{
			name: "out of range status",
			in:   Outcome{Status: Status(42)}, ok: true,
			want:      Outcome{Status: Failed, Detail: `Error: producer outcome has unknown status "42"`},
			violation: `producer outcome has unknown status "42"`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, violation := CheckOutcome(tc.in, tc.ok)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.violation, violation)
			require.True(t, got.Status.Terminal(), "a checked outcome is always settleable")
		})
	}
}

// coreModel is the naive reference for Core: SPEC §1.3 rule 4 and §2.9 written out
// as plainly as possible.
type coreModel struct {
	settled   bool
	status    Status
	claimed   bool
	teardown  bool
	reason    string
	waiters   []uint64
	nextToken uint64
	wins      int
}

func (m *coreModel) expect(o Outcome) Decision {
	d := Decision{Status: o.Status, Output: o.Output}
	if o.Detail != "" {
		d.Detail, d.HasDetail = o.Detail, true
	}
	if o.Status == Killed && m.reason != "" {
		if o.Detail == "" {
			d.Detail = m.reason
		} else {
			d.Detail = o.Detail + "; " + m.reason
		}
		d.HasDetail = true
	}
	switch {
	case len(m.waiters) > 0:
		d.Reported = true
	case m.teardown:
		d.Reported = true
	case m.claimed && o.Status == Killed:
		d.Reported = true
	}
	if len(m.waiters) > 0 {
		d.Waiters = slices.Clone(m.waiters)
	}
	return d
}

var (
	genOutcome = rapid.Custom(func(t *rapid.T) Outcome {
		return Outcome{
			Status: rapid.SampledFrom([]Status{Completed, Killed, Failed}).Draw(t, "status"),
			Detail: rapid.SampledFrom([]string{"", "exit code: 0", "signal: terminated"}).Draw(t, "detail"),
			Output: rapid.SampledFrom([]string{"", "out"}).Draw(t, "output"),
		}
	})
	genReason = rapid.SampledFrom([]string{"", "r1", "r2", "cancelled by the user"})
)

func TestCoreMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := NewCore()
		m := &coreModel{status: Running}

		settle := func(t *rapid.T, o Outcome) {
			wantLive := !m.settled
			var want Decision
			if wantLive {
				want = m.expect(o)
			}
			d, won := c.Settle(o)
			require.Equal(t, wantLive, won, "won")
			if won {
				m.wins++
				m.settled = true
				m.status = o.Status
				m.waiters = nil
				if len(d.Waiters) == 0 {
					d.Waiters = nil // empty and nil are the same release list
				}
				require.Equal(t, want, d)
			} else {
				require.Equal(t, Decision{}, d)
			}
		}

		t.Repeat(map[string]func(*rapid.T){
			"KillLanded": func(t *rapid.T) {
				claim := rapid.Bool().Draw(t, "claim")
				reason := genReason.Draw(t, "reason")
				c.KillLanded(claim, reason)
				if !m.settled {
					m.status = Stopping
					m.claimed = m.claimed || claim
					if reason != "" {
						m.reason = reason
					}
				}
			},
			"TeardownBegin": func(t *rapid.T) {
				c.TeardownBegin()
				if !m.settled {
					m.teardown = true
				}
			},
			"TeardownCancelled": func(t *rapid.T) {
				c.TeardownCancelled()
				if !m.settled {
					m.status = Stopping
				}
			},
			"AddWaiter": func(t *rapid.T) {
				if m.settled {
					t.Skip("the shell never adds a waiter to a settled job")
				}
				m.nextToken++
				c.AddWaiter(m.nextToken)
				m.waiters = append(m.waiters, m.nextToken)
			},
			"RemoveWaiter": func(t *rapid.T) {
				if m.settled {
					t.Skip("the shell never removes a waiter from a settled job")
				}
				// A pending token, or one that was never (or is no longer) pending.
				tok := rapid.Uint64Range(1, m.nextToken+1).Draw(t, "token")
				i := slices.Index(m.waiters, tok)
				require.Equal(t, i >= 0, c.RemoveWaiter(tok), "RemoveWaiter(%d)", tok)
				if i >= 0 {
					m.waiters = slices.Delete(m.waiters, i, i+1)
				}
			},
			"Settle": func(t *rapid.T) {
				settle(t, genOutcome.Draw(t, "outcome"))
			},
			"": func(t *rapid.T) {
				require.Equal(t, m.status, c.Status(), "status")
				require.Equal(t, !m.settled, c.Live(), "live")
				require.LessOrEqual(t, m.wins, 1, "at most one settlement wins")
				if !m.settled {
					require.Equal(t, m.claimed || m.teardown, c.Reported(), "live reported (rule 4)")
					require.Equal(t, len(m.waiters), len(c.Waiters()), "waiter count")
					if len(m.waiters) > 0 {
						require.Equal(t, m.waiters, c.Waiters(), "waiters in registration order")
					}
				}
			},
		})

		// Whatever happened, one more outcome makes exactly one winner in total.
		settle(t, genOutcome.Draw(t, "final outcome"))
		require.Equal(t, 1, m.wins, "exactly one settlement wins")
		require.False(t, c.Live())
	})
}
