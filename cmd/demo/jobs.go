package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/producers/process"
)

const (
	tick       = 20 * time.Millisecond // how often the stream producer emits a line
	waitBudget = 10 * time.Second      // the longest the demo waits for something it expects
)

// scenarioJobs: two agents start real shell jobs, read streaming output, kill one
// with a reason, answer a PTY prompt, and one agent is torn down with its work.
func scenarioJobs(st *stage) error {
	sys, err := st.newSystem()
	if err != nil {
		return err
	}
	defer st.shutdown(sys)
	jobs := sys.Jobs()
	if _, err := jobs.AttachController(context.Background(), sys.Scope(), "demo"); err != nil {
		return err
	}
	if _, err := jobs.MountAgents(context.Background(), sys.Scope()); err != nil {
		return err
	}
	alice, err := spawnAgent(st, sys, "alice", nil)
	if err != nil {
		return err
	}
	bob, err := spawnAgent(st, sys, "bob", nil)
	if err != nil {
		return err
	}

	// alice: a real shell job whose output streams in as it runs.
	ticker := process.Shell(`i=0; while :; do i=$((i+1)); echo "tick $i"; sleep 0.02; done`, process.Config{})
	ticker.Owner = alice
	stream, err := jobs.Start(context.Background(), ticker)
	if err != nil {
		return err
	}
	st.started("alice", stream, ticker.Label)
	// bob: a job that settles with its final output.
	sum, err := jobs.Start(context.Background(), job.Spec{Kind: "sum", Label: "sum 1..1e6", Owner: bob, Run: sumJob})
	if err != nil {
		return err
	}
	st.started("bob", sum, "sum 1..1e6")

	ctx := context.Background()
	reads, err := readWhileRunning(st, jobs, registry.AsAgent(alice), stream, 2)
	if err != nil {
		return err
	}
	if err := st.check("a running shell job's output streams in while it runs", reads == 2,
		"%d reads of %s found output while it ran", reads, stream); err != nil {
		return err
	}
	snap, err := jobs.Wait(ctx, sum, waitBudget, registry.AsAgent(bob))
	if err != nil {
		return err
	}
	out, _, err := jobs.Read(ctx, sum, registry.AsAgent(bob))
	if err != nil {
		return err
	}
	st.emit(Event{Kind: KindJobOutput, Who: "bob", Job: sum, Status: snap.Status.Name(), Text: out})

	_, _, err = jobs.Read(ctx, stream, registry.AsAgent(bob))
	st.emit(Event{Kind: KindRefused, Who: "bob", Job: stream, Code: string(messages.CodeOf(err)), Text: fmt.Sprint(err)})
	if err := st.check("an agent cannot read another session's job", messages.CodeOf(err) == messages.CodeForeign,
		"bob's read of %s answered %v", stream, err); err != nil {
		return err
	}

	build := process.Shell("echo compiling; sleep 30; echo done", process.Config{})
	build.Owner = alice
	slow, err := jobs.Start(ctx, build)
	if err != nil {
		return err
	}
	st.started("alice", slow, build.Label)
	if _, err := jobs.Wait(ctx, slow, 3*tick, registry.AsAgent(alice)); err != nil {
		return err
	}
	st.cause(slow, causeKill)
	res, ks, err := jobs.Kill(ctx, slow, registry.AsAgent(alice), registry.KillOptions{Reason: "no longer needed"})
	if err != nil {
		return err
	}
	st.emit(Event{Kind: KindJobKill, Who: "alice", Job: slow, Detail: "no longer needed",
		Status: res.Name() + ", now " + ks.Status.Name()})
	if snap, err = jobs.Wait(ctx, slow, waitBudget, registry.AsAgent(alice)); err != nil {
		return err
	}
	if err := st.check("a killed shell job settles killed, with the kill's reason",
		snap.Status == messages.JobStatus_JOB_STATUS_KILLED && strings.HasSuffix(snap.GetDetail(), "; no longer needed"),
		"%s settled %s (%s)", slow, snap.Status.Name(), snap.GetDetail()); err != nil {
		return err
	}

	if err := answerPrompt(st, jobs, alice); err != nil {
		return err
	}

	st.cause(stream, causeTeardown)
	st.say("alice", "disposing agent alice: its running job %s is torn down with it", stream)
	if err := alice.Dispose(ctx); err != nil {
		return err
	}
	st.emit(Event{Kind: KindAgent, Who: "alice", Status: "disposed"})
	// A disposed incarnation speaks for no session any more, so the check asks as
	// no caller: a job still registered would answer job/foreign, not job/not-found.
	_, gone := jobs.Get(ctx, stream, registry.NoCaller)
	if err := st.check("an agent's teardown takes its running jobs with it", messages.CodeOf(gone) == messages.CodeNotFound,
		"alice's job %s is still registered (%v)", stream, gone); err != nil {
		return err
	}
	kept, err := jobs.List(ctx, registry.AsAgent(bob))
	if err != nil {
		return err
	}
	for _, s := range kept {
		st.say("bob", "still has %s (%s): another agent's teardown leaves it alone", s.Id, s.Status.Name())
	}
	return nil
}

