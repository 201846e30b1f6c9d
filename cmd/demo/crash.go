package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
)

// crashHow is how the crash is injected, as the timeline says it.
const crashHow = "injected: the demo's session.Store wrapper panics in Accept, inside the Activation's Receive"

// scenarioCrash: a continuable child's Activation crashes mid-turn and its
// supervisor restarts it from the sessions file. The turn in flight is recorded
// aborted (not re-run), the message whose handling crashed is answered
// ACTIVATION_FAILED (not accepted: the lead sends it again), the messages queued
// behind the turn are kept and run after the restart, and the restart takes a new
// epoch, fencing the crashed incarnation.
func scenarioCrash(st *stage) error {
	loop := newLoop(st, "lead", "subagent-settled")
	thinking := make(chan string, 4)
	s, err := openSubagents(st, loop, thinking)
	if err != nil {
		return err
	}
	defer s.close()
	ctx := context.Background()

	const first = "investigate the outage"
	child, _, err := s.mgr.Start(ctx, s.lead, "spawn", "incident analyst", "analyst", subagent.Request{Prompt: first})
	if err != nil {
		return err
	}
	st.say("lead", "started continuable child %s", child)
	if err := await(thinking, "the child's first turn to start"); err != nil {
		return err
	}
	queued := []string{"check the disk", "check the network"}
	for _, m := range queued {
		if text, isErr := s.send(child, m); isErr {
			return fmt.Errorf("send_message %q: %s", m, text)
		}
	}
	before, err := s.store.Load(ctx, child)
	if err != nil {
		return err
	}

	const inHand = "draft the postmortem"
	s.store.armCrash(child, crashHow)
	_, err = s.mgr.Followup(ctx, s.lead, child, inHand, session.Source{Kind: "coordinator"})
	st.emit(Event{Kind: KindRefused, Who: "lead", Child: child, Code: string(messages.CodeOf(err)), Text: fmt.Sprint(err)})
	if err := st.check("the message whose handling crashed is answered ACTIVATION_FAILED (not accepted)",
		messages.CodeOf(err) == activation.CodeActivationFailed, "the followup answered %v", err); err != nil {
		return err
	}
	if _, err := loop.expect("after the restart the queued messages run and the child settles (steer)", "steer"); err != nil {
		return err
	}
	// Not accepted means not journaled: the lead sends it again, and the child
	// resumes from the file for it.
	if text, isErr := s.send(child, inHand); isErr {
		return fmt.Errorf("send_message %q after the restart: %s", inHand, text)
	}
	if _, err := loop.expect("the resent message runs (steer)", "steer"); err != nil {
		return err
	}
	return checkCrash(st, s.store, child, before.Header.Epoch, queued, append(append([]string{first}, queued...), inHand))
}

// checkCrash checks the child's session as stored, and the order of the events.
// want is every message the child accepted, in order; queued, those that waited
// behind the crashed turn.
func checkCrash(st *stage, store session.Store, child string, epochAtCrash uint64, queued, want []string) error {
	snap, err := store.Load(context.Background(), child)
	if err != nil {
		return err
	}
	var users, ends []string
	for _, e := range snap.Log {
		switch {
		case e.Kind == session.EntryMessage && e.Role == "user" && len(e.Content) > 0:
			users = append(users, e.Content[0].Text)
		case e.Kind == session.EntryTurnEnd || e.Kind == session.EntryTurnAborted:
			ends = append(ends, e.Kind+":"+e.StopReason)
		}
	}
	if err := st.check("the turn cut off by the crash is recorded aborted; the others completed",
		len(ends) == len(want) && ends[0] == session.EntryTurnAborted+":aborted" && allCompleted(ends[1:]),
		"turn ends %q", ends); err != nil {
		return err
	}
	if err := st.check("every accepted message ran once, in order; the cut-off turn was not re-run",
		strings.Join(users, "|") == strings.Join(want, "|"), "turns %q, want %q", users, want); err != nil {
		return err
	}
	restartSeq, restartEpoch := 0, uint64(0)
	queuedAfter := true
	for _, ev := range st.out.events(st.scenario) {
		switch {
		case ev.Kind == KindRestart && ev.Child == child:
			restartSeq, restartEpoch = ev.Seq, ev.Epoch
		case ev.Kind == KindTurn && ev.Who == child && ev.Status == "started" && slices.Contains(queued, ev.Text):
			queuedAfter = queuedAfter && restartSeq > 0 && ev.Seq > restartSeq
		}
	}
	if err := st.check("the Activation restarted from the store at a newer epoch", restartSeq > 0 && restartEpoch > epochAtCrash,
		"restart seen %v, at epoch %d (crashed at %d)", restartSeq > 0, restartEpoch, epochAtCrash); err != nil {
		return err
	}
	return st.check("the messages queued behind the crashed turn ran after the restart", queuedAfter,
		"a queued message started before the restart")
}

func allCompleted(ends []string) bool {
	for _, e := range ends {
		if e != session.EntryTurnEnd+":completed" {
			return false
		}
	}
	return true
}
