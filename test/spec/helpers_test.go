package spec

import (
	"context"
	"github.com/troupe-rt/troupe/internal/userauth"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/troupetest"
)

// replyBudget bounds how long a test waits for a reply, an observer or a goroutine
// before it fails; nothing waits for it to pass.
const replyBudget = 10 * time.Second

// Verbatim prefixes of SPEC §1.3 rule 23; the rest of each message is a hint that
// must name troupe's API, not a DSH package.
const (
	prefixNoController    = "background jobs unavailable: no job controller serves this agent"
	prefixNoAgentRegistry = "background job ownership requires the agent registry"
)

// live returns a final-output producer whose Cancel settles `killed`, so a job the
// test leaves running is torn down cleanly when the system shuts down.
func live() *troupetest.Producer {
	p := troupetest.NewProducer()
	p.OnCancel = &job.Outcome{Status: job.Killed}
	return p
}

// start starts spec and requires success.
func start(t *testing.T, sys *troupe.System, spec job.Spec) string {
	t.Helper()
	id, err := sys.Jobs().Start(context.Background(), spec)
	require.NoError(t, err)
	return id
}

// list lists for caller and returns the ids.
func list(t *testing.T, sys *troupe.System, caller string) []string {
	t.Helper()
	snaps, err := sys.Jobs().List(context.Background(), asSession(caller))
	require.NoError(t, err)
	ids := []string{}
	for _, s := range snaps {
		ids = append(ids, s.Id)
	}
	return ids
}

// get returns a non-consuming snapshot and requires success.
func get(t *testing.T, sys *troupe.System, id, caller string) *messages.JobSnapshot {
	t.Helper()
	snap, err := sys.Jobs().Get(context.Background(), id, asSession(caller))
	require.NoError(t, err)
	return snap
}

// requireCode requires err to carry code (errors.Is with the sentinel) and, if msg
// is not empty, exactly that message.
func requireCode(t *testing.T, err error, sentinel error, msg string) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, sentinel)
	if msg != "" {
		require.Equal(t, msg, err.Error())
	}
}

// requireHinted checks a rule-23 message: the verbatim prefix, then a hint that
// names no DSH package.
func requireHinted(t *testing.T, err error, prefix string) {
	t.Helper()
	require.Error(t, err)
	msg := err.Error()
	require.True(t, strings.HasPrefix(msg, prefix), "message %q lacks prefix %q", msg, prefix)
	require.Greater(t, len(msg), len(prefix), "the hint is missing")
	require.NotContains(t, msg, "@deepseek-ai/")
	require.NotContains(t, msg, "dsh-")
}

// requireNothingRegistered checks that a refused start left no trace: no job is
// listed for the callers, and the next start of kind gets that kind's next id.
func requireNothingRegistered(t *testing.T, sys *troupe.System, wantNext string, callers ...string) {
	t.Helper()
	for _, c := range append([]string{""}, callers...) {
		require.Empty(t, list(t, sys, c), "caller %q", c)
	}
	kind := wantNext[:strings.LastIndexByte(wantNext, '-')]
	p := live()
	p.Kind = kind
	require.Equal(t, wantNext, start(t, sys, p.Spec(nil)))
	p.Settle(job.Outcome{Status: job.Completed})
	troupetest.Settled(t, sys, wantNext, registry.NoCaller)
}

// ownerName renders an observer's owner as SPEC writes it: the session id, or
// "undefined" for an unowned job.
func ownerName(o registry.Owner) string {
	if o.PID == nil {
		return "undefined"
	}
	return o.Session
}

// doneRec records onJobDone calls.
type doneRec struct {
	mu     sync.Mutex
	snaps  []*messages.JobSnapshot
	owners []string
}

func (r *doneRec) fn(snap *messages.JobSnapshot, o registry.Owner) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.snaps = append(r.snaps, snap)
	r.owners = append(r.owners, ownerName(o))
}

func (r *doneRec) Snaps() []*messages.JobSnapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*messages.JobSnapshot(nil), r.snaps...)
}

// onDone registers a recorder in sc's layer.
func onDone(t *testing.T, sys *troupe.System, sc *scope.Scope) *doneRec {
	t.Helper()
	r := &doneRec{}
	_, err := sys.Jobs().OnJobDone(context.Background(), sc, r.fn)
	require.NoError(t, err)
	return r
}

// changedRec records onJobsChanged calls.
type changedRec struct {
	mu     sync.Mutex
	owners []string
}

func (r *changedRec) fn(o registry.Owner) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.owners = append(r.owners, ownerName(o))
}

func (r *changedRec) Owners() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string{}, r.owners...)
}

// onChanged registers a recorder in sc's layer.
func onChanged(t *testing.T, sys *troupe.System, sc *scope.Scope) *changedRec {
	t.Helper()
	r := &changedRec{}
	_, err := sys.Jobs().OnJobsChanged(context.Background(), sc, r.fn)
	require.NoError(t, err)
	return r
}

// snapView is the part of a snapshot the cases pin.
type snapView struct {
	Status   string
	Reported bool
}

func view(s *messages.JobSnapshot) snapView {
	return snapView{Status: s.Status.Name(), Reported: s.Reported}
}

// waitOut is a finished Wait.
type waitOut struct {
	snap *messages.JobSnapshot
	err  error
}

// waitAsync runs Wait in a goroutine of its own.
func waitAsync(ctx context.Context, sys *troupe.System, id string, timeout time.Duration, caller registry.Caller) <-chan waitOut {
	ch := make(chan waitOut, 1)
	go func() {
		snap, err := sys.Jobs().Wait(ctx, id, timeout, caller)
		ch <- waitOut{snap, err}
	}()
	return ch
}

// recv receives one value or fails the test after replyBudget.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(replyBudget):
		t.Fatal("no value arrived")
		var zero T
		return zero
	}
}

// ctx returns a context that ends with the test.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), replyBudget)
	t.Cleanup(cancel)
	return c
}

// countLabel counts the live effects of sc with label.
func countLabel(sc *scope.Scope, label string) int {
	n := 0
	for _, l := range sc.Effects() {
		if l == label {
			n++
		}
	}
	return n
}

// childScope makes a child of sc.
func childScope(t *testing.T, sc *scope.Scope, label string) *scope.Scope {
	t.Helper()
	c, err := sc.Child(label)
	require.NoError(t, err)
	return c
}

// agentUnder spawns and registers an agent composed under parent.
func agentUnder(t *testing.T, sys *troupe.System, parent *scope.Scope, session string) *owner.Agent {
	t.Helper()
	a, err := sys.NewAgent(parent, session)
	require.NoError(t, err)
	require.NoError(t, sys.Jobs().RegisterAgent(context.Background(), a))
	return a
}

// asSession is the user authority over session (what the human controller acts
// with, SPEC §4): it sees exactly what that session sees, whichever incarnation
// is registered, and is how these spec tests observe a session across its agents'
// teardown. Only troupe's own code can mint it (internal/userauth).
func asSession(session string) registry.Caller {
	return userauth.ForSession(session).(registry.Caller)
}
