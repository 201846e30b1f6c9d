package activation

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/internal/mailbox"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/supervision"
)

// DescriptorVersion is the descriptor format this package reads and writes.
const DescriptorVersion = 2

// statusTimeout bounds a status question to an Activation (one that stopped in
// between answers through protoactor's dead letters at once).
const statusTimeout = 5 * time.Second

// Descriptor is the continuable descriptor (SPEC §6.8).
type Descriptor struct {
	Version       int                  `json:"version"`
	Mode          string               `json:"mode"`
	Provider      string               `json:"provider"`
	Label         string               `json:"label,omitempty"`
	AgentProvider string               `json:"agentProvider,omitempty"`
	AgentModel    string               `json:"agentModel,omitempty"`
	Persona       string               `json:"persona,omitempty"`
	ToolFilter    *subagent.ToolFilter `json:"toolFilter,omitempty"`
	// Cluster is the record a cluster member keeps with a child it placed
	// (StartPlaced): opaque to this package.
	Cluster json.RawMessage `json:"cluster,omitempty"`
}

// ParseDescriptor reads a persisted descriptor. An unknown version is an error with
// the version kept (cannot classify); a malformed current-version one names the field.
func ParseDescriptor(raw json.RawMessage) (Descriptor, error) {
	var d Descriptor
	if len(raw) == 0 {
		return d, errors.New("no subagent descriptor")
	}
	var probe struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return d, fmt.Errorf("persisted subagent descriptor is not JSON: %w", err)
	}
	d.Version = probe.Version
	if probe.Version != DescriptorVersion {
		return d, fmt.Errorf("persisted subagent descriptor has unknown version %d", probe.Version)
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return Descriptor{Version: DescriptorVersion}, fmt.Errorf("persisted subagent descriptor is malformed: %w", err)
	}
	if d.Mode != "one-shot" && d.Mode != "continuable" {
		return Descriptor{Version: DescriptorVersion}, errors.New(`persisted subagent descriptor mode must be "one-shot" or "continuable"`)
	}
	return d, nil
}

// Deps are what the continuation manager needs.
type Deps struct {
	// Store persists the children's sessions; nil: PERSISTENCE_UNAVAILABLE.
	Store session.Store
	// Runtime finds providers and publishes the activations' subagent/start and
	// subagent/end events.
	Runtime *subagent.Runtime
	// Runner runs every child's turns.
	Runner subagent.TurnRunner
	// Jobs is the agent service: exact live parents, notice and report recipients.
	// nil: the manager is unavailable (CONTINUATION_UNAVAILABLE, SPEC §6.1).
	Jobs *registry.Client
	// NewAgent spawns and registers the agent instance of a child session, whose
	// own session is that child's id (the directory refuses any other). inbox is
	// the child's own Activation inbox, the default delivery surface of its agent.
	NewAgent func(session string, inbox owner.Surface) (*owner.Agent, error)
	// Cwd, if set, is a top-level parent's working directory, copied into its
	// children's headers (SPEC §6.8); a child's children copy its own.
	Cwd    func(parent *owner.Agent) string
	Logger *slog.Logger
	Now    func() int64
	// Dispatcher, if set, runs the directory's and the Activations' mailboxes (the
	// system's pool, or a seeded schedule); nil: protoactor's default, a fresh
	// goroutine per mailbox run.
	Dispatcher actor.Dispatcher
	// Inspector, if set, receives the lifecycle events of the directory and its
	// Activations (Host.Inspector; Start sets it).
	Inspector *actor.PID
	// Restarts bounds how often an Activation restarts after a panic: past
	// Restarts.MaxRestarts failures within Restarts.Within (the zero value: 3 within
	// 10 s, as read by Now) it stops instead.
	Restarts supervision.Intensity
	// Placement, if set, places the children in a cluster (WithPlacement).
	Placement *Placement
	// RestartGrace is how long the restart of a crashed Activation waits for the
	// turn it had in flight (cancelled) to return, so that the restarted one takes
	// its new epoch after the old turn is over; 0 means DefaultRestartGrace (1 s).
	RestartGrace time.Duration
}

// Manager is the continuation manager (SPEC §6): a handle to the directory actor,
// which owns at most one live Activation per child session.
type Manager struct {
	deps     Deps
	root     *actor.RootContext
	pid      *actor.PID
	logger   *slog.Logger
	draining atomic.Bool // an early admission check; the directory's is authoritative
}

