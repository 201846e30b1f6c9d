package main

import (
	"context"
	"fmt"
	"time"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/supervision"
)

// lifecycle follows one system's supervision tree (System.Tree) from its start: the
// nodes of the subscription's snapshot become lifecycle Events with status
// "present", every later lifecycle event one with its own status, and the
// events are folded into a Tree from the subscription's snapshot. After the
// system's shutdown the subscription ends, and the folded tree must be empty: no
// actor outlived its system, and the tree refused no event.
type lifecycle struct {
	sub     *supervision.Subscription
	tree    *supervision.Tree
	done    chan struct{}
	refused []error // events the fold refused (a gap or an impossible event)
}

// followTree subscribes to sys's tree and emits its events as generation gen's.
func (st *stage) followTree(sys *troupe.System, gen int) (*lifecycle, error) {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	sub, snap, err := sys.Tree().Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	tree, err := supervision.TreeOf(snap)
	if err != nil {
		sub.Cancel()
		return nil, err
	}
	lc := &lifecycle{sub: sub, tree: tree, done: make(chan struct{})}
	for _, n := range snap.Nodes { // the tree as the subscription found it
		st.emit(Event{Kind: KindLifecycle, System: gen, Who: n.Ref.String(), Status: "present",
			Text: "under " + n.Parent.String()})
	}
	go func() {
		defer close(lc.done)
		for e := range sub.Events() {
			if err := lc.tree.Apply(e); err != nil {
				lc.refused = append(lc.refused, err)
			}
			st.emit(lifecycleEvent(gen, e))
		}
	}()
	return lc, nil
}

// lifecycleEvent renders e: who is the node, status what happened to it, detail
// why (the cause, and a settled job's status and detail or a restart's reason).
func lifecycleEvent(gen int, e supervision.Event) Event {
	ev := Event{Kind: KindLifecycle, System: gen, Who: e.Node.String(), Status: e.Kind.String()}
	switch e.Kind {
	case supervision.Spawned:
		ev.Text = "under " + e.Parent.String()
		if e.Session != "" {
			ev.Text += ", session " + e.Session
		}
	case supervision.Settled:
		ev.Job = e.Node.ID
		ev.Detail = fmt.Sprintf("%s (%s), cause %s", e.Status, e.Detail, e.Cause)
	default:
		ev.Detail = "cause " + e.Cause.String()
		if e.Detail != "" {
			ev.Detail += ": " + e.Detail
		}
	}
	return ev
}

// finish waits for the subscription to end (the system has shut down) and checks
// that the folded tree is empty.
func (st *stage) finishTree(lc *lifecycle) {
	select {
	case <-lc.done:
	case <-time.After(stopTimeout):
		lc.sub.Cancel()
		<-lc.done
		_ = st.check("the supervision tree's event stream ends with its system", false,
			"still open %v after the shutdown", stopTimeout)
		return
	}
	left := lc.tree.Snapshot().Nodes
	_ = st.check("no actor outlives its system (its lifecycle events fold to an empty tree)",
		len(left) == 0 && len(lc.refused) == 0, "%d nodes left %v, %d events refused %v",
		len(left), left, len(lc.refused), lc.refused)
}
