package acp

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/subagent"
)

// Provider is the ACP subagent provider: each one-shot run is one agent process
// (docs/INTEROP.md section 1).
type Provider struct {
	cfg  Config
	runs atomic.Uint64

	// The live agent processes, for the scope effect that stops them all. The lock
	// guards only this set (a leaf, like output.Buffer's).
	mu     sync.Mutex
	live   map[*agent]struct{}
	closed bool

	runner *runner // the continuable children's turns

	// The loadSession answer of the capability probe, once known.
	probeMu   sync.Mutex
	probed    bool
	canLoad   bool
	probeRuns atomic.Int64 // how many probe processes were started (tests)
}

// continuable is the provider with Config.Continuable: it also offers
// PrepareContinuable.
type continuable struct{ *Provider }

// Register validates cfg and registers the provider in sc, with one more effect,
// acp.processes(), that stops every process of the provider (docs/INTEROP.md
// section 1.9) when sc is disposed: System.Shutdown leaves no agent process behind.
func Register(rt *subagent.Runtime, sc *scope.Scope, cfg Config) (*Provider, error) {
	p, eff, err := newProvider(sc, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := rt.RegisterProvider(context.Background(), sc, p.Registered()); err != nil {
		_ = eff.Run(context.Background())
		return nil, err
	}
	return p, nil
}

// New validates cfg and builds the provider with Register's acp.processes() effect
// in sc, without registering it: the caller registers p.Registered() itself.
func New(sc *scope.Scope, cfg Config) (*Provider, error) {
	p, _, err := newProvider(sc, cfg)
	return p, err
}

func newProvider(sc *scope.Scope, cfg Config) (*Provider, *scope.Effect, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	p := &Provider{cfg: cfg.withDefaults(), live: map[*agent]struct{}{}}
	p.runner = &runner{p: p, by: map[string]*agent{}}
	eff, err := sc.Add("acp.processes()", func(context.Context) error { return p.stopAll() })
	if err != nil {
		return nil, nil, err
	}
	return p, eff, nil
}

// Registered is the value to register in a subagent.Runtime: the provider itself,
// or with Config.Continuable the provider that also offers PrepareContinuable.
func (p *Provider) Registered() subagent.Provider {
	if p.cfg.Continuable {
		return continuable{p}
	}
	return p
}

// Name is Config.Name ("acp" by default).
func (p *Provider) Name() string { return p.cfg.Name }

// Capabilities: none. ACP has no field for an output schema, a depth limit, a tool
// filter or a persona, and troupe cannot enforce them in another process, so the
// runtime refuses such requests with UNSUPPORTED_CAPABILITY before anything spawns.
func (p *Provider) Capabilities() subagent.Capabilities { return subagent.Capabilities{} }

// InheritsParentContext is false: only the working directory crosses the process boundary.
func (p *Provider) InheritsParentContext() bool { return false }

// ProbeRuns reports how many capability-probe processes were started.
func (p *Provider) ProbeRuns() int64 { return p.probeRuns.Load() }

// Start spawns the agent, runs initialize → (authenticate) → session/new, and
// returns once the sessionId is known; session/prompt runs after that. When ctx
// ends (a background job's kill) or at the run's Dispose, the prompt is cancelled:
// Dispose cancels a prompt in flight (session/cancel, CancelGrace) and stops the
// process tree; it returns once the tree is gone.
func (p *Provider) Start(ctx context.Context, req subagent.ResolvedRequest) (*subagent.Run, error) {
	if req.Prompt == "" {
		return nil, messages.Errorf(messages.CodeInvalidConfig, "acp: invalid prompt: expected non-empty text")
	}
	cwd, err := p.cwd(req.Parent.Cwd)
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, errCancelledStart
	}
	a, err := p.spawn(ctx, cwd)
	if err != nil {
		return nil, err
	}
	if err := a.handshake(ctx, "", false); err != nil {
		return nil, err
	}
	parent := req.Parent.Session
	if parent == "" {
		parent = "root"
	}
	id := parent + "/" + p.cfg.Name + "-" + strconv.FormatUint(p.runs.Add(1), 10)
	// The run ends with ctx (a background job's kill cancels it) or at Dispose.
	runCtx, cancel := context.WithCancel(ctx)
	prompted := make(chan struct{})
	run, settle := subagent.NewRun(id, false, func(context.Context) error {
		cancel()
		<-prompted
		return a.stop()
	})
	go func() {
		defer close(prompted)
		settle(a.prompt(runCtx, req.Prompt), nil)
	}()
	return run, nil
}

// cwd resolves the child's working directory: Config.Cwd, else the given one.
func (p *Provider) cwd(fallback string) (string, error) {
	dir := p.cfg.Cwd
	if dir == "" {
		dir = fallback
	}
	if dir == "" {
		return "", messages.Errorf(messages.CodeInvalidConfig, "acp: no working directory for the child; set Config.Cwd or give the parent a cwd")
	}
	return dir, checkDir(dir)
}

// track adds a to the live set; after stopAll it refuses.
func (p *Provider) track(a *agent) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.live[a] = struct{}{}
	return true
}

func (p *Provider) untrack(a *agent) {
	p.mu.Lock()
	delete(p.live, a)
	p.mu.Unlock()
}

// stopAll stops every live process of the provider, concurrently, and refuses new ones.
func (p *Provider) stopAll() error {
	p.mu.Lock()
	p.closed = true
	agents := make([]*agent, 0, len(p.live))
	for a := range p.live {
		agents = append(agents, a)
	}
	p.mu.Unlock()
	errs := make([]error, len(agents))
	var wg sync.WaitGroup
	for i, a := range agents {
		wg.Go(func() { errs[i] = a.stop() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Live reports how many agent processes of the provider are running (tests).
func (p *Provider) Live() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.live)
}

// PrepareContinuable offers continuable children only for an agent whose
// initialize answer has agentCapabilities.loadSession: true; their turns run
// through TurnRunner (the continuation manager's runner must be
// subagent.Route(rt, embedderRunner)). The answer comes once
// per provider from a probe process (started and stopped again) and is cached.
func (c continuable) PrepareContinuable(ctx context.Context, req subagent.Request) (subagent.Seed, error) {
	p := c.Provider
	canLoad, err := p.probe(ctx, req.Parent.Cwd)
	if err != nil {
		return subagent.Seed{}, err
	}
	if !canLoad {
		return subagent.Seed{}, messages.Errorf(subagent.CodeUnsupportedCapability,
			"subagent provider %q does not support continuable children (the ACP agent does not advertise loadSession)", p.cfg.Name)
	}
	return subagent.Seed{}, nil // the child starts fresh: its first turn opens the ACP session
}

// probe learns loadSession once per provider.
func (p *Provider) probe(ctx context.Context, parentCwd string) (bool, error) {
	p.probeMu.Lock()
	defer p.probeMu.Unlock()
	if p.probed {
		return p.canLoad, nil
	}
	dir := p.cfg.Cwd
	if dir == "" {
		dir = parentCwd
	}
	if dir == "" {
		dir = os.TempDir()
	}
	if err := checkDir(dir); err != nil {
		return false, err
	}
	if ctx.Err() != nil {
		return false, errCancelledStart
	}
	p.probeRuns.Add(1)
	a, err := p.spawn(ctx, dir)
	if err != nil {
		return false, err
	}
	if err := a.handshake(ctx, "", true); err != nil {
		return false, err
	}
	canLoad := a.init.AgentCapabilities.LoadSession
	if err := a.stop(); err != nil {
		return false, err
	}
	p.probed, p.canLoad = true, canLoad
	return canLoad, nil
}
