package activation

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
)

// DescriptorVersion is the descriptor format this package reads and writes.
const DescriptorVersion = 2

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
	Store    session.Store // nil: PERSISTENCE_UNAVAILABLE
	Runtime  *subagent.Runtime
	Runner   subagent.TurnRunner // runs every child's turns
	Jobs     *registry.Client    // the agent registry (exact live parents, report recipients)
	NewAgent func(session string) (*owner.Agent, error)
	Logger   *slog.Logger
	Now      func() int64
	// Dispatcher, if set, runs the activations' mailboxes (seeded schedules).
	Dispatcher actor.Dispatcher
}

// Manager is the continuation manager (SPEC §6): a handle to the directory actor,
// which owns at most one live Activation per child session.
type Manager struct {
	deps   Deps
	root   *actor.RootContext
	pid    *actor.PID
	logger *slog.Logger
}

// NewManager spawns the directory actor.
func NewManager(system *actor.ActorSystem, deps Deps) (*Manager, error) {
	m := &Manager{deps: deps, root: system.Root, logger: deps.Logger}
	if m.logger == nil {
		m.logger = slog.Default()
	}
	d := &directoryActor{m: m, acts: map[string]*entry{}, byAgent: map[string]string{}}
	props := actor.PropsFromProducer(func() actor.Actor { return d })
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
	return 0
}

// live reports whether a is the exact live instance registered for its session.
func (m *Manager) live(a *owner.Agent) bool {
	if a == nil {
		return false
	}
	pid := m.deps.Jobs.RegisteredAgent(a.Session())
	return pid != nil && pid.Equal(a.PID())
}

// lineageClosing is a placeholder until scoped drains track lineages: a parent's
// lineage is closing while the whole manager drains.
func (m *Manager) lineageClosing(string) bool { return false }

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
// id, and returns once its first message is accepted. ctx governs only the steps
// before acceptance; any failure before it rolls the child back entirely.
func (m *Manager) Start(ctx context.Context, parent *owner.Agent, provider, label, childID string, req subagent.Request) (string, string, error) {
	if m.deps.Store == nil {
		return "", "", messages.Errorf(subagent.CodePersistenceUnavailable,
			"continuable subagents require session persistence (configure a session store: activation.Deps.Store)")
	}
	if req.MaxDepth != nil && (*req.MaxDepth < 0 || *req.MaxDepth > 1<<53-1) {
		return "", "", subagent.ErrInvalidMaxDepth
	}
	if childID == "" {
		childID = newChildID()
	}
	desc, _ := json.Marshal(Descriptor{Version: DescriptorVersion, Mode: "continuable", Provider: provider, Label: label,
		Persona: req.Persona, ToolFilter: req.ToolFilter})
	p := m.deps.Runtime.Provider(provider)
	if p == nil {
		return "", "", messages.Errorf(subagent.CodeNoProvider, "no subagent provider registered for %q", provider)
	}
	cp, ok := p.(subagent.Continuable)
	if !ok {
		return "", "", messages.Errorf(subagent.CodeUnsupportedCapability,
			"subagent provider %q does not support continuable children (no prepareContinuable capability)", provider)
	}
	seed, err := cp.PrepareContinuable(ctx, req)
	if err != nil {
		return "", "", err
	}
	if err := context.Cause(ctx); ctx.Err() != nil {
		return "", "", err
	}
	reply := make(chan startRes, 1)
	m.root.Send(m.pid, &startReq{parent: parent, id: childID, label: label, descriptor: desc, seed: seed.History,
		req: req, content: text(req.Prompt), reply: reply})
	res := <-reply
	return res.childID, res.messageID, res.err
}

// Followup sends content to childID as its next FIFO turn (SPEC §6.3): into the
// running or waiting Activation, or a cold resume. parent must be the exact live
// parent of record. ctx governs only lookup and admission.
func (m *Manager) Followup(ctx context.Context, parent *owner.Agent, childID, content string, source session.Source) (string, error) {
	reply := make(chan acceptRes, 1)
	m.root.Send(m.pid, &followupReq{parent: parent, id: childID, content: text(content), source: source, reply: reply})
	select {
	case res := <-reply:
		return res.id, res.err
	case <-ctx.Done():
		// The operation may still be accepted; the caller's context no longer waits.
		return "", context.Cause(ctx)
	}
}

// Interrupt stops target's current turn and keeps its queued messages (SPEC §6.4).
// It returns once admitted; the turn ends asynchronously.
func (m *Manager) Interrupt(target string, auth Authority) error {
	reply := make(chan error, 1)
	m.root.Send(m.pid, &interruptReq{target: target, auth: auth, reply: reply})
	return <-reply
}

// Report relays content from a live continuable child to its parent (SPEC §6.6).
func (m *Manager) Report(child *owner.Agent, content string, quiet bool) (string, error) {
	reply := make(chan acceptRes, 1)
	m.root.Send(m.pid, &reportReq{child: child, content: text(content), quiet: quiet, reply: reply})
	res := <-reply
	return res.id, res.err
}

// List returns parent's continuable children (or all its descendants).
func (m *Manager) List(parent *owner.Agent, descendants bool) ([]Listed, error) {
	reply := make(chan listRes, 1)
	m.root.Send(m.pid, &listReq{parent: parent, descendants: descendants, reply: reply})
	res := <-reply
	return res.items, res.err
}

// Live returns how many Activations are resident (a gauge for tests).
func (m *Manager) Live() int {
	reply := make(chan int, 1)
	m.root.Send(m.pid, &gaugeReq{reply: reply})
	return <-reply
}

// Drain closes admission and disposes every Activation child-first; it returns once
// none is left or ctx ends.
func (m *Manager) Drain(ctx context.Context) error {
	reply := make(chan struct{}, 1)
	m.root.Send(m.pid, &drainReq{reply: reply})
	select {
	case <-reply:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