// NewManager spawns the directory actor.
func NewManager(system *actor.ActorSystem, deps Deps) (*Manager, error) {
	m := &Manager{deps: deps, root: system.Root, logger: deps.Logger}
	if m.logger == nil {
		m.logger = slog.Default()
	}
	d := &directoryActor{m: m, acts: map[string]*entry{}, kids: map[string][]*entry{}, below: map[string]belowDrain{}}
	// The directory is busy (every operation of every child passes through it):
	// troupe's ring mailbox, which allocates nothing per message or per run.
	props := actor.PropsFromProducer(func() actor.Actor { return d }, actor.WithGuardian(supervision.DirectoryStrategy()),
		actor.WithMailbox(mailbox.Producer))
	if deps.Dispatcher != nil {
		props = props.Configure(actor.WithDispatcher(deps.Dispatcher))
	}
	pid, err := system.Root.SpawnNamed(props, "directory")
	if err != nil {
		return nil, err
	}
	m.pid = pid
	return m, nil
}

// PID is the directory actor's address.
func (m *Manager) PID() *actor.PID { return m.pid }

func (m *Manager) now() int64 {
	if m.deps.Now != nil {
		return m.deps.Now()
	}
	return time.Now().UnixMilli()
}

// live reports whether a is the exact live instance registered for its session.
func (m *Manager) live(ctx context.Context, a *owner.Agent) bool {
	if a == nil {
		return false
	}
	pid := m.deps.Jobs.RegisteredAgent(ctx, a.Session())
	return pid != nil && pid.Equal(a.PID())
}

// available is SPEC §6.1's availability: the manager needs the agent service.
func (m *Manager) available(ctx context.Context) bool {
	if m.deps.Jobs == nil {
		return false
	}
	return m.deps.Jobs.AgentsMounted(ctx)
}

// awaitCtx waits for a directory reply or ctx's end (job/aborted).
func awaitCtx[T any](ctx context.Context, ch <-chan T) (T, error) {
	select {
	case v := <-ch:
		return v, nil
	case <-ctx.Done():
		var zero T
		return zero, job.Aborted(ctx)
	}
}

func unavailable() error {
	return messages.Errorf(subagent.CodeContinuationUnavailable, "continuable subagents require the agents service")
}

// PersistenceUnavailable is SPEC §6.1's message (rule 23: the verbatim prefix, then
// a hint that names troupe's API).
const PersistenceUnavailable = "continuable subagents require session persistence (pass a session.Store — session.OpenBolt or session.NewMemory — to activation.Start)"

func newChildID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "child-" + hex.EncodeToString(b[:])
}

func text(s string) []session.Block { return []session.Block{{Type: "text", Text: s}} }

// StartContinuable starts a continuable child with a fresh id (the subagent tool's
// continuable mode): see Start.
func (m *Manager) StartContinuable(ctx context.Context, provider, label string, req subagent.Request, parent *owner.Agent) (string, string, error) {
	return m.Start(ctx, parent, provider, label, "", req)
}

// Start starts a continuable child of parent (SPEC §6.2), with childID or a fresh
// id, and returns once its first message is accepted (durable in its inbox
// journal), before any model request. ctx governs only the steps before
// acceptance: any failure before it — ctx's end included — rolls the child back
// entirely and returns no ids. With a Placement the child is started on the
// cluster member that owns its id (StartHere there).
func (m *Manager) Start(ctx context.Context, parent *owner.Agent, provider, label, childID string, req subagent.Request) (string, string, error) {
	if m.deps.Placement != nil {
		if ctx.Err() != nil {
			return "", "", job.Aborted(ctx)
		}
		if !m.available(ctx) {
			return "", "", unavailable()
		}
		if m.draining.Load() {
			return "", "", draining()
		}
		kind, _, err := m.placed(ctx, parent)
		if err != nil {
			return "", "", err
		}
		if childID == "" {
			childID = newChildID()
		}
		return m.deps.Placement.Start(ctx, parent, kind, provider, label, childID, req)
	}
	return m.StartHere(ctx, parent, provider, label, childID, req)
}

// StartHere is Start on this Manager, whatever its Placement: the member that
// owns childID runs it (parent is the live agent that speaks for the parent here).
func (m *Manager) StartHere(ctx context.Context, parent *owner.Agent, provider, label, childID string, req subagent.Request) (string, string, error) {
	return m.StartPlaced(ctx, parent, provider, label, childID, req, nil)
}

