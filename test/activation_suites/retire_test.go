package activationsuites

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
)

// TestFencedActivationAnswersEveryFollowup: two managers share one store (two
// processes would), so B's cold resume fences A's resident Activation of c. When
// A's held turn returns, A's next turn hits its stale epoch and A retires. Every
// followup racing that moment gets an answer — accepted (by a later cold resume) or
// refused with a coded error — and none waits forever (a plain Stop used to drop
// the submits in A's mailbox, and their callers hung).
func TestFencedActivationAnswersEveryFollowup(t *testing.T) {
	inner := session.NewMemory()
	hist := &history{}
	a := newWorld(t, worldOpts{mode: stress, seed: 1, inner: inner, hist: hist})
	b := newWorld(t, worldOpts{mode: stress, seed: 2, inner: inner, hist: hist})
	pa, pb := a.parent("P"), b.parent("P")
	for round := range 4 { // each round catches a lost answer about half the time
		id := fmt.Sprintf("c%d", round)
		hold := a.runner.holdAll()
		a.start(pa, id, holdPrefix+"start "+id) // resident in A, first turn held
		a.runner.awaitStarted(1)
		_, err := a.followup(pa, id, "queued in A "+id, coordinator("P")) // runs next in A
		require.NoError(t, err)
		_, err = b.followup(pb, id, "from B "+id, coordinator("P")) // B takes the session: A is fenced
		require.NoError(t, err)
		b.runner.awaitTurns(round + 1)

		const racers = 16
		errs := make(chan error, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				_, err := a.followup(pa, id, fmt.Sprintf("racer %s-%d", id, i), coordinator("P"))
				errs <- err
			})
			if i == racers/2 {
				close(hold) // A's held turn returns; its next turn finds the epoch stale
			}
		}
		wg.Wait() // a lost answer hangs here (followup's ctx bounds only admission)
		close(errs)
		accepted, refused := 0, 0
		for err := range errs {
			if err == nil {
				accepted++
				continue
			}
			refused++
			require.NotEmpty(t, messages.CodeOf(err), "an uncoded refusal: %v", err)
		}
		t.Logf("%s: %d accepted, %d refused", id, accepted, refused)
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	require.NoError(t, a.m.Drain(ctx))
	require.NoError(t, b.m.Drain(ctx))
	require.Positive(t, a.store.stale.Load()+b.store.stale.Load(), "A never hit its stale epoch")
}
