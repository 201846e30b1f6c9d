package harness

import (
	"context"
	"fmt"
	"sync"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
)

// Race races a job's settlement against callers, for testing a producer's
// cancellation: it starts the job, lets the producer run while Kills kills, Waits
// waits, Reads reads and Gets gets run at once (each after seeded scheduling noise),
// and checks everything they saw — and every outcome the producer sent on Done —
// against the settlement model: one terminal state, the first outcome wins, every
// later observation agrees.
//
// The zero counts mean one of each. Jobs is required; Caller is the session the
// calls run as (the job's owner's, or "" for an unowned job).
type Race struct {
	Jobs                      *registry.Client
	Caller                    registry.Caller
	Seed                      uint64
	Kills, Waits, Reads, Gets int
	NoisePercent              int // scheduling noise before each call; 0 means 50
}

// Run starts spec as a job and races the calls against it (see Race). It returns
// the settled snapshot and, if the history is not linearizable, a
// *LinearizabilityError naming the run (its history, and an HTML timeline under
// $TROUPE_ARTIFACTS). A job that does not settle within DefaultWaitTimeout is an
// error too.
func (r Race) Run(name string, spec job.Spec) (*messages.JobSnapshot, error) {
	var h History
	quit := make(chan struct{})
	var forwarders sync.WaitGroup
	defer forwarders.Wait()
	defer close(quit)
	run := spec.Run
	stream := false // set by Run, inside Start: Start's reply orders it before its use
	if run != nil { // (nil: Start refuses the spec with its coded error)
		spec.Run = wrapRun(run, &h, &stream, quit, &forwarders)
	}
	id, err := r.Jobs.Start(context.Background(), spec)
	if err != nil {
		return nil, err
	}
	noise := Noise(r.Seed, orDefault(r.NoisePercent, 50))
	ctx := context.Background()
	client := 0
	var calls sync.WaitGroup
	race := func(n int, op OpKind, call func() Output) {
		for range max(n, 1) {
			client++
			c := client
			calls.Go(func() {
				noise()
				end := h.Call(c, Input{Op: op, Reason: "race", Stream: stream})
				end(call())
			})
		}
	}
	race(r.Kills, OpKill, func() Output {
		res, snap, err := r.Jobs.Kill(ctx, id, r.Caller, registry.KillOptions{Reason: "race"})
		return Output{Err: ErrOf(err), HasSnap: snap != nil, Snap: SnapOf(snap), Kill: res}
	})
	race(r.Waits, OpWait, func() Output {
		snap, err := r.Jobs.Wait(ctx, id, DefaultWaitTimeout, r.Caller)
		return Output{Err: ErrOf(err), HasSnap: snap != nil, Snap: SnapOf(snap)}
	})
	race(r.Reads, OpRead, func() Output {
		text, snap, err := r.Jobs.Read(ctx, id, r.Caller)
		return Output{Err: ErrOf(err), HasSnap: snap != nil, Snap: SnapOf(snap), Text: text}
	})
	race(r.Gets, OpGet, func() Output {
		snap, err := r.Jobs.Get(ctx, id, r.Caller)
		return Output{Err: ErrOf(err), HasSnap: snap != nil, Snap: SnapOf(snap)}
	})
	calls.Wait()
	settleCtx, cancel := context.WithTimeout(ctx, DefaultWaitTimeout)
	defer cancel()
	end := h.Call(0, Input{Op: OpAwait})
	snap, err := r.Jobs.AwaitSettled(settleCtx, id, r.Caller)
	end(Output{Err: ErrOf(err), HasSnap: snap != nil, Snap: SnapOf(snap)})
	if err != nil {
		return nil, fmt.Errorf("%s: %s did not settle: %w", name, id, err)
	}
	return snap, CheckSettlement(name, h.Operations())
}

// wrapRun records each offer of run's producer: its OnSettle calls are wrapped, its
// Done passes through forwardOffers.
func wrapRun(run func() (job.Hooks, error), h *History, stream *bool, quit <-chan struct{},
	forwarders *sync.WaitGroup) func() (job.Hooks, error) {
	return func() (job.Hooks, error) {
		hooks, err := run()
		if err != nil {
			return hooks, err
		}
		*stream = hooks.ReadOutput != nil
		if onSettle := hooks.OnSettle; onSettle != nil {
			hooks.OnSettle = func(settle func(job.Outcome)) {
				onSettle(func(o job.Outcome) {
					h.Open(0, Input{Op: OpOffer, Source: "producer", Outcome: o})
					settle(o)
				})
			}
			return hooks, nil
		}
		if hooks.Done == nil {
			return hooks, nil
		}
		done, fwd := hooks.Done, make(chan job.Outcome, 1)
		hooks.Done = fwd
		forwarders.Go(func() { forwardOffers(h, done, fwd, quit) })
		return hooks, nil
	}
}

// forwardOffers records each outcome the producer sends (or Done closed) as an
// offer, then hands it to the job.
func forwardOffers(h *History, done <-chan job.Outcome, fwd chan<- job.Outcome, quit <-chan struct{}) {
	select {
	case o, ok := <-done:
		h.Open(0, Input{Op: OpOffer, Source: "producer", Outcome: o, Closed: !ok})
		if !ok {
			close(fwd)
			return
		}
		fwd <- o // buffered: the job takes at most this one
	case <-quit:
	}
}

func orDefault(v, dflt int) int {
	if v == 0 {
		return dflt
	}
	return v
}
