package mailbox

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
)

// now is a BySender message its sender runs at once; later is one whose run is
// left in h for the sender to take.
type now string

func (now) BySender() (bool, *Handoff) { return true, nil }

type later struct {
	name string
	h    *Handoff
}

func (l *later) BySender() (bool, *Handoff) { return false, l.h }

// hookInvoker records the messages it handles and calls onUser for each user one.
type hookInvoker struct {
	recordingInvoker
	onUser func(any)
}

func (v *hookInvoker) InvokeUserMessage(m any) {
	v.recordingInvoker.InvokeUserMessage(m)
	if v.onUser != nil {
		v.onUser(m)
	}
}

func newLinked() (*Linked, *hookInvoker, *heldDispatcher) {
	inv, d := &hookInvoker{}, &heldDispatcher{}
	m := NewLinked().(*Linked)
	m.RegisterHandlers(inv, d)
	return m, inv, d
}

// TestBySenderNowRunsOnTheSenderBoundedToItsMessage: a BySender message (now)
// posted to an idle Linked mailbox is handled before PostUserMessage returns, with
// no run for the dispatcher; what others post while it is handled — a user
// message, another BySender one — is not handled on the sender but handed to the
// dispatcher as the rest of the run, in order, while a system message and a
// PoisonPill at the head (the actor's own stop) are. Fails with the bounded run
// draining the mailbox, and with BySender ignored (the message handled by the
// dispatcher's run).
func TestBySenderNowRunsOnTheSenderBoundedToItsMessage(t *testing.T) {
	m, inv, d := newLinked()
	m.PostUserMessage(now("a"))
	require.Equal(t, []any{now("a")}, inv.got, "handled on the sender")
	require.Empty(t, d.runs, "no run for the dispatcher")

	inv.got = nil
	poison := &actor.PoisonPill{}
	inv.onUser = func(msg any) {
		switch msg {
		case now("b"):
			m.PostUserMessage(poison)
			m.PostSystemMessage(&actor.Stop{})
		case poison:
			m.PostUserMessage("other")  // another sender's, while the sender runs
			m.PostUserMessage(now("c")) // not idle: queued
		}
	}
	m.PostUserMessage(now("b"))
	require.Equal(t, []any{now("b"), &actor.Stop{}, poison}, inv.got, "its message, the system message and the PoisonPill at the head")
	require.Len(t, d.runs, 1, "the rest is the dispatcher's")
	d.runAll()
	require.Equal(t, []any{now("b"), &actor.Stop{}, poison, "other", now("c")}, inv.got)
	require.Zero(t, m.UserMessageCount())
}

// TestBySenderNeverRunsAnotherSendersMessage: a sender whose message is not the
// first waiting (another's push took effect first), or finds a system message
// waiting, handles nothing: the run is the dispatcher's, and takes everything in
// order. Fails with the bounded run handling the head whatever it is.
func TestBySenderNeverRunsAnotherSendersMessage(t *testing.T) {
	m, inv, d := newLinked()
	m.user.push(&qnode{val: "first"}) // pushed, its poster not yet at its schedule
	m.userN.Add(1)
	m.PostUserMessage(now("mine"))
	require.Empty(t, inv.got, "the head was another's: nothing on the sender")
	require.Len(t, d.runs, 1)
	d.runAll()
	require.Equal(t, []any{"first", now("mine")}, inv.got)

	inv.got = nil
	h := &Handoff{}
	m.PostUserMessage(&later{"k", h})
	m.PostSystemMessage(&actor.Stop{}) // lands before the sender takes its run
	run := h.Take()
	require.NotNil(t, run)
	run()
	require.Empty(t, inv.got, "a system message waits: nothing on the sender")
	require.Len(t, d.runs, 1)
	d.runAll()
	require.Equal(t, []any{&actor.Stop{}, &later{"k", h}}, inv.got)

	inv.got = nil
	m.PostSystemMessage(&actor.Started{})
	require.Len(t, d.runs, 1)
	m.PostUserMessage(now("x")) // a run is scheduled: queued behind, not on the sender
	require.Empty(t, inv.got)
	d.runAll()
	require.Equal(t, []any{&actor.Started{}, now("x")}, inv.got)
}