// StartPlaced is StartHere that keeps record (a cluster member's record of the
// child: its parent's member, its credential's hash) in the child's descriptor.
func (m *Manager) StartPlaced(ctx context.Context, parent *owner.Agent, provider, label, childID string, req subagent.Request, record json.RawMessage) (string, string, error) {
	if ctx.Err() != nil {
		return "", "", job.Aborted(ctx)
	}
	if !m.available(ctx) {
		return "", "", unavailable()
	}
	if m.draining.Load() {
		return "", "", draining()
	}
	if m.deps.Store == nil {
		return "", "", messages.Errorf(subagent.CodePersistenceUnavailable, PersistenceUnavailable)
	}
	if req.MaxDepth != nil && (*req.MaxDepth < 0 || *req.MaxDepth > 1<<53-1) {
		return "", "", subagent.ErrInvalidMaxDepth
	}
	if parent == nil {
		return "", "", unauthorized("a continuable subagent requires the exact live parent agent to start it")
	}
	if childID == "" {
		childID = newChildID()
	} else if _, err := m.deps.Store.Head(ctx, childID); err == nil {
		return "", "", messages.Errorf(subagent.CodeDuplicateChild, "subagent %q already exists", childID)
	}
	d := Descriptor{Version: DescriptorVersion, Mode: "continuable", Provider: provider, Label: label,
		Persona: req.Persona, ToolFilter: req.ToolFilter, Cluster: record}
	if o := req.Options; o != nil {
		d.AgentProvider, d.AgentModel = o.Provider, o.Model
	}
	desc, _ := json.Marshal(d)
	var p subagent.Provider
	if m.deps.Runtime != nil {
		p = m.deps.Runtime.Provider(ctx, provider)
	}
	if p == nil {
		return "", "", messages.Errorf(subagent.CodeNoProvider, "no subagent provider registered for %q", provider)
	}
	cp, ok := p.(subagent.Continuable)
	if !ok {
		return "", "", messages.Errorf(subagent.CodeUnsupportedCapability,
			"subagent provider %q does not support continuable children (no prepareContinuable capability)", provider)
	}
	seed, err := prepare(ctx, cp, req)
	if err != nil {
		return "", "", err
	}
	if ctx.Err() != nil {
		return "", "", context.Cause(ctx)
	}
	if m.draining.Load() {
		return "", "", draining()
	}
	reply := make(chan startRes, 1)
	m.root.Send(m.pid, &startReq{ctx: ctx, parent: parent, id: childID, label: label, descriptor: desc,
		seed: seed.History, req: req, content: text(req.Prompt), reply: reply})
	// The directory carries ctx through every step before acceptance and answers
	// once it has rolled back what it started, so this reply always comes.
	res := <-reply
	if res.err != nil {
		return "", "", res.err
	}
	return res.childID, res.messageID, nil
}

// prepare calls the provider's PrepareContinuable, turning a panic into an error.
func prepare(ctx context.Context, cp subagent.Continuable, req subagent.Request) (seed subagent.Seed, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%v", v)
		}
	}()
	return cp.PrepareContinuable(ctx, req)
}

// Followup sends content to childID as its next FIFO turn (SPEC §6.3): into the
// running or waiting Activation, or a cold resume. parent must be the exact live
// parent of record. ctx governs only lookup and admission: the answer says whether
// the message was accepted, and a ctx that ends after acceptance changes nothing.
//
// With a Placement it goes to the member that owns childID (FollowupHere there).
func (m *Manager) Followup(ctx context.Context, parent *owner.Agent, childID, content string, source session.Source) (string, error) {
	if m.deps.Placement != nil {
		if ctx.Err() != nil {
			return "", job.Aborted(ctx)
		}
		if !m.available(ctx) {
			return "", unavailable()
		}
		if m.draining.Load() {
			return "", draining()
		}
		kind, _, err := m.placed(ctx, parent)
		if err != nil {
			return "", err
		}
		return m.deps.Placement.Followup(ctx, parent, kind, childID, content, source)
	}
	return m.FollowupHere(ctx, parent, childID, content, source)
}

