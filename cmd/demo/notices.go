package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/controller"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
)

// agentLoop is the demo's stand-in for an agent's loop: its delivery surface
// prints what reaches the model and through which lane.
type agentLoop struct {
	tl    *timeline
	name  string
	lanes chan string
	only  string // if set, only notices of this source kind are counted on lanes
}

func (l *agentLoop) got(lane string, m owner.Message) error {
	text := m.Text
	if len(m.More) > 0 {
		text += " " + strings.Join(m.More, " ")
	}
	l.tl.say(l.name, "%-8s %s", lane+":", text)
	if l.only == "" || m.Source.Kind == l.only {
		l.lanes <- lane
	}
	return nil
}
func (l *agentLoop) Inject(m owner.Message) error   { return l.got("inject", m) }
func (l *agentLoop) Steer(m owner.Message) error    { return l.got("steer", m) }
func (l *agentLoop) Followup(m owner.Message) error { return l.got("followup", m) }

// quick is a job that finishes when told to.
func quick(label string, a *owner.Agent) (job.Spec, chan job.Outcome) {
	done := make(chan job.Outcome, 1)
	return job.Spec{Kind: "bash", Label: label, Owner: a, Run: func() (job.Hooks, error) {
		return job.Hooks{
			Cancel: func(string) error {
				select {
				case done <- job.Outcome{Status: job.Killed, Detail: "signal: SIGTERM"}:
				default:
				}
				return nil
			},
			Done: done,
		}, nil
	}}, done
}

func scenarioNotices(tl *timeline) error {
	sys, err := troupe.New(troupe.Config{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		_ = sys.Shutdown(ctx)
		tl.say("system", "shut down")
	}()
	wakes := int64(2)
	mount, err := jobtools.MountIn(sys, sys.Scope(), jobtools.Config{MaxConsecutiveWakes: &wakes})
	if err != nil {
		return err
	}
	if _, err := sys.Jobs().MountAgents(sys.Scope()); err != nil {
		return err
	}
	ctl, err := controller.Spawn(sys, controller.Config{})
	if err != nil {
		return err
	}
	loop := &agentLoop{tl: tl, name: "alice", lanes: make(chan string, 16)}
	alice, err := sys.NewAgent(nil, "alice", owner.Options{Surface: loop})
	if err != nil {
		return err
	}
	if err := sys.Jobs().RegisterAgent(alice); err != nil {
		return err
	}
	tl.say("system", "tool-jobs mounted (completionDelivery wakeup, maxConsecutiveWakes 2); alice is idle")

	expect := func(want string) error {
		if got := <-loop.lanes; got != want {
			return fmt.Errorf("broken promise: notice delivered by %s, want %s", got, want)
		}
		return nil
	}
	// Three jobs finish while alice idles: two wake her, the third waits in her inbox.
	for i, want := range []string{"followup", "followup", "inject"} {
		spec, done := quick(fmt.Sprintf("step %d", i+1), alice)
		id, err := sys.Jobs().Start(spec)
		if err != nil {
			return err
		}
		done <- job.Outcome{Status: job.Completed, Detail: "exit code: 0"}
		tl.say("system", "%s finished while alice is idle", id)
		if err := expect(want); err != nil {
			return err
		}
	}
	alice.InboxClaimed("user")
	tl.say("alice", "claims a user message: the wake budget resets")

	// A human kills alice's job from a UI: the model is told, reason included.
	spec, _ := quick("pnpm test", alice)
	id, err := sys.Jobs().Start(spec)
	if err != nil {
		return err
	}
	outcome, err := ctl.Kill(context.Background(), "alice", id)
	if err != nil {
		return err
	}
	tl.say("human", "job.kill %s → %s", id, outcome.Name())
	if err := expect("followup"); err != nil {
		return err
	}

	// The model kills its own job with job_kill: it already knows, so no notice.
	spec, _ = quick("pnpm build", alice)
	id, err = sys.Jobs().Start(spec)
	if err != nil {
		return err
	}
	args, _ := json.Marshal(map[string]string{"job_id": id, "reason": "superseded"})
	res := mount.Pipeline().Run(context.Background(), mount.Kill(), tools.Call{ID: "k1", Name: jobtools.NameKill, Args: args, Session: "alice"})
	text, _ := res.SingleText()
	tl.say("alice", "job_kill %s → %q", id, text)
	snap, err := sys.Jobs().AwaitSettled(context.Background(), id, "alice")
	if err != nil {
		return err
	}
	stats, err := alice.Stats(context.Background())
	if err != nil {
		return err
	}
	if !snap.Reported || stats.Delivered != 4 {
		return fmt.Errorf("broken promise: the model's own kill produced a notice (delivered %d)", stats.Delivered)
	}
	tl.say("alice", "%s settled %s, no notice: the model killed it itself (%d notices in all)", id, snap.Status.Name(), stats.Delivered)
	return nil
}
