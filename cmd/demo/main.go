// Command demo runs a short scripted agent system on troupe and prints its timeline:
// two agents start real shell jobs, read streaming output, kill one with a
// reason, answer a PTY prompt, and one agent is torn down with its work.
//
//	go run ./cmd/demo
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/producers/process"
)

const (
	tick        = 20 * time.Millisecond // how often the stream producer emits a line
	waitBudget  = 5 * time.Second
	stopTimeout = 10 * time.Second
)

// scenarios are the demo's parts, in the order a full run plays them.
var scenarios = []struct {
	name, about string
	run         func(*timeline) error
}{
	{"jobs", "shell jobs streaming output, a kill with a reason, a PTY prompt, a teardown", scenarioJobs},
	{"notices", "completion notices: a wake budget, a human kill the model is told about, a model kill it is not", scenarioNotices},
	{"subagents", "delegation in the foreground and background, a continuable child across a restart", scenarioSubagents},
}

func main() {
	only := flag.String("scenario", "", "run one scenario (jobs, notices, subagents); default all")
	flag.Parse()
	ran := false
	for _, sc := range scenarios {
		if *only != "" && *only != sc.name {
			continue
		}
		ran = true
		tl := &timeline{start: time.Now()}
		fmt.Printf("== %s: %s\n", sc.name, sc.about)
		if err := sc.run(tl); err != nil {
			fmt.Fprintf(os.Stderr, "demo: scenario %s: %v\n", sc.name, err)
			os.Exit(1)
		}
	}
	if !ran {
		fmt.Fprintf(os.Stderr, "demo: unknown scenario %q\n", *only)
		os.Exit(2)
	}
}

// timeline prints events with the time since the start.
type timeline struct {
	start time.Time
	mu    sync.Mutex // serialises lines from main and from observers
}

func (t *timeline) say(who, format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Printf("%6.1fms  %-8s %s\n", float64(time.Since(t.start).Microseconds())/1000, who, fmt.Sprintf(format, args...))
}

