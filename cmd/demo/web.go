package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/controller"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/producers/process"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/web"
)

// webCommands are the shell jobs the --web demo's lead keeps starting: output that
// streams, a long job worth stopping, a failure, a quick success.
var webCommands = []string{
	`for i in $(seq 1 40); do echo "compiling module $i/40"; sleep 0.4; done; echo done`,
	`sleep 45`,
	`for i in $(seq 1 12); do echo "test $i ok"; sleep 1; done; echo "warning: 1 flaky test" >&2`,
	`echo "fetching deps"; sleep 3; echo "error: registry unreachable" >&2; exit 3`,
	`for i in $(seq 1 200); do echo "log line $i: $(date +%T.%N)"; sleep 0.1; done`,
	`echo ready; sleep 8`,
}

// webLabels are the continuable children the lead delegates to.
var webLabels = []string{"review", "incident analyst", "docs writer"}

// runWeb is --web: one live system — a lead agent that keeps starting, streaming
// and finishing real shell jobs and continuable children, with an Activation crash
// now and then — and the task list on a loopback URL (printed with its token)
// until ctx ends (Ctrl-C), when the page is told bye and the system shuts down.
func runWeb(ctx context.Context, addr, path string, stdout, stderr io.Writer) int {
	st := newStage(ctx, newEmitter(io.Discard, false, false), "web", path)
	loop := newLoop(st, "lead", "-") // counts nothing: the demo never expects notices
	thinking := make(chan string, 64)
	s, err := openSubagents(st, loop, thinking)
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	defer s.close()
	ctl, err := s.sys.StartController(controller.Config{})
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	h, err := web.New(s.sys, ctl, web.Config{
		Sessions: func() []web.Session { return []web.Session{{ID: "lead", Label: "lead agent"}, {ID: ""}} },
		Children: web.Activations{Manager: s.mgr, Agent: func(session string) *owner.Agent {
			if session == s.lead.Session() {
				return s.lead
			}
			return nil
		}},
	})
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	srv, err := web.Listen(h, web.ListenConfig{Addr: addr})
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 2
	}
	fmt.Fprintf(stdout, "troupe task list: %s\n(Ctrl-C to stop)\n", srv.URL())
	w := &webScript{s: s, rng: rand.New(rand.NewPCG(1, 2)), thinking: thinking}
	w.play(ctx)
	closeCtx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := srv.Close(closeCtx); err != nil {
		fmt.Fprintf(stderr, "demo: closing the task list: %v\n", err)
	}
	fmt.Fprintln(stderr, "demo: interrupted: the task list said bye, the system is shutting down")
	return exitInterrupted
}

// webScript is the lead's scripted behaviour in --web.
type webScript struct {
	s        *subagentSystem
	rng      *rand.Rand
	thinking chan string
	children []string
	step     int
}

func (w *webScript) play(ctx context.Context) {
	tick := time.NewTicker(1500 * time.Millisecond)
	defer tick.Stop()
	for {
		w.act(ctx)
		select {
		case <-ctx.Done():
			return
		case <-w.thinking:
		case <-tick.C:
		}
	}
}

// act does one step: mostly shell jobs, sometimes a child's turn, now and then a crash.
func (w *webScript) act(ctx context.Context) {
	w.step++
	live := 0
	if jobs, err := w.s.sys.Jobs().List(ctx, registry.AsAgent(w.s.lead)); err == nil {
		for _, j := range jobs {
			if !j.Status.Terminal() {
				live++
			}
		}
	}
	switch {
	case w.step%5 == 0:
		w.child(ctx)
	case live < 6:
		spec := process.Shell(webCommands[w.rng.IntN(len(webCommands))], process.Config{})
		spec.Owner = w.s.lead
		_, _ = w.s.sys.Jobs().Start(ctx, spec)
	}
}

// child starts a continuable child, or talks to one: a quick reply, a long turn
// (later interrupted), or — one time in four — a message whose handling crashes
// the Activation, which its supervisor restarts from the sessions file.
func (w *webScript) child(ctx context.Context) {
	if len(w.children) < len(webLabels) {
		label := webLabels[len(w.children)]
		id, _, err := w.s.mgr.Start(ctx, w.s.lead, "spawn", label, "", subagent.Request{Prompt: "summarise the repo"})
		if err == nil {
			w.children = append(w.children, id)
		}
		return
	}
	id := w.children[w.rng.IntN(len(w.children))]
	switch w.rng.IntN(4) {
	case 0:
		w.s.store.armCrash(id, crashHow)
		_, _ = w.s.mgr.Followup(ctx, w.s.lead, id, "draft the postmortem", session.Source{Kind: "coordinator"})
	case 1:
		_, _ = w.s.mgr.Followup(ctx, w.s.lead, id, "investigate the flaky test", session.Source{Kind: "coordinator"})
		go func() {
			select {
			case <-time.After(6 * time.Second):
				_ = w.s.mgr.Interrupt(context.Background(), id, activation.Authority{ParentSession: w.s.lead.Session()})
			case <-ctx.Done():
			}
		}()
	default:
		_, _ = w.s.mgr.Followup(ctx, w.s.lead, id, "what is the capital of France?", session.Source{Kind: "coordinator"})
	}
}
