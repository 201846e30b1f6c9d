package job

import (
	"fmt"
	"slices"
)

// Core is the pure state machine of one live job: first-wins settlement, kill
// claims and reasons, teardown, and the pending waiters. It has no goroutines, no
// clock and no actor import; the shell (actor.go) feeds it events in mailbox order
// and carries out its decisions.
//
// It is 16 bytes while the job is idle: what only a kill reason or a wait needs is
// allocated with the first of them (coreMore).
type Core struct {
	status   Status
	claimed  bool // a claiming kill has returned requested
	teardown bool // a teardown cancel has begun
	more     *coreMore
}

// coreMore is the part of a Core that only a kill with a reason or a wait needs.
type coreMore struct {
	killReason string
	waiters    []uint64 // pending wait tokens, in registration order
}

func (c *Core) extra() *coreMore {
	if c.more == nil {
		c.more = &coreMore{}
	}
	return c.more
}

// Clone returns a copy of c that shares nothing with it.
func (c *Core) Clone() Core {
	d := *c
	if c.more != nil {
		m := *c.more
		m.waiters = slices.Clone(m.waiters)
		d.more = &m
	}
	return d
}

func (c *Core) killReason() string {
	if c.more == nil {
		return ""
	}
	return c.more.killReason
}

// NewCore returns the core of a job that has just started running.
func NewCore() Core { return Core{status: Running} }

// Status returns the current status.
func (c *Core) Status() Status { return c.status }

// Live reports whether the job has not settled.
func (c *Core) Live() bool { return !c.status.Terminal() }

// Reported is the delivery claim while live (SPEC §1.3 rule 4): true iff a claiming
// kill returned requested or a teardown cancel has begun.
func (c *Core) Reported() bool { return c.claimed || c.teardown }

// KillLanded records a kill whose Cancel succeeded: the job is stopping, a
// non-empty reason replaces any earlier one, and a claiming kill claims.
// A kill whose Cancel failed must not call this: it changes nothing.
func (c *Core) KillLanded(claim bool, reason string) {
	if !c.Live() {
		return
	}
	c.status = Stopping
	if reason != "" {
		c.extra().killReason = CleanReason(reason) // the registry cleaned it already; the core holds the bound itself
	}
	if claim {
		c.claimed = true
	}
}

// TeardownBegin records a teardown's claim (SPEC §2.11 step 1). The shell records it
// in the teardown's step, after Cancel returned (nothing can observe the job in
// between) and, when Cancel failed, after ending the waits already over.
func (c *Core) TeardownBegin() {
	if c.Live() {
		c.teardown = true
	}
}

// TeardownCancelled records a teardown cancel that returned normally.
func (c *Core) TeardownCancelled() {
	if c.Live() {
		c.status = Stopping
	}
}

// AddWaiter counts a pending wait.
func (c *Core) AddWaiter(token uint64) { m := c.extra(); m.waiters = append(m.waiters, token) }

// RemoveWaiter un-counts a wait that ended by timeout or abort; false if it was not pending.
func (c *Core) RemoveWaiter(token uint64) bool {
	i := slices.Index(c.Waiters(), token)
	if i < 0 {
		return false
	}
	c.more.waiters = slices.Delete(c.more.waiters, i, i+1)
	return true
}

// Waiters returns the pending wait tokens in registration order.
func (c *Core) Waiters() []uint64 {
	if c.more == nil {
		return nil
	}
	return c.more.waiters
}

// Decision is a settlement: what to record and whom to release.
type Decision struct {
	Status    Status
	Detail    string
	HasDetail bool
	Output    string
	Reported  bool
	Waiters   []uint64 // released with the settled snapshot, in registration order
}

// Settle applies an outcome. Only the first outcome wins; later ones return false.
// The outcome must be valid (see CheckOutcome).
func (c *Core) Settle(o Outcome) (Decision, bool) {
	if !c.Live() {
		return Decision{}, false
	}
	// The producer's text enters here: valid UTF-8, and the detail bounded
	// (MaxDetailBytes; the kill reason was bounded when the kill arrived).
	o.Detail = CleanDetail(o.Detail)
	reason := c.killReason()
	d := Decision{Status: o.Status, Output: ValidText(o.Output), Waiters: c.Waiters()}
	switch {
	case o.Status == Killed && reason != "":
		d.HasDetail = true
		d.Detail = reason
		if o.Detail != "" {
			d.Detail = o.Detail + "; " + reason
		}
	case o.Detail != "":
		d.HasDetail, d.Detail = true, o.Detail
	}
	// Rule 4: a claiming kill the job outran (completed/failed) lapses.
	d.Reported = len(d.Waiters) > 0 || c.teardown || (c.claimed && o.Status == Killed)
	c.status = o.Status
	c.more = nil
	return d, true
}

// CheckOutcome applies the "done rejected" rule (SPEC §1.2, §1.3 rule 14): a channel
// closed without a value, or an unknown status, becomes a failed outcome. violation
// is the contract violation to log, "" when the outcome was valid.
func CheckOutcome(o Outcome, ok bool) (checked Outcome, violation string) {
	switch {
	case !ok:
		violation = "producer done channel closed without an outcome"
	case !o.Status.Terminal():
		violation = fmt.Sprintf("producer outcome has unknown status %q", o.Status.Name())
	default:
		return o, ""
	}
	return Outcome{Status: Failed, Detail: "Error: " + violation}, violation
}
