package activation

import (
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/troupe-rt/troupe/session"
)

func msg(id string) session.InboxMessage { return session.InboxMessage{ID: id} }

func started(eff Effect) string {
	if eff.StartTurn == nil {
		return ""
	}
	return eff.StartTurn.ID
}

func TestCoreTable(t *testing.T) {
	type step struct {
		do   func(c *Core) Effect
		want Effect // compared on StartTurn id, CancelTurn, Settle, Finish, discarded ids
		res  Residency
	}
	admit := func(id string) func(*Core) Effect { return func(c *Core) Effect { return c.Admit(msg(id), true) } }
	quiet := func(id string) func(*Core) Effect { return func(c *Core) Effect { return c.Admit(msg(id), false) } }
	ended := func(c *Core) Effect { return c.TurnEnded() }
	intr := func(c *Core) Effect { return c.Interrupt() }
	closeC := func(c *Core) Effect { return c.Close() }
	own := func(id string) func(*Core) Effect { return func(c *Core) Effect { c.Own(id); return Effect{} } }
	release := func(id string) func(*Core) Effect { return func(c *Core) Effect { return c.Release(id) } }
	start := func(id string) Effect { return Effect{StartTurn: &session.InboxMessage{ID: id}} }
	cases := []struct {
		name  string
		steps []step
	}{
		{"one turn then settle", []step{
			{admit("a"), start("a"), Running},
			{ended, Effect{Settle: true}, Settled},
		}},
		{"fifo while a turn runs", []step{
			{admit("a"), start("a"), Running},
			{admit("b"), Effect{}, Running},
			{admit("c"), Effect{}, Running},
			{ended, start("b"), Running},
			{ended, start("c"), Running},
			{ended, Effect{Settle: true}, Settled},
		}},
		{"interrupt parks until a waking send, parked first", []step{
			{admit("a"), start("a"), Running},
			{admit("b"), Effect{}, Running},
			{intr, Effect{CancelTurn: true}, Running},
			{ended, Effect{}, Waiting},
			{intr, Effect{}, Waiting},
			{admit("c"), start("b"), Running},
			{ended, start("c"), Running},
			{ended, Effect{Settle: true}, Settled},
		}},
		{"quiet message waits for a wake, or is settled away", []step{
			{quiet("q"), Effect{Settle: true}, Settled},
			{admit("a"), start("q"), Running},
			{ended, start("a"), Running},
			{ended, Effect{Settle: true}, Settled},
		}},
		{"owned children keep it waiting", []step{
			{own("k"), Effect{}, Waiting},
			{admit("a"), start("a"), Running},
			{ended, Effect{}, Waiting},
			{release("k"), Effect{Settle: true}, Settled},
		}},
		{"close cancels, discards, and finishes after the turn", []step{
			{admit("a"), start("a"), Running},
			{admit("b"), Effect{}, Running},
			{closeC, Effect{CancelTurn: true, Discarded: []session.InboxMessage{msg("b")}}, Running},
			{admit("c"), Effect{}, Running},
			{ended, Effect{Finish: true}, Settled},
			{closeC, Effect{}, Settled},
		}},
		{"close finishes child-first", []step{
			{own("k1"), Effect{}, Waiting},
			{own("k2"), Effect{}, Waiting},
			{closeC, Effect{}, Waiting},
			{release("k1"), Effect{}, Waiting},
			{release("k2"), Effect{Finish: true}, Settled},
			{release("k2"), Effect{}, Settled},
		}},
		{"close of an idle core finishes at once", []step{
			{closeC, Effect{Finish: true}, Settled},
			{intr, Effect{}, Settled},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCore()
			for i, s := range tc.steps {
				got := s.do(c)
				require.Equal(t, started(s.want), started(got), "step %d: start", i)
				require.Equal(t, s.want.CancelTurn, got.CancelTurn, "step %d: cancel", i)
				require.Equal(t, s.want.Settle, got.Settle, "step %d: settle", i)
				require.Equal(t, s.want.Finish, got.Finish, "step %d: finish", i)
				require.Equal(t, ids(s.want.Discarded), ids(got.Discarded), "step %d: discarded", i)
				require.Equal(t, s.res, c.Residency(), "step %d: residency", i)
			}
		})
	}
}

func ids(ms []session.InboxMessage) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

