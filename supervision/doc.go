// Package supervision says what each troupe actor kind does when it fails, as a tree
// (DESIGN.md "Supervision"):
//
//	system root
//	 ├─ registry      resume: its cores apply each transition whole, and its job children survive
//	 │   └─ job-*     stop: the job actor's Stopping handler settles the job failed and the
//	 │                registry frees its slot; the producer is never restarted
//	 ├─ owner-*       stop: the owner tells the registry, which tears its jobs down like a dispose
//	 └─ directory     supervises its Activations itself (it implements HandleFailure)
//	     └─ activation-<session>
//	                  restart from the persisted session: the message in flight is answered
//	                  ACTIVATION_FAILED, the re-created actor takes a new epoch (fencing its
//	                  predecessor), logs the turn the crash cut off as aborted and requeues the
//	                  parked (journaled, not yet run) messages in order; past 3 failures within
//	                  10s it stops instead
//
// Activations are the directory's children side by side (a parent activation's
// children are state in its core, not actor-tree children), so restarting one never
// stops another: protoactor stops every child of an actor before restarting it.
//
// Restart intensity. protoactor's OneForOne/AllForOne with a retry limit turn a Restart
// past the limit into a Stop and never escalate. [Restarting] is the "N restarts in a
// window, then escalate" strategy: a child may restart [Intensity].MaxRestarts times
// within [Intensity].Within (default 3 within 10s); its next failure in that window
// escalates to the supervisor's own supervisor, with the child's reason and message.
// Used as a guardian it stops the top-level actor instead (a guardian cannot escalate:
// protoactor's guardian panics, on the failing actor's goroutine, and crashes the
// process). The window decision is the pure function [Decide], the restart-window
// model the tests check the strategy against (rapid schedules of failures and time
// advances on real actors under testing/synctest).
//
// Each decider is a pure function of the failure reason, table-tested.
//
// # The tree, as a snapshot and as events
//
// protoactor has no tree API, so troupe keeps its own index: the supervision actor
// ([Inspector], spawned first by troupe.New, stopped last; System.Tree() returns it).
// Every troupe actor reports its lifecycle to it as plain Go messages ([Emit]; the
// registry sends a job's three in compact form, [EmitJob], its settled and stopped
// together in one message, [JobEnded]):
//
//	spawned    a node and its parent (a job: the registry, with its owner session;
//	           an Activation: the directory, with its child session; the others: the root)
//	restarted  an Activation re-created after a panic (cause panic, detail the reason)
//	settled    a job's terminal status, with the cause that decided it: producer (its
//	           outcome came on its own), kill (a kill landed first), teardown (its
//	           owner's dispose or crash, service disposal), panic (its actor panicked)
//	stopped    the actor has stopped (and left protoactor's process registry): cause
//	           panic after a crash, teardown when its owner, scope or system stopped
//	           it, none when it finished (a settled job, a released Activation)
//
// All events of one node come from one sender — the registry for jobs, the directory
// for Activations, each other actor for itself — so they arrive in the order they
// happened. The inspector numbers them 1, 2, 3… (Event.Seq), applies them to a pure
// [Tree] and forwards them, in order, to every subscription. A node stays in the
// tree until it stops (a settled job stays until its actor stops); a stop is only
// accepted once the node's children have stopped, so the tree never holds an orphan.
// An event the tree refuses — of an unknown node or parent, a duplicate spawn, a
// parent stopped before its children — is a bug in its sender: it is logged, kept
// in [Stats] and never numbered.
//
// How to read it:
//  1. Snapshot(ctx) returns the live tree at some Seq, in pre-order (each parent
//     before its children, siblings in spawn order); String renders it indented.
//  2. Subscribe(ctx) returns a snapshot at Seq N and a [Subscription] whose Events
//     channel delivers N+1, N+2… in order. A slow reader blocks nobody and loses
//     nothing: each subscription queues in its own actor's mailbox. Cancel it when
//     done; after the system's shutdown it delivers what was queued, then closes.
//  3. To follow the tree, fold: TreeOf(snapshot), then Apply each event. Apply
//     refuses an event out of sequence, so a gap cannot go unnoticed.
//  4. Over the wire (any actor, local or remote): TreeSnapshotRequest answers a
//     TreeSnapshot; TreeSubscribe (sent with Request) streams a TreeSnapshot then
//     LifecycleEvents to the sender until TreeUnsubscribe or its stop. Event.Proto,
//     Snapshot.Proto, EventFromProto and SnapshotFromProto convert.
//
// For example (Example_tree is the compiled version):
//
//	sub, snap, _ := sys.Tree().Subscribe(ctx)
//	defer sub.Cancel()
//	tree, _ := supervision.TreeOf(snap)
//	for e := range sub.Events() {
//		_ = tree.Apply(e) // nil: in sequence and accepted
//		fmt.Println(e)    // #5 settled job/bash-1 failed cause=panic detail="…"
//	}
//
// Cost: sending an event is one mailbox push on the sender's goroutine; the
// supervision actor applies and forwards it on its own run (troupe's worker pool,
// InspectorConfig.Dispatcher), never inside the sender's — the registry does not
// pay for the tree. While nobody subscribes, events wait in that mailbox and wake
// no worker until 1,024 of them wait or another message comes (a query: Snapshot,
// Stats, a TreeSnapshotRequest — queued behind them, its run applies them first,
// so what a query returns is as above); a subscription makes each event wake the
// actor again, so a follower's events come as soon as they are applied. A
// refused event is logged when it is applied. A job's lifecycle adds three events. The index holds one compact entry per live
// node (about 150 B per live job with its map slot).
package supervision