// FollowupHere is Followup on this Manager, whatever its Placement.
//
// SPEC §6.1's availability is not asked of the registry up front: a followup is
// accepted only for the exact live parent, and a registered agent means that the
// agent registry is mounted, so an accepted followup had the agents service. A
// refused one asks then (unavailableOr), and is answered CONTINUATION_UNAVAILABLE
// if the service is absent, as if it had been asked first — nothing was written
// before the refusal. The registry round trip leaves the accepted followup's path.
func (m *Manager) FollowupHere(ctx context.Context, parent *owner.Agent, childID, content string, source session.Source) (string, error) {
	if ctx.Err() != nil {
		return "", job.Aborted(ctx)
	}
	if m.deps.Jobs == nil {
		return "", unavailable()
	}
	if m.draining.Load() {
		return "", m.unavailableOr(draining())
	}
	if m.deps.Store == nil {
		return "", m.unavailableOr(messages.Errorf(subagent.CodePersistenceUnavailable, PersistenceUnavailable))
	}
	reply := make(chan acceptRes, 1)
	m.root.Send(m.pid, &followupReq{submit: submit{ctx: ctx, parent: parent, content: text(content), source: source, to: reply}, id: childID})
	res := <-reply // the directory applies ctx up to acceptance and always answers
	if res.err != nil {
		return "", m.unavailableOr(res.err)
	}
	return res.id, nil
}

// unavailableOr is a refused followup's answer: CONTINUATION_UNAVAILABLE if the
// agents service is absent (SPEC §6.1: it is checked first), else err. It asks the
// registry without the caller's ctx, whose end must not read as an absent service.
func (m *Manager) unavailableOr(err error) error {
	if !m.available(context.Background()) {
		return unavailable()
	}
	return err
}

// Interrupt stops target's current turn and parks its queued messages (SPEC §6.4).
// It returns once admitted; the turn ends asynchronously. Without the agent
// service it is a silent no-op.
//
// With a Placement, an interrupt by an agent (auth.Ancestor) goes to the member
// that owns target, as its direct parent (InterruptHere there); user authority
// (auth.ParentSession) reaches only the children resident on this member.
func (m *Manager) Interrupt(ctx context.Context, target string, auth Authority) error {
	if m.deps.Placement != nil && auth.Ancestor != nil {
		if ctx.Err() != nil {
			return job.Aborted(ctx)
		}
		if !m.available(ctx) {
			return nil
		}
		kind, _, err := m.placed(ctx, auth.Ancestor)
		if err != nil {
			return err
		}
		return m.deps.Placement.Interrupt(ctx, auth.Ancestor, kind, target)
	}
	return m.InterruptHere(ctx, target, auth)
}

// InterruptHere is Interrupt on this Manager, whatever its Placement.
func (m *Manager) InterruptHere(ctx context.Context, target string, auth Authority) error {
	if ctx.Err() != nil {
		return job.Aborted(ctx)
	}
	if !m.available(ctx) {
		return nil
	}
	reply := make(chan error, 1)
	m.root.Send(m.pid, &interruptReq{target: target, auth: auth, reply: reply})
	err, werr := awaitCtx(ctx, reply)
	if werr != nil {
		return werr
	}
	return err
}

// Report relays content from a live continuable child to its parent (SPEC §6.6):
// steered into the parent's next step (waking it when idle), or injected when quiet.
func (m *Manager) Report(ctx context.Context, child *owner.Agent, content string, quiet bool) (string, error) {
	if ctx.Err() != nil {
		return "", job.Aborted(ctx)
	}
	if !m.available(ctx) {
		return "", unavailable()
	}
	if child == nil {
		return "", unauthorized("a report requires the calling agent")
	}
	reply := make(chan acceptRes, 1)
	m.root.Send(m.pid, &reportReq{child: child, content: text(content), quiet: quiet, reply: reply})
	res, err := awaitCtx(ctx, reply)
	if err != nil {
		return "", err
	}
	return res.id, res.err
}

// resident returns the resident entries among ids (absent ids are left out): one
// directory lookup per id, whatever the number of resident Activations.
func (m *Manager) resident(ctx context.Context, ids ...string) map[string]liveEntry {
	reply := make(chan map[string]liveEntry, 1)
	m.root.Send(m.pid, &liveReq{ids: ids, reply: reply})
	res, _ := awaitCtx(ctx, reply)
	return res
}

func (m *Manager) status(pid *actor.PID) (Status, bool) {
	v, err := m.root.RequestFuture(pid, &statusReq{}, statusTimeout).Result()
	if err != nil {
		return Status{}, false
	}
	st, ok := v.(Status)
	return st, ok
}

