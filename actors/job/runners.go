package job

import (
	"sync"
	"sync/atomic"
)

// Runners runs the producer calls a job actor makes off its own goroutine — Cancel,
// which may block — on goroutines that outlive one call. A fresh goroutine per
// Cancel grew its stack on nearly every kill: the Cancel, the producer's settle and
// the mailbox send behind it run deeper than a new goroutine's first stack, and that
// copy was ~13% of the kill → settled CPU. A parked runner's stack has grown already.
//
// The contract:
//   - Go never blocks and never waits for a runner: f goes to a parked runner, or to
//     a new goroutine when none is parked. So a call that blocks holds up nobody but
//     itself, as a goroutine of its own would.
//   - At most MaxIdleRunners runners stay parked; a runner that finishes its call
//     while that many are parked exits.
//   - Close makes every parked runner exit, and every runner still in a call exit
//     when that call returns; a Go after Close still runs f (on a goroutine that then
//     exits). Close does not wait for calls in flight: a Cancel may never return.
//
// Its only state is the hand-off channel and the idle count: it holds no job state.
// A nil *Runners runs each f on a goroutine of its own.
type Runners struct {
	work  chan func() // unbuffered: a send succeeds only into a parked runner
	quit  chan struct{}
	close sync.Once
	idle  atomic.Int32 // runners parked, or about to park
}

// MaxIdleRunners bounds the runners kept parked.
const MaxIdleRunners = 8

// NewRunners returns a pool with no runner yet: the first Go starts one.
func NewRunners() *Runners {
	return &Runners{work: make(chan func()), quit: make(chan struct{})}
}

// Go runs f on a parked runner or, when none is parked, on a new one.
func (p *Runners) Go(f func()) {
	if p == nil {
		go f()
		return
	}
	select {
	case p.work <- f:
	default:
		go p.run(f)
	}
}

// run is a runner: f, then the next call handed to it, until it is one too many
// parked or the pool is closed.
func (p *Runners) run(f func()) {
	for {
		f()
		if p.idle.Add(1) > MaxIdleRunners {
			p.idle.Add(-1)
			return
		}
		select {
		case f = <-p.work:
			p.idle.Add(-1)
		case <-p.quit:
			p.idle.Add(-1)
			return
		}
	}
}

// Close ends the parked runners (see the contract). Idempotent.
func (p *Runners) Close() {
	if p != nil {
		p.close.Do(func() { close(p.quit) })
	}
}
