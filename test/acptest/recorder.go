package acptest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/troupe-rt/troupe/subagent/acp"
)

// Recorder collects an ACP provider's events (pass Observe as acp.Config's event hook);
// tests wait on them.
type Recorder struct {
	budget time.Duration
	mu     sync.Mutex
	events []acp.Event
	wake   chan struct{} // closed and replaced on every event
}

// NewRecorder returns an empty recorder whose waits give up after budget.
func NewRecorder(budget time.Duration) *Recorder {
	return &Recorder{budget: budget, wake: make(chan struct{})}
}

// Observe records ev.
func (r *Recorder) Observe(ev acp.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	close(r.wake)
	r.wake = make(chan struct{})
	r.mu.Unlock()
}

// All returns every event so far, in order.
func (r *Recorder) All() []acp.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Of returns the events of kind so far, in order.
func (r *Recorder) Of(kind string) []acp.Event {
	var out []acp.Event
	for _, e := range r.All() {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// Count is len(Of(kind)).
func (r *Recorder) Count(kind string) int { return len(r.Of(kind)) }

// Kinds lists the events' kinds, in order.
func (r *Recorder) Kinds() []string {
	var ks []string
	for _, e := range r.All() {
		ks = append(ks, e.Kind)
	}
	return ks
}

// Wait returns the first event of kind, waiting for it (fails t after the budget).
func (r *Recorder) Wait(t testing.TB, kind string) acp.Event {
	t.Helper()
	return r.WaitN(t, kind, 1)
}

// WaitN returns the n-th event of kind, waiting for it (fails t after the budget).
func (r *Recorder) WaitN(t testing.TB, kind string, n int) acp.Event {
	t.Helper()
	deadline := time.After(r.budget)
	for {
		r.mu.Lock()
		seen := 0
		for _, e := range r.events {
			if e.Kind == kind {
				if seen++; seen == n {
					r.mu.Unlock()
					return e
				}
			}
		}
		wake := r.wake
		r.mu.Unlock()
		select {
		case <-wake:
		case <-deadline:
			if n == 1 {
				t.Fatalf("no %q event; saw %v", kind, r.Kinds())
			}
			t.Fatalf("no %d-th %q event; saw %v", n, kind, r.Kinds())
		}
	}
}
