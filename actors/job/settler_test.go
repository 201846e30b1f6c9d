package job

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// settleCalls records the outcomes troupe's settle function was called with.
type settleCalls struct {
	mu  sync.Mutex
	got []Outcome
}

func (c *settleCalls) settle(o Outcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, o)
}

func (c *settleCalls) outcomes() []Outcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Outcome(nil), c.got...)
}

func TestSettlerDeliversAnOutcomeSettledBeforeOnSettle(t *testing.T) {
	var s Settler
	first := Outcome{Status: Completed, Detail: "exit code: 0", Output: "out"}
	require.True(t, s.Settle(first))
	require.False(t, s.Settle(Outcome{Status: Failed}), "only the first Settle counts")
	require.True(t, s.Settled())
	var calls settleCalls
	s.OnSettle(calls.settle)
	require.Equal(t, []Outcome{first}, calls.outcomes())
	s.OnSettle(calls.settle) // a second subscription is ignored
	require.Equal(t, []Outcome{first}, calls.outcomes())
}

func TestSettlerDeliversALaterOutcomeOnTheSettlingGoroutine(t *testing.T) {
	var s Settler
	var calls settleCalls
	s.OnSettle(calls.settle)
	require.Empty(t, calls.outcomes(), "nothing is delivered before Settle")
	require.False(t, s.Settled())
	o := Outcome{Status: Killed, Detail: "signal: SIGTERM"}
	require.True(t, s.Settle(o))
	// Settle returned: the delivery ran on its goroutine, synchronously.
	require.Equal(t, []Outcome{o}, calls.outcomes())
	require.False(t, s.Settle(Outcome{Status: Completed}))
	require.Equal(t, []Outcome{o}, calls.outcomes())
}

// Settle and OnSettle racing from many goroutines: exactly one delivery, of the
// winning Settle's outcome (run with -race).
func TestSettlerRacingSettlesDeliverExactlyOnce(t *testing.T) {
	for range 200 {
		var s Settler
		var calls settleCalls
		var wg sync.WaitGroup
		won := make(chan Outcome, 8)
		for i := range 8 {
			wg.Go(func() {
				o := Outcome{Status: Completed, Output: string(rune('a' + i))}
				if s.Settle(o) {
					won <- o
				}
			})
		}
		wg.Go(func() { s.OnSettle(calls.settle) })
		wg.Wait()
		close(won)
		var winners []Outcome
		for o := range won {
			winners = append(winners, o)
		}
		require.Len(t, winners, 1, "exactly one Settle wins")
		require.Equal(t, winners, calls.outcomes(), "the winner, delivered once")
	}
}

func TestCallbackWatchDeliversOnceAndNotAfterRemove(t *testing.T) {
	rec := newRecorder(2)
	w := &funcTarget{f: rec.deliver(0)}
	o := Outcome{Status: Completed, Output: "x"}
	settleOnce(w, o)
	settleOnce(w, Outcome{Status: Failed}) // a producer calling settle twice: ignored
	require.Equal(t, delivery{i: 0, o: o, ok: true}, <-rec.ch)
	require.EqualValues(t, 1, rec.counts[0].Load())

	removed := &funcTarget{f: rec.deliver(1)}
	removed.w.Remove()
	removed.w.Remove() // idempotent, and needs no shard
	settleOnce(removed, o)
	require.EqualValues(t, 0, rec.counts[1].Load(), "a removed watch delivers nothing")
}
