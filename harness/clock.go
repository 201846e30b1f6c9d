package harness

import (
	"sync/atomic"
	"time"
)

// Clock is a fake clock for the parts of troupe that take one (troupe.Config.Clock,
// supervision.Restarting, an embedder's producer timeouts): it stands still until the
// test moves it. It is safe for concurrent use. The zero Clock reads the Unix epoch;
// NewClock starts it elsewhere.
//
// Clock fakes what a component reads, not how long it sleeps: for timers, timeouts
// and grace periods run the test inside a testing/synctest bubble, whose time is
// fake for every goroutine in it.
type Clock struct{ nanos atomic.Int64 }

// NewClock returns a Clock reading start.
func NewClock(start time.Time) *Clock {
	c := &Clock{}
	c.nanos.Store(start.UnixNano())
	return c
}

// Now returns the clock's time. Pass c.Now where a func() time.Time is wanted.
func (c *Clock) Now() time.Time { return time.Unix(0, c.nanos.Load()) }

// Advance moves the clock forward by d (backward if d is negative: a clock stepped
// back, which code reading wall time must survive) and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time { return time.Unix(0, c.nanos.Add(int64(d))) }

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) { c.nanos.Store(t.UnixNano()) }
