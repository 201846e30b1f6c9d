package activation

import (
	"github.com/troupe-rt/troupe/session"
)

// Residency is an Activation's derived state (SPEC §6.1, §1.3 rule 41).
type Residency string

const (
	Running Residency = "running" // a turn runs, or a woken queue waits to run
	Waiting Residency = "waiting" // quiescent, but children it owns are resident or its queue is parked
	Settled Residency = "settled" // quiescent with no owned children: it is disposed
)

// Core is the pure state machine of one Activation (SPEC §1.3 rule 36): the queue of
// accepted messages in mailbox order, the one running turn, the interrupt's parking,
// the children it owns, and its disposal. It has no goroutines and no I/O; the
// actor feeds it events and carries out the Effects it returns.
//
// The queue runs while it is awake: a waking send (a followup, a steered notice)
// wakes it, and it sleeps again once it is empty. A quiet message (an injected
// notice) joins the queue without waking it, so it runs with the next turn or is
// discarded when the Activation settles. An interrupt parks the queue: nothing
// starts until the next waking send, and then the parked messages run first.
type Core struct {
	queue   []session.InboxMessage // accepted, not started, in acceptance order
	running *session.InboxMessage  // the turn in flight
	owned   map[string]bool        // resident children this activation started (nil: none yet)
	awake   bool                   // a waking send arrived since the queue last emptied
	parked  bool                   // an interrupt parked the queue until the next waking send
	closing bool                   // disposal has begun: admission is closed
	done    bool                   // Finish has been returned
	held    bool                   // a crashed incarnation's turn has not returned yet
}

// NewCore returns an idle core.
func NewCore() *Core { return &Core{} }

// owning returns an idle core that owns c's children: a restarted Activation's
// (activationActor.reincarnate), whose restore queues its messages again but
// whose children are still its own.
func (c *Core) owning() Core { return Core{owned: c.owned} }

// Effect is what the shell must do after an event. Several fields may be set.
type Effect struct {
	StartTurn  *session.InboxMessage  // run this message's turn now
	CancelTurn bool                   // cancel the running turn
	Settle     bool                   // quiescent with nothing owned: propose disposal
	Finish     bool                   // disposal can complete: end the epoch (once)
	Discarded  []session.InboxMessage // queued messages a disposal dropped
}

// Admit queues an accepted message. A waking one unparks and wakes the queue.
// A closing core admits nothing (the shell refuses before accepting).
func (c *Core) Admit(m session.InboxMessage, wake bool) Effect {
	if c.closing {
		return Effect{}
	}
	c.queue = append(c.queue, m)
	if wake {
		c.parked, c.awake = false, true
	}
	return c.next()
}

// Restore queues messages accepted before a restart or a crash; they run in order
// (woken if any of them was a waking message).
func (c *Core) Restore(ms []session.InboxMessage, owned []string) Effect {
	for _, id := range owned {
		c.Own(id)
	}
	for _, m := range ms {
		c.queue = append(c.queue, m)
		if !m.Quiet {
			c.awake = true
		}
	}
	return c.next()
}

// TurnEnded records the end of the running turn and starts the next one.
func (c *Core) TurnEnded() Effect {
	c.running = nil
	return c.next()
}

// Interrupt cancels the running turn and parks the queue: nothing new starts until
// a waking send. Queued messages stay, in order. A closing core ignores it.
func (c *Core) Interrupt() Effect {
	if c.closing {
		return Effect{}
	}
	c.parked, c.awake = true, false
	return Effect{CancelTurn: c.running != nil}
}

// Own records a child this activation started, before the child's first message
// can be accepted; Release drops it once the child has been disposed.
func (c *Core) Own(child string) {
	if c.owned == nil {
		c.owned = map[string]bool{}
	}
	c.owned[child] = true
}

func (c *Core) Release(child string) Effect {
	delete(c.owned, child)
	return c.next()
}

// Owned returns the resident children (unordered).
func (c *Core) Owned() []string {
	out := make([]string, 0, len(c.owned))
	for id := range c.owned {
		out = append(out, id)
	}
	return out
}

// Close begins disposal: admission closes, queued messages are discarded and the
// running turn is cancelled. Finish follows once no turn runs and no owned child is
// left (children are released first: child-first disposal). Idempotent.
func (c *Core) Close() Effect { return c.close(false) }

// Suspend is Close for a shutdown of the whole manager: the queued messages are not
// discarded — they stay in the inbox journal and run first when the child resumes
// (SPEC §1.3 rule 35: no accepted message is lost).
func (c *Core) Suspend() Effect { return c.close(true) }

func (c *Core) close(keep bool) Effect {
	if c.closing {
		return Effect{}
	}
	c.closing = true
	eff := Effect{CancelTurn: c.running != nil}
	if !keep {
		eff.Discarded = c.queue
	}
	c.queue, c.awake, c.parked = nil, false, false
	eff.Finish = c.finishable()
	return eff
}

// Closing reports whether disposal has begun.
func (c *Core) Closing() bool { return c.closing }

// Residency derives the state: running, waiting or settled.
func (c *Core) Residency() Residency {
	switch {
	case c.running != nil || c.held || (c.awake && !c.parked && len(c.queue) > 0):
		return Running
	case len(c.owned) > 0 || (c.parked && len(c.queue) > 0):
		return Waiting
	}
	return Settled
}

// Hold keeps turns from starting until Unhold: after a restart, until the crashed
// incarnation's cancelled turn has returned, so two turns of a session never overlap.
// Messages are still accepted and queued meanwhile.
func (c *Core) Hold() { c.held = true }

// Unhold lets turns start again.
func (c *Core) Unhold() Effect {
	c.held = false
	return c.next()
}

// Running returns the message whose turn is in flight, or nil.
func (c *Core) Running() *session.InboxMessage { return c.running }

// Queued returns the messages waiting to run, in order.
func (c *Core) Queued() []session.InboxMessage { return c.queue }

// Parked reports whether an interrupt parked the queue.
func (c *Core) Parked() bool { return c.parked }

func (c *Core) finishable() bool {
	if c.closing && !c.done && c.running == nil && len(c.owned) == 0 {
		c.done = true
		return true
	}
	return false
}

func (c *Core) next() Effect {
	if c.closing {
		return Effect{Finish: c.finishable()}
	}
	if c.held {
		return Effect{}
	}
	if c.running == nil && !c.parked && c.awake && len(c.queue) > 0 {
		// The running message is the queue's head, in place: the queue moves past
		// it and never writes that slot again (appends go past its end), so no copy
		// of the message is made per turn.
		run, rest := &c.queue[0], c.queue[1:]
		if pm, prest, ok := plantedTake(c.queue); ok {
			picked := pm // a copy, made only when planted
			run, rest = &picked, prest
		}
		c.queue = rest
		c.running = run
		return Effect{StartTurn: run}
	}
	if c.running == nil && len(c.queue) == 0 {
		c.awake = false
	}
	return Effect{Settle: c.Residency() == Settled}
}