func TestCoreRestore(t *testing.T) {
	c := NewCore()
	q := msg("q")
	q.Quiet = true
	eff := c.Restore([]session.InboxMessage{msg("a"), q}, []string{"k"})
	require.Equal(t, "a", started(eff))
	require.Equal(t, []string{"k"}, c.Owned())
	require.Equal(t, "q", started(c.TurnEnded()))
	require.Equal(t, Effect{}, c.TurnEnded())
	require.Equal(t, Waiting, c.Residency())

	quietOnly := NewCore()
	require.True(t, quietOnly.Restore([]session.InboxMessage{q}, nil).Settle, "a quiet message alone does not run")
}

// model is the naive reference: a list of accepted ids, a flag for the running
// one, parking, and wakefulness, written the obvious way.
type model struct {
	accepted []string // in acceptance order, not yet started
	running  string
	parked   bool
	awake    bool
	ran      []string // started turns, in order
	closed   bool
}

// TestCoreMatchesNaiveModel checks FIFO order and parking against the model: turns
// start in acceptance order, none is lost or doubled, an interrupt holds the queue
// until a waking send, and after Close nothing starts.
func TestCoreMatchesNaiveModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c, m := NewCore(), &model{}
		var ran []string
		n := 0
		onEffect := func(eff Effect) {
			if eff.StartTurn != nil {
				ran = append(ran, eff.StartTurn.ID)
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"admit": func(t *rapid.T) {
				n++
				id := strconv.Itoa(n)
				wake := rapid.Bool().Draw(t, "wake")
				onEffect(c.Admit(session.InboxMessage{ID: id, Quiet: !wake}, wake))
				if m.closed {
					return
				}
				m.accepted = append(m.accepted, id)
				if wake {
					m.parked, m.awake = false, true
				}
				m.step()
			},
			"end": func(t *rapid.T) {
				if m.running == "" {
					t.Skip("no turn runs")
				}
				onEffect(c.TurnEnded())
				m.running = ""
				m.step()
			},
			"interrupt": func(t *rapid.T) {
				eff := c.Interrupt()
				onEffect(eff)
				if m.closed {
					require.False(t, eff.CancelTurn)
					return
				}
				require.Equal(t, m.running != "", eff.CancelTurn)
				m.parked, m.awake = true, false
			},
			"close": func(t *rapid.T) {
				if rapid.IntRange(0, 9).Draw(t, "rarely") != 0 {
					t.Skip("close rarely")
				}
				eff := c.Close()
				onEffect(eff)
				if !m.closed {
					require.Equal(t, append([]string{}, m.accepted...), ids(eff.Discarded))
					m.accepted, m.closed = nil, true
				}
			},
			"": func(t *rapid.T) {
				require.Equal(t, m.ran, ran, "turns start in acceptance order")
				if m.running == "" {
					require.Nil(t, c.Running())
				} else {
					require.Equal(t, m.running, c.Running().ID)
				}
				require.Equal(t, append([]string{}, m.accepted...), ids(c.Queued()))
				require.Equal(t, m.parked && !m.closed, c.Parked())
			},
		})
		// None lost or doubled: every admitted id before Close either ran or was
		// discarded or is still queued, exactly once.
		seen := slices.Clone(ran)
		slices.Sort(seen)
		require.Equal(t, len(seen), len(slices.Compact(seen)))
	})
}

func (m *model) step() {
	if m.closed {
		return
	}
	if m.running == "" && !m.parked && m.awake && len(m.accepted) > 0 {
		m.running, m.accepted = m.accepted[0], m.accepted[1:]
		m.ran = append(m.ran, m.running)
	}
	if m.running == "" && len(m.accepted) == 0 {
		m.awake = false
	}
}

func TestSuspendKeepsTheQueueForTheJournal(t *testing.T) {
	c := NewCore()
	c.Admit(session.InboxMessage{ID: "a"}, true)
	c.Admit(session.InboxMessage{ID: "b"}, true)
	eff := c.Suspend()
	require.True(t, eff.CancelTurn)
	require.Empty(t, eff.Discarded, "a shutdown keeps queued messages in the journal")
	c2 := NewCore()
	c2.Admit(session.InboxMessage{ID: "a"}, true)
	c2.Admit(session.InboxMessage{ID: "b"}, true)
	require.Len(t, c2.Close().Discarded, 1, "a drain of the child discards its queue")
}
