package workflow

import "slices"

// runCore is the run actor's decisions (WORKFLOW.md 3.7–3.9) as a pure state
// machine: no goroutines, no clock, no actor. The shell feeds it what arrived and
// carries out what it returns. Its invariants:
//   - the run is claimed at most once, and the first claim's result is final;
//   - after the claim, no agent-start/agent-end/phase/log is admitted, and every
//     child-start is refused;
//   - every admitted agent-start is closed exactly once: by its agent-end, or by
//     closeOpen at the claim;
//   - accepted counts every child-start it admitted (the host's AgentsStarted).
type runCore struct {
	claimed bool
	result  Result

	cancelled  bool
	reason     string
	scriptGone bool // a script failure, or the script actor stopped

	accepted int // child-start messages admitted
	pending  int // starts whose provider call has not returned
	children map[int]*childState
	open     []AgentInfo // admitted agent-starts without an agent-end, in admission order
}

// childState is one published child's disposal.
type childState struct {
	disposing bool // its dispose has begun
	disposed  bool // its dispose has returned
	waiter    bool // the script waits for the acknowledgement
}

func newRunCore() *runCore { return &runCore{children: map[int]*childState{}} }

// cancel records the first reason ("" means "workflow cancelled"). It reports
// false — nothing to do — once cancelled or claimed.
func (c *runCore) cancel(reason string) bool {
	if c.claimed || c.cancelled {
		return false
	}
	if reason == "" {
		reason = "workflow cancelled"
	}
	c.cancelled, c.reason = true, reason
	return true
}

func (c *runCore) cancelledResult(count int) Result {
	return Result{Value: nullValue, StopReason: StopCancelled, Error: cancelText(c.reason), AgentsStarted: count}
}

// claimScript is the script's own result. If a cancel was processed before it and
// the result is not cancelled, the run settles cancelled with the script's count.
func (c *runCore) claimScript(res Result) (Result, bool) {
	if c.claimed {
		return Result{}, false
	}
	if c.cancelled && res.StopReason != StopCancelled {
		res = c.cancelledResult(res.AgentsStarted)
	}
	return c.claim(res), true
}

// claimFailure is a script failure: error with text, or cancelled if a cancel was
// processed first; both with the host's count.
func (c *runCore) claimFailure(text string) (Result, bool) {
	c.scriptGone = true
	if c.claimed {
		return Result{}, false
	}
	if c.cancelled {
		return c.claim(c.cancelledResult(c.accepted)), true
	}
	return c.claim(Result{Value: nullValue, StopReason: StopError, Error: text, AgentsStarted: c.accepted}), true
}

// claimGrace is the grace timer's expiry: cancelled with the host's count. It
// claims only a cancelled, unclaimed run.
func (c *runCore) claimGrace() (Result, bool) {
	if c.claimed || !c.cancelled {
		return Result{}, false
	}
	return c.claim(c.cancelledResult(c.accepted)), true
}

// claimActorFailure is a panic of the run actor itself.
func (c *runCore) claimActorFailure(text string) (Result, bool) {
	if c.claimed {
		return Result{}, false
	}
	return c.claim(Result{Value: nullValue, StopReason: StopError, Error: text, AgentsStarted: c.accepted}), true
}

func (c *runCore) claim(res Result) Result {
	if len(res.Value) == 0 {
		res.Value = nullValue
	}
	c.claimed, c.result = true, res
	return res
}

// reapReason is the cause a reap gives the run context: the cancel reason if any.
func (c *runCore) reapReason(own string) string {
	if c.cancelled {
		return c.reason
	}
	return own
}

// refusal is why a child-start is refused now, if it is.
func (c *runCore) refusal() (string, bool) {
	switch {
	case c.cancelled:
		return cancelText(c.reason), true
	case c.scriptGone:
		return "workflow script is no longer available", true
	case c.claimed:
		return "workflow run already settled", true
	}
	return "", false
}

// childStart admits a child-start (a pending start), or returns its refusal.
func (c *runCore) childStart() (refusal string, ok bool) {
	if r, refused := c.refusal(); refused {
		return r, false
	}
	c.accepted++
	c.pending++
	return "", true
}

// startReturned is a pending start's provider call returning. With started, the
// child is published unless the run closed meanwhile (then it is refused and the
// shell disposes it). refusal is the text to send instead of the start's own error
// or of child-started, when closed.
func (c *runCore) startReturned(seq int, started bool) (refusal string, closed, publish bool) {
	c.pending--
	refusal, closed = c.refusal()
	if started && !closed {
		c.children[seq] = &childState{}
		return "", false, true
	}
	return refusal, closed, false
}

// agentStart admits a forwarded agent-start.
func (c *runCore) agentStart(a AgentInfo) bool {
	if c.claimed {
		return false
	}
	c.open = append(c.open, a)
	return true
}

// agentEnd admits the agent-end of an open agent-start and returns its identity.
func (c *runCore) agentEnd(seq int) (AgentInfo, bool) {
	if c.claimed {
		return AgentInfo{}, false
	}
	i := slices.IndexFunc(c.open, func(a AgentInfo) bool { return a.Seq == seq })
	if i < 0 {
		return AgentInfo{}, false
	}
	a := c.open[i]
	c.open = slices.Delete(c.open, i, i+1)
	return a, true
}

// narration reports whether a phase/log message is dispatched.
func (c *runCore) narration() bool { return !c.claimed && !c.cancelled }

// closeOpen returns every open agent-start, to be closed as cancelled at the claim.
func (c *runCore) closeOpen() []AgentInfo {
	o := c.open
	c.open = nil
	return o
}

// disposeChild is the script's child-dispose: start disposing (memoized), and
// whether to acknowledge at once (an unknown or already disposed child).
func (c *runCore) disposeChild(seq int) (start, ackNow bool) {
	ch := c.children[seq]
	switch {
	case ch == nil || ch.disposed:
		return false, true
	case ch.disposing:
		ch.waiter = true
		return false, false
	}
	ch.disposing, ch.waiter = true, true
	return true, false
}

// childDisposed records a finished dispose; ack says the script waits for it.
func (c *runCore) childDisposed(seq int) (ack bool) {
	ch := c.children[seq]
	if ch == nil {
		return false
	}
	ch.disposed = true
	ack, ch.waiter = ch.waiter, false
	return ack
}

// reap returns the published children whose dispose has not begun, in seq order,
// marking them disposing.
func (c *runCore) reap() []int {
	var out []int
	for seq, ch := range c.children {
		if !ch.disposing {
			ch.disposing = true
			out = append(out, seq)
		}
	}
	slices.Sort(out)
	return out
}

// quiescent: no pending start, every published child disposed.
func (c *runCore) quiescent() bool {
	if c.pending > 0 {
		return false
	}
	for _, ch := range c.children {
		if !ch.disposed {
			return false
		}
	}
	return true
}
