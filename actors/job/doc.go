// Package job is one background job: its start request (Spec), the producer's
// hooks, the pure settlement core (first-wins, SPEC §2.5) and the job actor that
// owns a live job until it hands its settlement to the registry.
//
// The job and its owner. A job actor never addresses its owner: it knows the
// owner only as Meta.OwnerSession (data in its snapshots) and talks to the
// registry alone (its PID in Shared); notices, teardown and fencing are the
// registry's. The one edge to package owner is Spec.Owner, the *owner.Agent of
// the start request, and it is read by the registry, not here: admission needs
// the exact incarnation (its PID, checked against the live registration), its
// session and its Scope (the owner's cleanup is added to it, so disposing the
// agent tears its jobs down). The direct import is the right one for now: owner
// imports nothing of job, so the edge points one way, and a PID-plus-message
// identity would make the registry keep a PID → Scope map beside the agent
// registry only to get the same handle back. Issue 13's capability work replaces
// how a caller's identity is represented; Spec.Owner changes with it.
// test/layering keeps the edge this narrow (only spec.go imports owner).
package job
