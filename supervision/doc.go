// Package supervision says what each troupe actor kind does when it fails, as a tree
// (DESIGN.md "Supervision"):
//
//	system root
//	 ├─ registry      resume: its cores apply each transition whole, and its job children survive
//	 │   └─ job-*     stop: the job actor's Stopping handler settles the job failed and the
//	 │                registry frees its slot; the producer is never restarted
//	 └─ owner-*       stop: the owner tells the registry, which tears its jobs down like a dispose
//
// Each decider is a pure function of the failure reason, table-tested.
package supervision
