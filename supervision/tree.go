package supervision

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/troupe-rt/troupe/messages"
)

// Kind names what a node of the supervision tree is. The kinds troupe's actors
// report are the constants below; the tree accepts any non-empty kind.
type Kind string

// The node kinds of troupe's actors.
const (
	KindRegistry        Kind = "registry"         // the job registry (top level)
	KindJob             Kind = "job"              // a live job actor, child of the registry
	KindOwner           Kind = "owner"            // an agent incarnation's owner actor (top level)
	KindController      Kind = "job-controller"   // the human control surface (top level)
	KindDirectory       Kind = "directory"        // the continuation directory (top level)
	KindActivation      Kind = "activation"       // a continuable child's Activation, child of the directory
	KindSubagentRuntime Kind = "subagent-runtime" // the subagent runtime actor (top level)
)

// Ref names a node: its kind and an id unique among the live nodes of that kind. A
// job's id is its job id (bash-3); other nodes use their actor's name. The zero Ref
// is the system root, the parent of every top-level actor; it is never a node.
type Ref struct {
	Kind Kind
	ID   string
}

// Root is the zero Ref: the system root.
var Root = Ref{}

// IsRoot reports whether r is the system root.
func (r Ref) IsRoot() bool { return r == Ref{} }

func (r Ref) String() string {
	if r.IsRoot() {
		return "root"
	}
	return string(r.Kind) + "/" + r.ID
}

// EventKind is what happened to a node.
type EventKind uint8

// The lifecycle events.
const (
	// Spawned: the node's actor was spawned under Parent.
	Spawned EventKind = iota + 1
	// Restarted: the node's actor was re-created by its supervisor after a failure
	// (Cause panic, Detail the failure); it keeps its place in the tree.
	Restarted
	// Settled: a job reached its terminal status (Status, Detail, and the Cause that
	// decided it). The node stays in the tree until its actor stops.
	Settled
	// Stopped: the node's actor stopped; the node leaves the tree. Its children must
	// have stopped before it.
	Stopped
)

var eventKindNames = [...]string{"", "spawned", "restarted", "settled", "stopped"}

