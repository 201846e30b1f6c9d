// Package web is troupe's task list for humans: an embeddable http.Handler that
// serves a self-contained page (HTML, CSS and plain JavaScript from embed.FS) over a
// running System. The page shows a session's background jobs live, follows a job's
// output, stops a job with a two-press control (the model's completion notice then
// carries "cancelled by the user"), and shows the session's continuable children and
// the live supervision tree. docs/WEB.md is the contract.
//
// Nothing listens unless the embedder mounts the Handler or calls Listen (loopback
// only, unless ListenConfig.AllowRemote). Every request carries a per-start random
// token in its path, is checked for its Host, and — for the live channel and the API
// — for its Origin and fetch metadata; the kill endpoint takes only a small JSON POST.
// The page inserts every model-written string as text, never as markup.
//
// The package is a surface (beside cmd/): it is a client of the job-controller actor
// (actors/controller: roster, follow, kill), of the supervision tree
// (System.Tree) and, through a ChildLister, of the continuation manager.
package web
