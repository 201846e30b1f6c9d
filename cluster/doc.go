// Package cluster runs continuable children across several troupe processes on
// protoactor's cluster (DESIGN "Scale-out"). It sits at the engines layer: it
// imports actors/activation's pure Core and the session store, never the facade.
//
// The contract:
//  1. A continuable child is the cluster kind "troupe.child" keyed by its session
//     id. Node.Start, Node.Followup and Node.Interrupt, called on any node, reach
//     that child's single Activation wherever the disthash lookup places it.
//  2. An Ack with an empty code means the message is durable in the shared store
//     (session.Store.Accept returned): nothing acknowledged is lost when a node
//     dies. The child's next message activates it on a surviving member at a new
//     epoch; the turn that was cut off is logged turn/aborted-by-crash and the
//     accepted messages that never started run in acceptance order.
//  3. Exclusion comes from the store's epoch, not the cluster's view: every write
//     of an Activation carries its epoch and a stale one is refused; a refused
//     Activation stops itself and answers CodeStaleEpoch, and the caller's retry
//     reaches the current one. Two live Activations can never both write.
//  4. Membership is a heartbeat row per member in the same PostgreSQL database
//     (Provider): a member whose row is older than the TTL leaves the topology.
//  5. The remote layer is guarded (Guard): peers present the shared secret (and
//     TLS when configured), every frame's type names must be on the allow-list,
//     malformed frames and panics end that one stream, never the process; the
//     listener is loopback-only unless TLS is configured.
//
// Jobs stay local to the node whose processes they are: this package routes
// children, not jobs (see the README's "Cluster" section).
package cluster
