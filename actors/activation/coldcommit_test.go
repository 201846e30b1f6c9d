package activation_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/supervision"
)

// A cold restore whose commit (Store.ResumeAccept) fails.

// commitGate is a faultyStore whose armed ResumeAccept signals entered, then waits
// for release and, if fail is set, fails with it once the caller's check has
// passed (writing nothing, as a failed commit) — or commits.
type commitGate struct {
	*faultyStore
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
	fail    error
}

func (s *commitGate) ResumeAccept(ctx context.Context, id string, m session.InboxMessage, start []session.Entry,
	check func(session.Head) error) (session.Resumed, session.InboxMessage, bool, error) {
	if s.armed.CompareAndSwap(true, false) {
		s.entered <- struct{}{}
		<-s.release
		if s.fail != nil { // the commit fails once the head's check has passed
			_, _, _, err := s.faultyStore.ResumeAccept(ctx, id, m, start, func(h session.Head) error {
				if err := check(h); err != nil {
					return err
				}
				return s.fail
			})
			return session.Resumed{}, session.InboxMessage{}, false, err
		}
	}
	return s.faultyStore.ResumeAccept(ctx, id, m, start, check)
}

// coldRig is a rig whose store is a commitGate and whose NewAgent hands every
// child agent it made to made.
type coldRig struct {
	*rig
	gate *commitGate
	made chan *owner.Agent
}

func newColdRig(t *testing.T, fail error) *coldRig {
	t.Helper()
	cr := &coldRig{made: make(chan *owner.Agent, 4)}
	cr.rig = newRig(t, func(turn subagent.Turn) (subagent.Reply, bool) {
		return subagent.Reply{Text: turn.Input.Text() + " done"}, true
	}, false, func(d *activation.Deps) {
		cr.gate = &commitGate{faultyStore: d.Store.(*faultyStore), entered: make(chan struct{}, 1),
			release: make(chan struct{}), fail: fail}
		d.Store = cr.gate
		newAgent := d.NewAgent
		d.NewAgent = func(id string, inbox owner.Surface) (*owner.Agent, error) {
			a, err := newAgent(id, inbox)
			if err == nil {
				cr.made <- a
			}
			return a, err
		}
	})
	ctx := context.Background()
	_, _, err := cr.m.Start(ctx, cr.parent, "spawn", "research", "c", subagent.Request{Prompt: "task"})
	require.NoError(t, err)
	<-cr.made // the first incarnation's agent
	require.Equal(t, []string{"Its closing message:", "task done"}, cr.notice(t).More)
	cr.gate.armed.Store(true)
	return cr
}

// followup sends a followup to c in the background; its answer comes on the
// returned channel.
func (r *coldRig) followup(text string) <-chan error {
	answered := make(chan error, 1)
	go func() {
		_, err := r.m.Followup(context.Background(), r.parent, "c", text, session.Source{Kind: "coordinator"})
		answered <- err
	}()
	return answered
}

// A failed commit: the followup is answered PERSISTENCE_UNAVAILABLE (a coded
// error naming the store's, not the store's bare error), no turn runs, and nothing
// of the restore is left — no Activation, no child agent registered, no node of
// the session in the supervision tree, no goroutine (goleak, TestMain). The next
// followup restores the child as if the failed one had never been sent.
func TestColdRestoreWhoseCommitFailsLeavesNothing(t *testing.T) {
	r := newColdRig(t, errors.New("disk on fire"))
	ctx := context.Background()
	answered := r.followup("lost")
	<-r.gate.entered
	close(r.gate.release)
	err := <-answered
	require.Equal(t, subagent.CodePersistenceUnavailable, messages.CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), "disk on fire")
	require.Zero(t, r.m.Live(ctx), "no Activation is left")
	require.Nil(t, r.sys.Jobs().RegisteredAgent(ctx, "c"), "no child agent is registered")
	deadline := time.Now().Add(budget)
	for {
		snap, err := r.sys.Tree().Snapshot(ctx)
		require.NoError(t, err)
		if !slices.ContainsFunc(snap.Nodes, func(n supervision.Node) bool { return n.Session == "c" }) {
			break
		}
		require.True(t, time.Now().Before(deadline), "session c still has nodes in the supervision tree:\n%s", snap)
		runtime.Gosched()
	}
	require.Equal(t, []string{"task"}, r.ran(), "no turn ran")

	_, err = r.m.Followup(ctx, r.parent, "c", "after", session.Source{Kind: "coordinator"})
	require.NoError(t, err)
	require.Equal(t, []string{"Its closing message:", "after done"}, r.notice(t).More)
	require.Equal(t, []string{"task", "after"}, r.ran(), "the refused message never ran")
	snap, err := r.store.Load(ctx, "c")
	require.NoError(t, err)
	for _, m := range snap.Inbox {
		require.NotEqual(t, "lost", m.Content[0].Text, "the refused message is not journaled")
	}
}
