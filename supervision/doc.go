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
package supervision
