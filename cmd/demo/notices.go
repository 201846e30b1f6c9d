package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/troupe-rt/troupe/actors/registry"
	"strings"
	"time"

	"github.com/troupe-rt/troupe/actors/controller"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
)

// wakeBudget is the notices scenario's maxConsecutiveWakes (the default is 3): small,
// so the budget is spent and seen at work.
const wakeBudget = 2

// agentLoop is the demo's stand-in for an agent's loop: its delivery surface emits
// what reaches the model and through which lane. Its verbs run on the owner actor
// and only emit and enqueue.
type agentLoop struct {
	st   *stage
	name string
	got  chan delivered // the notices counted (buffered: never blocks)
	only string         // if set, only notices of this source kind are counted
}

// delivered is a notice as the agent's loop received it.
type delivered struct{ lane, text string }

func newLoop(st *stage, name, only string) *agentLoop {
	return &agentLoop{st: st, name: name, got: make(chan delivered, 16), only: only}
}

func (l *agentLoop) deliver(lane string, m owner.Message) error {
	text := m.Text
	if len(m.More) > 0 {
		text += " " + strings.Join(m.More, " ")
	}
	l.st.emit(Event{Kind: KindNotice, Who: l.name, Lane: lane, Job: noticeJob(m), Child: m.Source.SenderSessionID, Text: text})
	if l.only == "" || m.Source.Kind == l.only {
		l.got <- delivered{lane: lane, text: text}
	}
	return nil
}

func (l *agentLoop) Inject(m owner.Message) error   { return l.deliver("inject", m) }
func (l *agentLoop) Steer(m owner.Message) error    { return l.deliver("steer", m) }
func (l *agentLoop) Followup(m owner.Message) error { return l.deliver("followup", m) }

// expect waits for the next counted notice and checks its lane; it returns the text.
func (l *agentLoop) expect(promise, lane string) (string, error) {
	select {
	case d := <-l.got:
		return d.text, l.st.check(promise, d.lane == lane, "delivered by %s, want %s: %q", d.lane, lane, d.text)
	case <-time.After(waitBudget):
		return "", l.st.check(promise, false, "no notice reached %s within %s", l.name, waitBudget)
	}
}

// await takes the next value of ch, or fails after waitBudget.
func await[T any](ch <-chan T, what string) error {
	select {
	case <-ch:
		return nil
	case <-time.After(waitBudget):
		return fmt.Errorf("waited %s for %s", waitBudget, what)
	}
}

// noticeJob is the job a completion notice is about: SPEC §3.7's text starts with
// "background job <id>".
func noticeJob(m owner.Message) string {
	if m.Source.Plugin != jobtools.ControllerName {
		return ""
	}
	id, _, _ := strings.Cut(strings.TrimPrefix(m.Text, "background job "), " ")
	return id
}

// quick is a job that finishes when told to, or when killed.
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

// scenarioNotices: completion notices reach the exact agent incarnation, waking it
// within a wake budget; a human's kill is told to the model with its reason; the
// model's own kill is not.
func scenarioNotices(st *stage) error {
	sys, err := st.newSystem()
	if err != nil {
		return err
	}
	defer st.shutdown(sys)
	wakes := int64(wakeBudget)
	mount, err := jobtools.MountIn(context.Background(), sys.Jobs(), sys.Scope(), jobtools.Config{MaxConsecutiveWakes: &wakes})
	if err != nil {
		return err
	}
	st.emit(Event{Kind: KindMount, Text: "tool-jobs", Budget: wakeBudget,
		Detail: fmt.Sprintf("completionDelivery wakeup, maxConsecutiveWakes %d", wakeBudget)})
	if _, err := sys.Jobs().MountAgents(context.Background(), sys.Scope()); err != nil {
		return err
	}
	ctl, err := sys.StartController(controller.Config{})
	if err != nil {
		return err
	}
	loop := newLoop(st, "alice", "")
	alice, err := spawnAgent(st, sys, "alice", loop)
	if err != nil {
		return err
	}
	st.say("alice", "idles, waiting for work")

	// Three jobs finish while alice idles: two wake her, the third waits in her inbox.
	for i, want := range []string{"followup", "followup", "inject"} {
		spec, done := quick(fmt.Sprintf("step %d", i+1), alice)
		id, err := sys.Jobs().Start(context.Background(), spec)
		if err != nil {
			return err
		}
		st.started("alice", id, spec.Label)
		done <- job.Outcome{Status: job.Completed, Detail: "exit code: 0"}
		promise := fmt.Sprintf("wake %d of %d: an idle agent is woken by a notice", i+1, wakeBudget)
		if want == "inject" {
			promise = "the wake budget is spent: the notice waits in the inbox (inject)"
		}
		if _, err := loop.expect(promise, want); err != nil {
			return err
		}
	}
	alice.InboxClaimed("user")
	st.emit(Event{Kind: KindClaim, Who: "alice"})

	// A human kills alice's job from a UI: the model is told, reason included.
	spec, _ := quick("pnpm test", alice)
	id, err := sys.Jobs().Start(context.Background(), spec)
	if err != nil {
		return err
	}
	st.started("alice", id, spec.Label)
	st.cause(id, causeHumanKill)
	outcome, err := ctl.Kill(context.Background(), "alice", id)
	if err != nil {
		return err
	}
	st.emit(Event{Kind: KindJobKill, Who: "human", Job: id, Detail: "cancelled by the user", Status: outcome.Name()})
	text, err := loop.expect("a human's kill wakes the model again (the budget was reset)", "followup")
	if err != nil {
		return err
	}
	if err := st.check("the model is told a human killed its job, with the reason",
		strings.Contains(text, "[status: killed, signal: SIGTERM; cancelled by the user]"), "notice %q", text); err != nil {
		return err
	}

	// The model kills its own job with job_kill: it already knows, so no notice.
	spec, _ = quick("pnpm build", alice)
	id, err = sys.Jobs().Start(context.Background(), spec)
	if err != nil {
		return err
	}
	st.started("alice", id, spec.Label)
	st.cause(id, causeModelKill)
	args, _ := json.Marshal(map[string]string{"job_id": id, "reason": "superseded"})
	res := mount.Pipeline().Run(context.Background(), mount.Kill(), tools.Call{ID: "k1", Name: jobtools.NameKill, Args: args, Caller: tools.AsAgent(alice)})
	text, _ = res.SingleText()
	st.emit(Event{Kind: KindTool, Who: "alice", Status: jobtools.NameKill, Job: id, Detail: id, Text: text})
	snap, err := sys.Jobs().AwaitSettled(context.Background(), id, registry.AsAgent(alice))
	if err != nil {
		return err
	}
	// Reported: the registry counts the model as knowing, so no notice is sent (the
	// notices check after the shutdown counts the notices that did arrive).
	return st.check("the model's own job_kill settles as already known to it (no notice)", snap.Reported,
		"%s settled %s, reported false", id, snap.Status.Name())
}