func scenarioJobs(tl *timeline) error {
	sys, err := troupe.New(troupe.Config{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if err := sys.Shutdown(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "demo: shutdown:", err)
		}
		tl.say("system", "shut down")
	}()
	jobs := sys.Jobs()
	if _, err := jobs.AttachController(sys.Scope(), "demo"); err != nil {
		return err
	}
	if _, err := jobs.MountAgents(sys.Scope()); err != nil {
		return err
	}
	if _, err := jobs.OnJobDone(sys.Scope(), func(s *messages.JobSnapshot, o registry.Owner) {
		tl.say("notice", "%s %s (%s) for %q reported=%v", s.Id, s.Status.Name(), s.GetDetail(), o.Session, s.Reported)
	}); err != nil {
		return err
	}

	alice, err := sys.NewAgent(nil, "alice")
	if err != nil {
		return err
	}
	bob, err := sys.NewAgent(nil, "bob")
	if err != nil {
		return err
	}
	for _, a := range []interface{ Session() string }{alice, bob} {
		tl.say("system", "agent %q spawned", a.Session())
	}
	if err := jobs.RegisterAgent(alice); err != nil {
		return err
	}
	if err := jobs.RegisterAgent(bob); err != nil {
		return err
	}

	// alice: a real shell job whose output streams in as it runs.
	ticker := process.Shell(`i=0; while :; do i=$((i+1)); echo "tick $i"; sleep 0.02; done`, process.Config{})
	ticker.Owner = alice
	primes, err := jobs.Start(ticker)
	if err != nil {
		return err
	}
	tl.say("alice", "started %s", primes)
	// bob: a final-output job.
	sum, err := jobs.Start(job.Spec{Kind: "sum", Label: "sum 1..1e6", Owner: bob, Run: sumJob})
	if err != nil {
		return err
	}
	tl.say("bob", "started %s", sum)

	ctx := context.Background()
	for range 2 {
		if _, err := jobs.Wait(ctx, primes, 3*tick, "alice"); err != nil {
			return err
		}
		text, snap, err := jobs.Read(primes, "alice")
		if err != nil {
			return err
		}
		tl.say("alice", "read %s (%s): %q", primes, snap.Status.Name(), strings.Join(strings.Fields(text), " "))
	}
	snap, err := jobs.Wait(ctx, sum, waitBudget, "bob")
	if err != nil {
		return err
	}
	out, _, err := jobs.Read(sum, "bob")
	if err != nil {
		return err
	}
	tl.say("bob", "waited for %s: %s, output %q", sum, snap.Status.Name(), out)

	if _, _, err := jobs.Read(primes, "bob"); err != nil {
		tl.say("bob", "read %s refused: %v (code %s)", primes, err, messages.CodeOf(err))
	}

	build := process.Shell("echo compiling; sleep 30; echo done", process.Config{})
	build.Owner = alice
	second, err := jobs.Start(build)
	if err != nil {
		return err
	}
	tl.say("alice", "started %s (%s)", second, build.Label)
	if _, err := jobs.Wait(ctx, second, 3*tick, "alice"); err != nil {
		return err
	}
	res, ks, err := jobs.Kill(second, "alice", registry.KillOptions{Reason: "no longer needed"})
	if err != nil {
		return err
	}
	tl.say("alice", "kill %s: %s (now %s)", second, res.Name(), ks.Status.Name())
	if snap, err = jobs.Wait(ctx, second, waitBudget, "alice"); err != nil {
		return err
	}
	tl.say("alice", "%s settled %s: %q", second, snap.Status.Name(), snap.GetDetail())

	// A program waiting at a prompt, under a pseudo-terminal, answered instead of hanging.
	prompt, term := process.PTY(`printf 'delete build cache? [y/N] '; read a; echo "you said: $a"`, process.Config{})
	prompt.Owner = alice
	ask, err := jobs.Start(prompt)
	if err != nil {
		return err
	}
	var screen strings.Builder
	for !strings.Contains(screen.String(), "[y/N]") {
		if _, err := jobs.Wait(ctx, ask, tick, "alice"); err != nil {
			return err
		}
		text, _, err := jobs.Read(ask, "alice")
		if err != nil {
			return err
		}
		screen.WriteString(text)
	}
	tl.say("alice", "%s asks: %q", ask, strings.TrimSpace(screen.String()))
	if err := term.Send("y\n"); err != nil {
		return err
	}
	if snap, err = jobs.Wait(ctx, ask, waitBudget, "alice"); err != nil {
		return err
	}
	answer, _, err := jobs.Read(ask, "alice")
	if err != nil {
		return err
	}
	tl.say("alice", "%s %s: %q", ask, snap.Status.Name(), strings.TrimSpace(answer))

	tl.say("alice", "disposing agent (its running job %s is torn down)", primes)
	if err := alice.Dispose(ctx); err != nil {
		return err
	}
	list, err := jobs.List("alice")
	if err != nil {
		return err
	}
	tl.say("alice", "jobs left after teardown: %d", len(list))
	list, err = jobs.List("bob")
	if err != nil {
		return err
	}
	for _, s := range list {
		tl.say("bob", "still has %s (%s)", s.Id, s.Status.Name())
	}
	return nil
}

// sumJob is a final-output producer: it computes and settles with its output.
func sumJob() (job.Hooks, error) {
	done := make(chan job.Outcome, 1)
	stop := make(chan struct{})
	go func() {
		total := 0
		for i := 1; i <= 1_000_000; i++ {
			if i%100_000 == 0 {
				select {
				case <-stop:
					done <- job.Outcome{Status: job.Killed}
					return
				default:
				}
			}
			total += i
		}
		done <- job.Outcome{Status: job.Completed, Detail: "exit code: 0", Output: fmt.Sprint(total)}
	}()
	var once sync.Once
	return job.Hooks{Cancel: func(string) error { once.Do(func() { close(stop) }); return nil }, Done: done}, nil
}
