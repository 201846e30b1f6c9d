package main

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
)

// narratedStore is the bbolt store as the demo hands it to the continuation
// manager: every call goes to the file, and the facts a reader should see — a
// session created, an epoch taken, a cut-off turn recorded aborted — become events.
//
// It is also the demo's crash injector, through the one seam an embedder has: the
// session.Store it passes in. armCrash makes the next Accept for a child panic; the
// Activation calls Accept inside its Receive, so the panic crashes the Activation
// actor and its supervisor (the directory) restarts it from the store. This is
// how actors/activation's own tests crash an Activation.
type narratedStore struct {
	*session.Bolt
	st *stage

	mu struct {
		sync.Mutex
		armed   map[string]string // child → why its next Accept panics
		crashed map[string]bool   // children whose next Activate is a restart
	}
}

func openStore(st *stage, path string) (*narratedStore, error) {
	b, err := session.OpenBolt(path)
	if err != nil {
		return nil, err
	}
	s := &narratedStore{Bolt: b, st: st}
	s.mu.armed, s.mu.crashed = map[string]string{}, map[string]bool{}
	return s, nil
}

// armCrash makes the next Accept for child panic (once), saying how in the event.
func (s *narratedStore) armCrash(child, how string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.armed[child] = how
}

func (s *narratedStore) Create(ctx context.Context, h session.Header, entries []session.Entry) error {
	if err := s.Bolt.Create(ctx, h, entries); err != nil {
		return err
	}
	s.st.emit(Event{Kind: KindCreated, Who: h.ParentSession, Child: h.ID})
	return nil
}

func (s *narratedStore) Activate(ctx context.Context, id string) (session.Snapshot, error) {
	snap, err := s.Bolt.Activate(ctx, id)
	if err != nil {
		return snap, err
	}
	toRun, _ := snap.Pending()
	s.activated(id, snap.Header.Epoch, countMessages(snap), len(toRun))
	return snap, nil
}

// Resume is how an Activation takes its epoch (Activate is the same for any
// other caller): narrated alike.
func (s *narratedStore) Resume(ctx context.Context, id string) (session.Resumed, error) {
	r, err := s.Bolt.Resume(ctx, id)
	if err != nil {
		return r, err
	}
	s.activated(id, r.Header.Epoch, r.Messages, len(r.ToRun))
	return r, nil
}

// ResumeAccept is how a followup's cold restore takes the epoch and accepts the
// followup in one commit: narrated as Resume (the journaled messages to run first
// are those before the followup's). It runs on the directory, not inside an
// Activation, so an armed crash waits for the next Accept.
func (s *narratedStore) ResumeAccept(ctx context.Context, id string, m session.InboxMessage, start []session.Entry,
	check func(session.Head) error) (session.Resumed, session.InboxMessage, bool, error) {
	r, out, started, err := s.Bolt.ResumeAccept(ctx, id, m, start, check)
	if err != nil {
		return r, out, started, err
	}
	s.activated(id, r.Header.Epoch, r.Messages, len(r.ToRun)-1)
	return r, out, started, nil
}

func (s *narratedStore) activated(id string, epoch uint64, history, toRun int) {
	s.mu.Lock()
	restart := s.mu.crashed[id]
	delete(s.mu.crashed, id)
	s.mu.Unlock()
	switch {
	case restart:
		s.st.emit(Event{Kind: KindRestart, Who: id, Child: id, Epoch: epoch})
	case epoch == 1:
		s.st.emit(Event{Kind: KindActivated, Who: id, Child: id, Epoch: 1, Status: "new session"})
	default:
		s.st.emit(Event{Kind: KindActivated, Who: id, Child: id, Epoch: epoch,
			Status: "resumed from the file: " + plural(history, "message") + " of history, " +
				plural(toRun, "journaled message") + " to run first"})
	}
}

func (s *narratedStore) Accept(ctx context.Context, id string, epoch uint64, m session.InboxMessage) (session.InboxMessage, error) {
	s.crashIfArmed(id, epoch, m)
	return s.Bolt.Accept(ctx, id, epoch, m)
}

// crashIfArmed panics (once) if a crash is armed for child id, journaling m.
func (s *narratedStore) crashIfArmed(id string, epoch uint64, m session.InboxMessage) {
	s.mu.Lock()
	how, armed := s.mu.armed[id]
	if armed {
		delete(s.mu.armed, id)
		s.mu.crashed[id] = true
	}
	s.mu.Unlock()
	if armed {
		s.st.emit(Event{Kind: KindCrash, Who: id, Child: id, Epoch: epoch, Text: blocksText(m.Content), Detail: how})
		panic("demo: injected crash while journaling a message of " + id)
	}
}

func (s *narratedStore) Append(ctx context.Context, id string, epoch uint64, entries ...session.Entry) error {
	if err := s.Bolt.Append(ctx, id, epoch, entries...); err != nil {
		return err
	}
	for _, e := range entries {
		if e.Kind == session.EntryTurnAborted {
			s.st.emit(Event{Kind: KindTurn, Who: id, Child: id, Epoch: epoch, Status: "aborted-by-crash"})
		}
	}
	return nil
}

func countMessages(snap session.Snapshot) int {
	n := 0
	for _, e := range snap.Log {
		if e.Kind == session.EntryMessage {
			n++
		}
	}
	return n
}

func blocksText(bs []session.Block) string {
	var parts []string
	for _, b := range bs {
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, " ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// narratedRunner runs a child's turns through the scripted model and emits each
// turn's start (with the history it was given) and its end.
type narratedRunner struct {
	inner subagent.TurnRunner
	st    *stage
}

func (r narratedRunner) RunTurn(ctx context.Context, t subagent.Turn) (subagent.TurnResult, error) {
	r.st.emit(Event{Kind: KindTurn, Who: t.Session, Child: t.Session, Status: "started", Text: t.Input.Text(), History: ptr(t.History.Len())})
	res, err := r.inner.RunTurn(ctx, t)
	var reply string
	if out := subagent.LastAssistant(res.Messages); len(out) > 0 {
		reply = out[0].Text
	}
	r.st.emit(Event{Kind: KindTurn, Who: t.Session, Child: t.Session, Status: stopReason(ctx, res, err), Text: reply})
	return res, err
}

// stopReason is how subagent.RunOneTurn will classify this turn's end.
func stopReason(ctx context.Context, res subagent.TurnResult, err error) string {
	switch {
	case ctx.Err() != nil && (err != nil || res.StopReason == ""):
		return subagent.StopAborted
	case err != nil:
		return subagent.StopError
	case res.StopReason == "":
		return subagent.StopCompleted
	}
	return res.StopReason
}