// readWhileRunning reads alice's stream job until want reads have found output
// while it runs (or waitBudget passes); it returns how many did.
func readWhileRunning(st *stage, jobs *registry.Client, alice registry.Caller, id string, want int) (int, error) {
	deadline := time.Now().Add(waitBudget)
	reads := 0
	for reads < want && time.Now().Before(deadline) {
		if _, err := jobs.Wait(context.Background(), id, 3*tick, alice); err != nil { // paces the reads
			return reads, err
		}
		text, snap, err := jobs.Read(context.Background(), id, alice)
		if err != nil {
			return reads, err
		}
		if text == "" || snap.Status != messages.JobStatus_JOB_STATUS_RUNNING {
			continue
		}
		reads++
		st.emit(Event{Kind: KindJobOutput, Who: "alice", Job: id, Status: snap.Status.Name(), Text: strings.Join(strings.Fields(text), " ")})
	}
	return reads, nil
}

// answerPrompt runs a program waiting at a prompt under a pseudo-terminal, and
// answers it instead of letting it hang.
func answerPrompt(st *stage, jobs *registry.Client, alice *owner.Agent) error {
	ctx := context.Background()
	prompt, term := process.PTY(`printf 'delete build cache? [y/N] '; read a; echo "you said: $a"`, process.Config{})
	prompt.Owner = alice
	ask, err := jobs.Start(ctx, prompt)
	if err != nil {
		return err
	}
	st.started("alice", ask, prompt.Label)
	var screen strings.Builder
	deadline := time.Now().Add(waitBudget)
	for !strings.Contains(screen.String(), "[y/N]") {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s showed no prompt within %s: %q", ask, waitBudget, screen.String())
		}
		snap, err := jobs.Wait(ctx, ask, tick, registry.AsAgent(alice))
		if err != nil {
			return err
		}
		if snap.Status != messages.JobStatus_JOB_STATUS_RUNNING {
			return fmt.Errorf("%s settled %s before it asked: %q", ask, snap.Status.Name(), screen.String())
		}
		text, _, err := jobs.Read(ctx, ask, registry.AsAgent(alice))
		if err != nil {
			return err
		}
		screen.WriteString(text)
	}
	st.emit(Event{Kind: KindJobOutput, Who: "alice", Job: ask, Status: "running", Text: strings.TrimSpace(screen.String())})
	if err := term.Send("y\n"); err != nil {
		return err
	}
	st.emit(Event{Kind: KindJobInput, Who: "alice", Job: ask, Text: "y"})
	snap, err := jobs.Wait(ctx, ask, waitBudget, registry.AsAgent(alice))
	if err != nil {
		return err
	}
	answer, _, err := jobs.Read(ctx, ask, registry.AsAgent(alice))
	if err != nil {
		return err
	}
	st.emit(Event{Kind: KindJobOutput, Who: "alice", Job: ask, Status: snap.Status.Name(), Text: strings.TrimSpace(answer)})
	return st.check("a PTY prompt is answered and the program goes on",
		snap.Status == messages.JobStatus_JOB_STATUS_COMPLETED && strings.Contains(answer, "you said: y"),
		"%s settled %s with %q", ask, snap.Status.Name(), answer)
}

// spawnAgent spawns and registers an agent incarnation and says so.
func spawnAgent(st *stage, sys *troupe.System, session string, surface owner.Surface) (*owner.Agent, error) {
	a, err := sys.NewAgent(nil, session, owner.Options{Surface: surface})
	if err != nil {
		return nil, err
	}
	if err := sys.Jobs().RegisterAgent(context.Background(), a); err != nil {
		return nil, err
	}
	st.emit(Event{Kind: KindAgent, Who: session, Status: "spawned"})
	return a, nil
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
