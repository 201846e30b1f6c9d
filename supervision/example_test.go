package supervision_test

import (
	"context"
	"fmt"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/supervision"
)

// Following the tree: subscribe (a snapshot and the events after it), fold the
// events into the snapshot, and read a fresh snapshot.
func Example_tree() {
	ctx := context.Background()
	sys, _ := troupe.New(troupe.DefaultConfig())
	defer sys.Shutdown(ctx)
	sys.Jobs().AttachController(ctx, sys.Scope(), "my-tools")

	sub, snap, _ := sys.Tree().Subscribe(ctx)
	defer sub.Cancel()
	tree, _ := supervision.TreeOf(snap)

	done := make(chan job.Outcome, 1)
	done <- job.Outcome{Status: job.Completed, Detail: "exit code: 0"} // settles at once
	sys.Jobs().Start(ctx, job.Spec{Kind: "bash", Label: "true",
		Run: func() (job.Hooks, error) {
			return job.Hooks{Cancel: func(string) error { return nil }, Done: done}, nil
		}})

	for e := range sub.Events() {
		if err := tree.Apply(e); err != nil { // in sequence, accepted: the stream agrees
			panic(err)
		}
		if e.Node.Kind != supervision.KindJob {
			continue
		}
		fmt.Printf("%s %s status=%q cause=%s\n", e.Kind, e.Node, e.Status, e.Cause)
		if e.Kind == supervision.Stopped {
			break
		}
	}
	now, _ := sys.Tree().Snapshot(ctx)
	fmt.Print(now)
	// Output:
	// spawned job/bash-1 status="" cause=none
	// settled job/bash-1 status="completed" cause=producer
	// stopped job/bash-1 status="" cause=none
	// seq 4
	// registry/registry running
}
