package harness_test

import (
	"context"
	"fmt"
	"github.com/troupe-rt/troupe/actors/registry"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/harness"
)

// A System whose actors all run on a seeded dispatcher, and a job's history checked
// against the settlement model.
func ExampleNewDispatcher() {
	d := harness.NewDispatcher(42) // in a test: harness.Seed(t)
	sys, err := troupe.New(troupe.Config{Dispatcher: d})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	defer func() {
		_ = sys.Shutdown(ctx)
		d.Close() // after the system: its actors run on d
	}()
	if _, err := sys.Jobs().AttachController(ctx, sys.Scope(), "example"); err != nil {
		panic(err)
	}

	var h harness.History
	done := make(chan job.Outcome, 1)
	id, err := sys.Jobs().Start(ctx, job.Spec{Kind: "bash", Label: "example", Run: func() (job.Hooks, error) {
		return job.Hooks{Done: done, Cancel: func(string) error { return nil }}, nil
	}})
	if err != nil {
		panic(err)
	}
	o := job.Outcome{Status: job.Completed, Detail: "exit code: 0"}
	h.Open(0, harness.Input{Op: harness.OpOffer, Source: "producer", Outcome: o})
	done <- o

	end := h.Call(1, harness.Input{Op: harness.OpWait})
	snap, err := sys.Jobs().Wait(ctx, id, harness.DefaultWaitTimeout, registry.NoCaller)
	end(harness.Output{Err: harness.ErrOf(err), HasSnap: snap != nil, Snap: harness.SnapOf(snap)})

	fmt.Println(id, snap.Status.Name(), snap.GetDetail(), snap.Reported)
	fmt.Println("linearizable:", harness.CheckSettlement("example", h.Operations()) == nil)
	// Output:
	// bash-1 completed exit code: 0 true
	// linearizable: true
}
