package subagent

import (
	"context"
	"strconv"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Local is an in-process provider: each run is a child agent actor that runs its
// turns through a TurnRunner. "spawn" starts the child with an empty history;
// "fork" seeds it with the parent's completed turns.
type Local struct {
	name     string
	inherits bool
	runner   TurnRunner
	system   *actor.ActorSystem
	children atomic.Uint64
}

// NewSpawn is the spawn provider: a fresh child.
func NewSpawn(system *actor.ActorSystem, runner TurnRunner) *Local {
	return &Local{name: "spawn", runner: runner, system: system}
}

// NewFork is the fork provider: a child that inherits the parent's completed turns.
func NewFork(system *actor.ActorSystem, runner TurnRunner) *Local {
	return &Local{name: "fork", inherits: true, runner: runner, system: system}
}

// Named returns a copy of the provider registered under another name.
func (l *Local) Named(name string) *Local {
	return &Local{name: name, inherits: l.inherits, runner: l.runner, system: l.system}
}

func (l *Local) Name() string                { return l.name }
func (l *Local) InheritsParentContext() bool { return l.inherits }

// Capabilities: an in-process child enforces every option itself.
func (l *Local) Capabilities() Capabilities {
	return Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true}
}

// PrepareContinuable makes Local a continuable provider: a spawned child starts
// fresh, a forked one from a copy of the parent's completed turns.
func (l *Local) PrepareContinuable(ctx context.Context, req Request) (Seed, error) {
	if !l.inherits {
		return Seed{}, nil
	}
	return Seed{History: append([]Message(nil), req.Parent.History...)}, nil
}

// Start spawns the child agent actor, which runs the prompt as its first turn.
func (l *Local) Start(ctx context.Context, req ResolvedRequest) (*Run, error) {
	if err := CheckDepth(req); err != nil {
		return nil, err
	}
	parent := req.Parent.Session
	if parent == "" {
		parent = "root"
	}
	id := parent + "/" + l.name + "-" + strconv.FormatUint(l.children.Add(1), 10)
	var history []Message
	if l.inherits {
		history = append(history, req.Parent.History...)
	}
	turn := Turn{Session: id, Depth: req.Depth, History: HistoryOf(history),
		Input:   Message{Role: "user", Content: []Block{{Type: "text", Text: req.Prompt}}},
		Persona: req.Persona, ToolFilter: req.ToolFilter, OutputSchema: req.OutputSchema, Options: req.Options}
	var pid *actor.PID
	quiet := make(chan struct{}) // closed when the turn goroutine has returned
	run, settle := NewRun(id, true, func(ctx context.Context) error {
		err := l.system.Root.StopFuture(pid).Wait()
		<-quiet // the runner honours its cancelled ctx: quiescence
		return err
	})
	child := &childActor{runner: l.runner, turn: turn, settle: settle, quiet: quiet}
	pid, err := l.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return child }), "subagent-"+id)
	if err != nil {
		return nil, err
	}
	return run, nil
}

// childActor is one in-process child agent: it owns its session history and runs
// each turn in a goroutine it owns (never inside Receive, which would block Stop),
// with a cancelable context; the turn's end comes back as a message.
type childActor struct {
	runner  TurnRunner
	turn    Turn
	history []Message
	settle  func(Result, error)
	cancel  context.CancelFunc
	running bool
	quiet   chan struct{}
}

type turnEnded struct {
	res      Result
	produced []Message
}

func (a *childActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.history, _ = a.turn.History.Messages(context.Background()) // held in memory: no read, no error
		ctx, cancel := context.WithCancel(context.Background())
		a.cancel, a.running = cancel, true
		root, self, runner, turn, quiet := c.ActorSystem().Root, c.Self(), a.runner, a.turn, a.quiet
		go func() {
			defer close(quiet)
			res, produced := RunOneTurn(ctx, runner, turn)
			root.Send(self, &turnEnded{res: res, produced: produced})
		}()
	case *turnEnded:
		a.running = false
		a.history = append(append(a.history, a.turn.Input), m.produced...)
		a.settle(m.res, nil)
	case *actor.Stopping:
		if a.running {
			a.cancel()
			a.settle(Result{StopReason: StopAborted}, nil)
		}
	}
}
