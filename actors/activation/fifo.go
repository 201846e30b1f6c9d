package activation

import "github.com/troupe-rt/troupe/session"

// Residency is an Activation's derived state (SPEC §6.1, §1.3 rule 41).
type Residency string

const (
	Running Residency = "running" // a turn runs or an accepted message waits to run
	Waiting Residency = "waiting" // quiescent, but children it started are still resident
	Settled Residency = "settled" // quiescent with no owned children: it is disposed
)

// Core is the pure state machine of one Activation: the FIFO of accepted turns in
// mailbox order, the one running turn, the interrupt's parking, and the children it
// owns. It has no goroutines and no I/O; the actor feeds it events and carries out
// the effects it returns.
type Core struct {
	queue   []session.InboxMessage // accepted, not started, in acceptance order
	running *session.InboxMessage  // the turn in flight
	parked  bool                   // an interrupt parked the queue until the next waking send
	owned   map[string]bool        // child ids this activation started and that are resident
	closing bool                   // disposal has begun: admission is closed
}

// NewCore returns an idle core.
func NewCore() *Core { return &Core{owned: map[string]bool{}} }

// Effect is what the shell must do after an event.
type Effect struct {
	StartTurn  *session.InboxMessage // run this message's turn now
	CancelTurn bool                  // cancel the running turn (interrupt)
	Settle     bool                  // the activation settled: dispose it
}

// Admit queues an accepted message. A waking send unparks the queue: parked
// messages run first, in order, then this one.
func (c *Core) Admit(m session.InboxMessage) Effect {
	c.queue = append(c.queue, m)
	c.parked = false
	return c.next()
}

// Restore queues messages accepted before a restart, without waking a parked queue.
func (c *Core) Restore(ms []session.InboxMessage) Effect {
	c.queue = append(c.queue, ms...)
	return c.next()
}

// TurnEnded records the end of the running turn and starts the next one.
func (c *Core) TurnEnded() Effect {
	c.running = nil
	return c.next()
}

// Interrupt stops the running turn and parks the queue: nothing new starts until a
// waking send. Messages already queued stay, in order.
func (c *Core) Interrupt() Effect {
	c.parked = true
	return Effect{CancelTurn: c.running != nil}
}

// Own records a child this activation started (before its first message can be
// accepted); Release drops it when the child has been disposed.
func (c *Core) Own(child string) { c.owned[child] = true }

func (c *Core) Release(child string) Effect {
	delete(c.owned, child)
	return c.next()
}

// Owned returns the resident children.
func (c *Core) Owned() []string {
	out := make([]string, 0, len(c.owned))
	for id := range c.owned {
		out = append(out, id)
	}
	return out
}

// Close marks disposal begun.
func (c *Core) Close() { c.closing = true }

// Closing reports whether disposal has begun.
func (c *Core) Closing() bool { return c.closing }

// Residency derives the state: running, waiting or settled.
func (c *Core) Residency() Residency {
	switch {
	case c.running != nil || (len(c.queue) > 0 && !c.parked):
		return Running
	case len(c.owned) > 0 || len(c.queue) > 0:
		// A parked queue keeps the activation resident, waiting for a waking send.
		return Waiting
	}
	return Settled
}

// Running returns the message whose turn is in flight, or nil.
func (c *Core) Running() *session.InboxMessage { return c.running }

// Queued returns the messages waiting to run, in order.
func (c *Core) Queued() []session.InboxMessage { return c.queue }

func (c *Core) next() Effect {
	if c.running == nil && !c.parked && len(c.queue) > 0 && !c.closing {
		m := c.queue[0]
		c.queue = c.queue[1:]
		c.running = &m
		return Effect{StartTurn: &m}
	}
	if !c.closing && c.Residency() == Settled {
		return Effect{Settle: true}
	}
	return Effect{}
}
