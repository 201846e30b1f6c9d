package activation_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
)

// stallingStore holds the directory right after a cold restore's commit
// (ResumeAccept runs on the directory's goroutine): the stall is queued behind the
// followup being handled, so the directory takes nothing after that followup
// until release — not the Activation's firstAccepted either.
type stallingStore struct {
	*faultyStore
	m       atomic.Pointer[activation.Manager]
	release atomic.Pointer[func()]
}

func (s *stallingStore) ResumeAccept(ctx context.Context, id string, msg session.InboxMessage, start []session.Entry,
	check func(session.Head) error) (session.Resumed, session.InboxMessage, bool, error) {
	r, out, started, err := s.faultyStore.ResumeAccept(ctx, id, msg, start, check)
	if m := s.m.Load(); m != nil {
		release := m.StallDirectory()
		s.release.Store(&release)
	}
	return r, out, started, err
}

// A followup that restores a settled child cold is answered by the child's
// Activation itself, not through the directory: it returns while the directory
// is held right after the restore, before it has taken the Activation's answer
// (firstAccepted). The turn then runs, and the directory, released, settles the
// child as usual.
func TestColdFollowupIsAnsweredByTheActivation(t *testing.T) {
	var store *stallingStore
	r := newRig(t, func(turn subagent.Turn) (subagent.Reply, bool) {
		return subagent.Reply{Text: turn.Input.Text() + " done"}, true
	}, false, func(d *activation.Deps) {
		store = &stallingStore{faultyStore: d.Store.(*faultyStore)}
		d.Store = store
	})
	ctx := context.Background()
	_, _, err := r.m.Start(ctx, r.parent, "spawn", "research", "c", subagent.Request{Prompt: "task"})
	require.NoError(t, err)
	require.Equal(t, []string{"Its closing message:", "task done"}, r.notice(t).More)

	store.m.Store(r.m)
	answered := make(chan error, 1)
	go func() {
		_, err := r.m.Followup(ctx, r.parent, "c", "again", session.Source{Kind: "coordinator"})
		answered <- err
	}()
	select {
	case err := <-answered:
		require.NoError(t, err)
	case <-time.After(budget):
		if release := store.release.Load(); release != nil {
			(*release)()
		}
		t.Fatal("the cold followup was not answered while the directory was held")
	}
	store.m.Store(nil)
	(*store.release.Load())()
	require.Equal(t, []string{"Its closing message:", "again done"}, r.notice(t).More)
	require.Equal(t, []string{"task", "again"}, r.ran())
}
