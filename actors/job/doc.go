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
//
// Text is bounded and valid where it enters (text.go), so every tool result, notice,
// job_list row and human frame built from a job is too:
//   - Kind must match KindPattern (^[a-z][a-z0-9-]{0,31}$): it is the id prefix and
//     the job actor's name. Any other kind is refused with job/invalid-spec.
//   - Label is made one line of valid UTF-8 (line breaks become "↵", other control
//     characters and invalid sequences U+FFFD) and cut at MaxLabelBytes (1024).
//   - A kill reason (MaxReasonBytes, 1024) and a producer's detail or error
//     (MaxDetailBytes, 4096) become valid UTF-8 and are cut; they keep their lines.
//   - A cut text keeps its head, on a rune boundary, and ends with CutMarker ("…").
//     Nothing is refused for its length.
//   - Output (ReadOutput's deltas, Outcome.Output, the record's chunks) has invalid
//     sequences replaced by U+FFFD; the record and producers/output hold a rune
//     split across two writes back until it is whole.
package job