// TestHandoffLeavesTheRunForItsSender: a message whose run is left in a Handoff is
// not handled when posted, nor by the dispatcher, but when its sender runs what
// Take returns; messages posted before that wait for it (the mailbox is claimed),
// and are the dispatcher's after it. A Handoff taken before the offer refuses it:
// the run is the dispatcher's. Fails with the offer ignored (a dispatcher run), or
// a taken Handoff still accepting it (a run nobody makes: the message never runs).
func TestHandoffLeavesTheRunForItsSender(t *testing.T) {
	m, inv, d := newLinked()
	h := &Handoff{}
	k := &later{"k", h}
	m.PostUserMessage(k)
	m.PostUserMessage("behind")
	require.Empty(t, inv.got)
	require.Empty(t, d.runs, "the run is the sender's")
	run := h.Take()
	require.NotNil(t, run)
	require.Nil(t, h.Take(), "taken once")
	run()
	require.Equal(t, []any{k}, inv.got)
	require.Len(t, d.runs, 1, "what was posted behind it is the dispatcher's")
	d.runAll()
	require.Equal(t, []any{k, "behind"}, inv.got)

	inv.got = nil
	h2 := &Handoff{}
	require.Nil(t, h2.Take(), "nothing offered")
	m.PostUserMessage(&later{"late", h2})
	require.Len(t, d.runs, 1, "a taken Handoff refuses the run")
	d.runAll()
	require.Equal(t, []any{&later{"late", h2}}, inv.got)

	h2.Reset()
	inv.got = nil
	m.PostUserMessage(&later{"again", h2})
	require.Empty(t, d.runs, "a reset Handoff takes the run again")
	h2.Take()()
	require.Equal(t, []any{&later{"again", h2}}, inv.got)
}

// TestAHeldLinkedLeavesItsFirstRunForItsHolder: a held mailbox (NewLinkedHeld)
// takes messages but schedules nothing — a BySender message posted to it is not
// run on its sender — until Release: released into an open Handoff, its first run
// is the taker's, bounded to the system messages (the actor's Started) and a
// PoisonPill at the head, and the user messages posted meanwhile are the
// dispatcher's, in order; released into a taken Handoff, or none, the run is the
// dispatcher's. Fails with a held mailbox that schedules (a dispatcher run at the
// first post), and with Release's run handling user messages (another poster's
// message on the holder).
func TestAHeldLinkedLeavesItsFirstRunForItsHolder(t *testing.T) {
	held := func() (*Linked, *hookInvoker, *heldDispatcher) {
		inv, d := &hookInvoker{}, &heldDispatcher{}
		m := NewLinkedHeld()
		m.RegisterHandlers(inv, d)
		return m, inv, d
	}
	m, inv, d := held()
	m.PostSystemMessage(&actor.Started{})
	poison := &actor.PoisonPill{}
	inv.onUser = func(msg any) {
		if msg == poison {
			m.PostSystemMessage(&actor.Stop{}) // the stop the poison asks for
		}
	}
	m.PostUserMessage(poison)
	require.Empty(t, d.runs, "held: no run for the dispatcher")
	require.Empty(t, inv.got)
	h := &Handoff{}
	m.Release(h)
	require.Empty(t, d.runs, "the first run is the holder's")
	run := h.Take()
	require.NotNil(t, run)
	run()
	require.Equal(t, []any{&actor.Started{}, poison, &actor.Stop{}}, inv.got, "the system messages and the head PoisonPill")
	require.Empty(t, d.runs)

	m, inv, d = held()
	m.PostSystemMessage(&actor.Started{})
	m.PostUserMessage(now("settle")) // a producer's settle while held: queued
	require.Empty(t, inv.got, "a held mailbox is not idle: nothing on the sender")
	h = &Handoff{}
	m.Release(h)
	inv.onUser = func(any) { t.Fatal("a user message ran on the holder") }
	h.Take()()
	require.Equal(t, []any{&actor.Started{}}, inv.got)
	require.Len(t, d.runs, 1, "what was posted meanwhile is the dispatcher's")
	inv.onUser = nil
	d.runAll()
	require.Equal(t, []any{&actor.Started{}, now("settle")}, inv.got)

	for _, h := range []*Handoff{nil, {}} {
		m, inv, d = held()
		m.PostSystemMessage(&actor.Started{})
		if h != nil {
			require.Nil(t, h.Take(), "nothing offered yet")
		}
		m.Release(h)
		require.Len(t, d.runs, 1, "no taker: the run is the dispatcher's")
		d.runAll()
		require.Equal(t, []any{&actor.Started{}}, inv.got)
		m.PostUserMessage(now("idle"))
		require.Equal(t, []any{&actor.Started{}, now("idle")}, inv.got, "released: idle, a BySender message runs on its sender")
	}
}