// List returns parent's continuable children (or all its descendants), with
// statuses: running, idle (resident and waiting) or ready (no Activation).
func (m *Manager) List(ctx context.Context, parent *owner.Agent, descendants bool) ([]Listed, error) {
	if ctx.Err() != nil {
		return nil, job.Aborted(ctx)
	}
	if !m.available(ctx) || m.deps.Store == nil || parent == nil {
		return []Listed{}, nil
	}
	kind, ok, err := m.speaker(ctx, parent)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, unauthorized("listing the subagents of %q requires the exact live agent", parent.Session())
	}
	return m.list(ctx, parent, kind, descendants)
}

// speaker returns the namespace parent speaks in (directory.kindOf), and whether
// it is the exact live instance registered for its session.
func (m *Manager) speaker(ctx context.Context, parent *owner.Agent) (string, bool, error) {
	type answer struct {
		kind string
		ok   bool
	}
	reply := make(chan answer, 1)
	m.root.Send(m.pid, &inspectReq{fn: func(d *directoryActor) {
		reply <- answer{kind: d.kindOf(parent), ok: m.live(context.Background(), parent)}
	}})
	a, err := awaitCtx(ctx, reply)
	return a.kind, a.ok, err
}

// Status returns the Activation of childID, if one is resident (false also when
// ctx ends first).
func (m *Manager) Status(ctx context.Context, childID string) (Status, bool) {
	if ctx.Err() != nil {
		return Status{}, false
	}
	e, ok := m.resident(ctx, childID)[childID]
	if !ok {
		return Status{}, false
	}
	return m.status(e.pid)
}

// Live returns how many Activations are resident (a gauge for tests; 0 when ctx
// ends before the answer).
func (m *Manager) Live(ctx context.Context) int {
	if ctx.Err() != nil {
		return 0
	}
	reply := make(chan int, 1)
	m.root.Send(m.pid, &gaugeReq{reply: reply})
	n, _ := awaitCtx(ctx, reply) // 0 when ctx ends first
	return n
}

// Drain closes admission for the whole manager (DRAINING from then on) and
// disposes every Activation, child-first; it returns once none is left or ctx ends.
func (m *Manager) Drain(ctx context.Context) error {
	m.draining.Store(true)
	reply := make(chan struct{}, 1)
	m.root.Send(m.pid, &drainReq{reply: reply})
	select {
	case <-reply:
		return nil
	case <-ctx.Done():
		return job.Aborted(ctx)
	}
}

// DrainContinuableChildren releases the named direct children of parent (SPEC
// §6.7), child-first, discarding their pending inbox work; absent ids are no-ops.
// parent must be the exact live parent agent. It returns once they are disposed or
// ctx ends. Without the agent service it is a silent no-op.
func (m *Manager) DrainContinuableChildren(ctx context.Context, parent *owner.Agent, ids []string) error {
	if ctx.Err() != nil {
		return job.Aborted(ctx)
	}
	if !m.available(ctx) {
		return nil
	}
	if parent == nil {
		return unauthorized("selected child teardown requires the exact live parent agent")
	}
	reply := make(chan error, 1)
	m.root.Send(m.pid, &drainChildrenReq{parent: parent, ids: ids, reply: reply})
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return job.Aborted(ctx)
	}
}

// DrainContinuableDescendants closes admission below these exact parent
// instances until each leaves the agent registry (a same-session replacement is
// not affected) and disposes their strict descendants, child-first (SPEC §6.7).
// It returns once they are disposed or ctx ends. Without the agent service it is a
// silent no-op.
func (m *Manager) DrainContinuableDescendants(ctx context.Context, parents []*owner.Agent) error {
	if ctx.Err() != nil {
		return job.Aborted(ctx)
	}
	if !m.available(ctx) {
		return nil
	}
	reply := make(chan struct{}, 1)
	m.root.Send(m.pid, &drainBelowReq{parents: parents, reply: reply})
	select {
	case <-reply:
		return nil
	case <-ctx.Done():
		return job.Aborted(ctx)
	}
}

// registered returns the PID registered for session, or nil. It is for the
// directory and Activations, which ask the registry from their own messages (the
// registry answers without waiting on anything).
func (m *Manager) registered(session string) *actor.PID {
	return m.deps.Jobs.RegisteredAgent(context.Background(), session)
}
