// Package scope is the tree that registrations live in (SPEC §1.3 rule 24).
//
// A Scope is a node whose root is the global scope. Controllers, listeners, providers
// and tool mounts are registered into a Scope as effects:
//
//  1. Add (a label and a func) or AddDisposer (a Disposer) registers an effect; it has
//     taken effect when they return, and the returned *Effect disposes it: Run runs
//     it once (idempotent), Detach drops it unrun.
//  2. Dispose runs every live effect of the scope and of its children (children first,
//     each scope's effects newest first) and returns when they are done. The caller's
//     context stops the waiting, never the teardown.
//  3. After Dispose, Add, AddDisposer and Child fail with scope/disposed.
//
// A Scope's lock guards only its own effect list and children; no actor state depends on it.
package scope