func (k EventKind) String() string {
	if int(k) < len(eventKindNames) && k != 0 {
		return eventKindNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Cause says why a node settled, restarted or stopped.
type Cause uint8

// The causes.
const (
	// CauseNone: no particular cause (a node that finished its work, or a spawn).
	CauseNone Cause = iota
	// CauseProducer: the job's producer delivered its outcome on its own.
	CauseProducer
	// CauseKill: a kill landed first (job_kill, a human kill, Client.Kill).
	CauseKill
	// CauseTeardown: the node's owner, scope or system tore it down (an agent's
	// dispose or crash, a drain, service disposal, shutdown).
	CauseTeardown
	// CausePanic: the node's actor panicked and its supervisor stopped or restarted it.
	CausePanic
)

var causeNames = [...]string{"none", "producer", "kill", "teardown", "panic"}

func (c Cause) String() string {
	if int(c) < len(causeNames) {
		return causeNames[c]
	}
	return fmt.Sprintf("Cause(%d)", uint8(c))
}

// StatusRunning is the status of every live node that has not settled.
const StatusRunning = "running"

// Event is one lifecycle event. Actors send it to the inspector (see [Emit]) with
// Seq and At unset; the inspector numbers the events it accepts 1, 2, 3… in the
// order it applies them and stamps At.
type Event struct {
	Seq  uint64
	At   time.Time
	Kind EventKind
	Node Ref
	// Parent is the node's parent (Spawned only; the zero Ref is the system root).
	Parent Ref
	// Actor is the node's protoactor process id, PID.Id (Spawned only).
	Actor string
	// Session is the session the node belongs to (Spawned only): a job's owner
	// session ("" for an unowned job), an owner's session, an Activation's child
	// session.
	Session string
	// Cause is why the node settled, restarted or stopped.
	Cause Cause
	// Status is a settled job's status: completed, killed or failed (Settled only).
	Status string
	// Detail is a settled job's detail, or a restart's failure reason.
	Detail string
}

func (e Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s %s", e.Seq, e.Kind, e.Node)
	switch e.Kind {
	case Spawned:
		fmt.Fprintf(&b, " parent=%s", e.Parent)
		if e.Session != "" {
			fmt.Fprintf(&b, " session=%s", e.Session)
		}
	case Settled:
		fmt.Fprintf(&b, " %s", e.Status)
	}
	if e.Kind != Spawned {
		fmt.Fprintf(&b, " cause=%s", e.Cause)
	}
	if e.Detail != "" {
		fmt.Fprintf(&b, " detail=%q", e.Detail)
	}
	return b.String()
}

// Node is one live node of the tree.
type Node struct {
	Ref
	Parent  Ref
	Actor   string // protoactor process id
	Session string // see Event.Session
	// Status is StatusRunning, or a settled job's status.
	Status string
	// Cause and Detail are a settled job's settlement cause and detail.
	Cause    Cause
	Detail   string
	Restarts int    // Restarted events since it was spawned
	Spawned  uint64 // the Seq of its Spawned event
}

// Snapshot is the live tree after the event numbered Seq: Nodes in pre-order (each
// parent before its children, siblings in spawn order, top-level nodes first to
// last spawned). Folding the events Seq+1, Seq+2… into it (TreeOf, then Apply)
// gives every later snapshot.
type Snapshot struct {
	Seq   uint64
	Nodes []Node
}

// Node returns the node named r, if it is live.
func (s Snapshot) Node(r Ref) (Node, bool) {
	for _, n := range s.Nodes {
		if n.Ref == r {
			return n, true
		}
	}
	return Node{}, false
}

// Children returns the live children of r (Root: the top-level nodes) in spawn order.
func (s Snapshot) Children(r Ref) []Node {
	var out []Node
	for _, n := range s.Nodes {
		if n.Parent == r {
			out = append(out, n)
		}
	}
	return out
}

// String renders the tree, one node a line, indented under its parent.
func (s Snapshot) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seq %d\n", s.Seq)
	depth := map[Ref]int{Root: 0}
	for _, n := range s.Nodes {
		d := depth[n.Parent] + 1
		depth[n.Ref] = d
		fmt.Fprintf(&b, "%s%s %s", strings.Repeat("  ", d-1), n.Ref, n.Status)
		if n.Status != StatusRunning {
			fmt.Fprintf(&b, " cause=%s", n.Cause)
		}
		if n.Session != "" {
			fmt.Fprintf(&b, " session=%s", n.Session)
		}
		if n.Restarts > 0 {
			fmt.Fprintf(&b, " restarts=%d", n.Restarts)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Error codes of the tree: each names a bug in an event's sender (or a gap in a
// subscriber's stream), never a condition of normal operation.
const (
	CodeBadEvent      messages.Code = "tree/bad-event"       // no node, unknown kind, settled without a status
	CodeOutOfSequence messages.Code = "tree/out-of-sequence" // Seq is not the last applied + 1
	CodeUnknownParent messages.Code = "tree/unknown-parent"  // a spawn under a node that is not live
	CodeDuplicate     messages.Code = "tree/duplicate-node"  // a spawn of a node that is live
	CodeUnknownNode   messages.Code = "tree/unknown-node"    // an event of a node that is not live
	CodeOrphans       messages.Code = "tree/orphans"         // a stop of a node whose children are live
	CodeSettledTwice  messages.Code = "tree/settled-twice"   // a second settlement of one node
)

// Tree is the pure index of the live supervision tree: it applies lifecycle events
// in sequence and answers snapshots. It has no goroutines and no clock; it is not
// safe for concurrent use (the inspector actor owns one).
//
// It holds one entry per live node, and a live job is a node, so the layout is
// kept small: the nodes of each kind sit in their own map keyed by id (no Ref key),
// and what most nodes never have (a settlement, a restart, an actor id that is not
// protoactor's child naming) lives in an extra record allocated only when needed.
type Tree struct {
	seq    uint64
	kinds  []Kind              // kind index → kind
	kindOf map[Kind]uint32     // kind → its index in kinds and byKind
	byKind []map[string]*entry // per kind index: live nodes by id
	live   int                 // live nodes
}

// entry is a live node: 64 bytes, plus extra for the few nodes that need it.
type entry struct {
	id       string
	session  string
	parent   *entry // nil: the system root
	extra    *extra // nil: running, never restarted, actor id derived (a top-level node's is its id)
	spawned  uint64
	kind     uint32 // index into Tree.kinds
	children uint32 // live children
}

// extra is what a node has only once it settles or restarts, or when its actor id
// is not its parent's actor id + "/" + its id.
type extra struct {
	actor    string
	ownActor bool // actor is the node's actor id (else it is derived)
	restarts uint32
	cause    Cause
	status   string // "" while running
	detail   string
}

// childActor reports whether actor is the id protoactor gives a child named id of
// the node p (p's actor id + "/" + id), which the entry then need not store.
func childActor(p *entry, id, actor string) bool {
	if p == nil {
		return false
	}
	prefix, ok := cutChild(actor, id)
	return ok && p.hasActor(prefix)
}

// cutChild returns actor without its suffix "/" + id, if it has it.
func cutChild(actor, id string) (string, bool) {
	n := len(actor) - len(id) - 1
	if n < 0 || actor[n] != '/' || actor[n+1:] != id {
		return "", false
	}
	return actor[:n], true
}

// hasActor reports whether e's actor id is s, without building it.
func (e *entry) hasActor(s string) bool {
	if x := e.extra; x != nil && x.ownActor {
		return x.actor == s
	}
	if e.parent == nil {
		return s == e.id // a top-level node named by its actor id (an owner's "owner-N")
	}
	prefix, ok := cutChild(s, e.id)
	return ok && e.parent.hasActor(prefix)
}

// actor returns e's protoactor process id (built anew when derived: snapshots
// are rare, live nodes many).
func (e *entry) actor() string {
	if x := e.extra; x != nil && x.ownActor {
		return x.actor
	}
	if e.parent == nil {
		return e.id
	}
	return e.parent.actor() + "/" + e.id
}

func (e *entry) more() *extra {
	if e.extra == nil {
		e.extra = &extra{}
	}
	return e.extra
}

func (e *entry) settled() bool { return e.extra != nil && e.extra.status != "" }

func (t *Tree) ref(e *entry) Ref { return Ref{Kind: t.kinds[e.kind], ID: e.id} }

func (t *Tree) node(e *entry) Node {
	n := Node{Ref: t.ref(e), Actor: e.actor(), Session: e.session, Status: StatusRunning, Spawned: e.spawned}
	if e.parent != nil {
		n.Parent = t.ref(e.parent)
	}
	if x := e.extra; x != nil {
		n.Restarts = int(x.restarts)
		if x.status != "" {
			n.Status, n.Cause, n.Detail = x.status, x.cause, x.detail
		}
	}
	return n
}

// get returns the live node named r, or nil.
func (t *Tree) get(r Ref) *entry {
	k, ok := t.kindOf[r.Kind]
	if !ok {
		return nil
	}
	return t.byKind[k][r.ID]
}

// add makes a live node of r (which must not be live) under parent.
func (t *Tree) add(r Ref, parent *entry, actor, session string, spawned uint64) *entry {
	k, ok := t.kindOf[r.Kind]
	if !ok {
		k = uint32(len(t.kinds))
		t.kindOf[r.Kind] = k
		t.kinds = append(t.kinds, r.Kind)
		t.byKind = append(t.byKind, map[string]*entry{})
	}
	e := &entry{id: r.ID, parent: parent, session: session, spawned: spawned, kind: k}
	if !childActor(parent, r.ID, actor) && (parent != nil || actor != r.ID) {
		e.more().actor, e.extra.ownActor = actor, true
	}
	t.byKind[k][r.ID] = e
	t.live++
	if parent != nil {
		parent.children++
	}
	return e
}

// NewTree returns an empty tree at Seq 0.
func NewTree() *Tree { return &Tree{kindOf: map[Kind]uint32{}} }

// TreeOf returns the tree a snapshot shows, at its Seq, to fold later events into.
// A snapshot with a node whose parent is absent, or a node twice, is refused.
func TreeOf(s Snapshot) (*Tree, error) {
	t := NewTree()
	t.seq = s.Seq
	for _, n := range s.Nodes {
		if n.Ref.IsRoot() || n.Kind == "" || n.ID == "" {
			return nil, messages.Errorf(CodeBadEvent, "snapshot node %q has no kind or id", n.Ref)
		}
		if t.get(n.Ref) != nil {
			return nil, messages.Errorf(CodeDuplicate, "snapshot has node %s twice", n.Ref)
		}
		// Parents are linked below; the actor id is kept whole until then.
		e := t.add(n.Ref, nil, n.Actor, n.Session, n.Spawned)
		if e.extra == nil && !n.Parent.IsRoot() { // add derived it as a top-level node's
			e.more().actor, e.extra.ownActor = n.Actor, true
		}
		if n.Restarts != 0 {
			e.more().restarts = uint32(n.Restarts)
		}
		if n.Status != StatusRunning {
			x := e.more()
			x.status, x.detail, x.cause = n.Status, n.Detail, n.Cause
		}
	}
	for _, n := range s.Nodes {
		if n.Parent.IsRoot() {
			continue
		}
		p := t.get(n.Parent)
		if p == nil {
			return nil, messages.Errorf(CodeUnknownParent, "snapshot node %s has parent %s, which is not in the snapshot", n.Ref, n.Parent)
		}
		t.get(n.Ref).parent = p
		p.children++
	}
	return t, nil
}

// Seq returns the number of the last event applied.
func (t *Tree) Seq() uint64 { return t.seq }

// Len returns the number of live nodes.
func (t *Tree) Len() int { return t.live }

// Apply applies e, which must carry Seq = t.Seq()+1. A refused event changes
// nothing (Seq included) and returns a coded error: CodeOutOfSequence, CodeBadEvent,
// CodeUnknownParent or CodeDuplicate for a spawn, CodeUnknownNode for an event of a
// node that is not live, CodeSettledTwice, or CodeOrphans for a stop of a node that
// still has live children (its parent must be told of their stops first).
func (t *Tree) Apply(e Event) error {
	if e.Seq != t.seq+1 {
		return messages.Errorf(CodeOutOfSequence, "event %s: expected seq %d", e, t.seq+1)
	}
	if e.Node.Kind == "" || e.Node.ID == "" {
		return messages.Errorf(CodeBadEvent, "event %s names no node (kind and id are required)", e)
	}
	var err error
	switch e.Kind {
	case Spawned:
		err = t.spawn(e)
	case Restarted, Settled, Stopped:
		err = t.change(e)
	default:
		err = messages.Errorf(CodeBadEvent, "event %s has an unknown kind", e)
	}
	if err == nil {
		t.seq = e.Seq
	}
	return err
}

func (t *Tree) spawn(e Event) error {
	if t.get(e.Node) != nil {
		return messages.Errorf(CodeDuplicate, "event %s: %s is already live", e, e.Node)
	}
	var parent *entry
	if !e.Parent.IsRoot() {
		if parent = t.get(e.Parent); parent == nil {
			return messages.Errorf(CodeUnknownParent, "event %s: parent %s is not live", e, e.Parent)
		}
	}
	t.add(e.Node, parent, e.Actor, e.Session, e.Seq)
	return nil
}

func (t *Tree) change(e Event) error {
	n := t.get(e.Node)
	if n == nil {
		return messages.Errorf(CodeUnknownNode, "event %s: %s is not live", e, e.Node)
	}
	switch e.Kind {
	case Restarted:
		n.more().restarts++
	case Settled:
		if e.Status == "" || e.Status == StatusRunning {
			return messages.Errorf(CodeBadEvent, "event %s: a settlement needs a terminal status", e)
		}
		if n.settled() {
			return messages.Errorf(CodeSettledTwice, "event %s: %s already settled %s", e, e.Node, n.extra.status)
		}
		x := n.more()
		x.status, x.detail, x.cause = e.Status, e.Detail, e.Cause
	case Stopped:
		if n.children > 0 {
			return messages.Errorf(CodeOrphans, "event %s: %s still has %d live children", e, e.Node, n.children)
		}
		t.remove(n)
	}
	return nil
}

// remove drops the live node n, which has no live children (so no entry derives
// its actor id from n's any more).
func (t *Tree) remove(n *entry) {
	if n.parent != nil {
		n.parent.children--
	}
	delete(t.byKind[n.kind], n.id)
	t.live--
}

// Snapshot returns the live tree (see Snapshot for the order).
func (t *Tree) Snapshot() Snapshot {
	byParent := make(map[*entry][]*entry, t.live/2+1)
	for _, nodes := range t.byKind {
		for _, e := range nodes {
			byParent[e.parent] = append(byParent[e.parent], e)
		}
	}
	for _, kids := range byParent {
		slices.SortFunc(kids, func(a, b *entry) int { return cmp.Compare(a.spawned, b.spawned) })
	}
	out := Snapshot{Seq: t.seq, Nodes: make([]Node, 0, t.live)}
	var walk func(*entry)
	walk = func(p *entry) {
		for _, e := range byParent[p] {
			out.Nodes = append(out.Nodes, t.node(e))
			walk(e)
		}
	}
	walk(nil)
	return out
}

// Wire forms (messages/troupe.proto): TreeNode, TreeSnapshot, LifecycleEvent.

// Proto is e's wire form. At travels as Unix nanoseconds (0: unset).
func (e Event) Proto() *messages.LifecycleEvent {
	p := &messages.LifecycleEvent{
		Seq: e.Seq, Kind: messages.LifecycleEventKind(e.Kind),
		NodeKind: string(e.Node.Kind), NodeId: e.Node.ID,
		ParentKind: string(e.Parent.Kind), ParentId: e.Parent.ID,
		Actor: e.Actor, Session: e.Session, Cause: messages.LifecycleCause(e.Cause),
		Status: e.Status, Detail: e.Detail,
	}
	if !e.At.IsZero() {
		p.AtUnixNano = e.At.UnixNano()
	}
	return p
}

// EventFromProto turns a wire event back into an Event; an unknown kind or cause
// is refused with CodeBadEvent. At comes back in UTC.
func EventFromProto(p *messages.LifecycleEvent) (Event, error) {
	kind, cause := EventKind(p.GetKind()), Cause(p.GetCause())
	if kind < Spawned || kind > Stopped || int32(kind) != int32(p.GetKind()) {
		return Event{}, messages.Errorf(CodeBadEvent, "lifecycle event has unknown kind %d", p.GetKind())
	}
	if int(cause) >= len(causeNames) || int32(cause) != int32(p.GetCause()) {
		return Event{}, messages.Errorf(CodeBadEvent, "lifecycle event has unknown cause %d", p.GetCause())
	}
	e := Event{
		Seq: p.GetSeq(), Kind: kind,
		Node:   Ref{Kind: Kind(p.GetNodeKind()), ID: p.GetNodeId()},
		Parent: Ref{Kind: Kind(p.GetParentKind()), ID: p.GetParentId()},
		Actor:  p.GetActor(), Session: p.GetSession(), Cause: cause,
		Status: p.GetStatus(), Detail: p.GetDetail(),
	}
	if ns := p.GetAtUnixNano(); ns != 0 {
		e.At = time.Unix(0, ns).UTC()
	}
	return e, nil
}

// Proto is n's wire form.
func (n Node) Proto() *messages.TreeNode {
	return &messages.TreeNode{
		Kind: string(n.Kind), Id: n.ID, ParentKind: string(n.Parent.Kind), ParentId: n.Parent.ID,
		Actor: n.Actor, Session: n.Session, Status: n.Status, Cause: messages.LifecycleCause(n.Cause),
		Detail: n.Detail, Restarts: uint32(n.Restarts), SpawnedSeq: n.Spawned,
	}
}

// NodeFromProto turns a wire node back into a Node; an unknown cause is refused.
func NodeFromProto(p *messages.TreeNode) (Node, error) {
	cause := Cause(p.GetCause())
	if int(cause) >= len(causeNames) || int32(cause) != int32(p.GetCause()) {
		return Node{}, messages.Errorf(CodeBadEvent, "tree node %s/%s has unknown cause %d", p.GetKind(), p.GetId(), p.GetCause())
	}
	return Node{
		Ref:    Ref{Kind: Kind(p.GetKind()), ID: p.GetId()},
		Parent: Ref{Kind: Kind(p.GetParentKind()), ID: p.GetParentId()},
		Actor:  p.GetActor(), Session: p.GetSession(), Status: p.GetStatus(), Cause: cause,
		Detail: p.GetDetail(), Restarts: int(p.GetRestarts()), Spawned: p.GetSpawnedSeq(),
	}, nil
}

// Proto is s's wire form.
func (s Snapshot) Proto() *messages.TreeSnapshot {
	p := &messages.TreeSnapshot{Seq: s.Seq, Nodes: make([]*messages.TreeNode, len(s.Nodes))}
	for i, n := range s.Nodes {
		p.Nodes[i] = n.Proto()
	}
	return p
}

// SnapshotFromProto turns a wire snapshot back into a Snapshot.
func SnapshotFromProto(p *messages.TreeSnapshot) (Snapshot, error) {
	s := Snapshot{Seq: p.GetSeq(), Nodes: make([]Node, len(p.GetNodes()))}
	for i, n := range p.GetNodes() {
		var err error
		if s.Nodes[i], err = NodeFromProto(n); err != nil {
			return Snapshot{}, err
		}
	}
	return s, nil
}
