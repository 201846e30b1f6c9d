package activation_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/troupetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type inbox struct{ msgs chan owner.Message }

func (i *inbox) Inject(m owner.Message) error   { i.msgs <- m; return nil }
func (i *inbox) Steer(m owner.Message) error    { i.msgs <- m; return nil }
func (i *inbox) Followup(m owner.Message) error { i.msgs <- m; return nil }

func TestSmokeStartFollowupSettleNotice(t *testing.T) {
	sys, _ := troupetest.Served(t)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), nil)
	require.NoError(t, err)
	runner := subagent.NewScripted(subagent.Reply{Text: "first answer"}, subagent.Reply{Text: "second answer"})
	_, err = rt.RegisterProvider(t.Context(), sys.Scope(), subagent.NewSpawn(sys.Actors(), runner))
	require.NoError(t, err)
	store := session.NewMemory()
	m, err := sys.StartContinuations(store, rt, runner, nil)
	require.NoError(t, err)

	in := &inbox{msgs: make(chan owner.Message, 8)}
	parent, err := sys.NewAgent(nil, "P", owner.Options{Surface: in})
	require.NoError(t, err)
	require.NoError(t, sys.Jobs().RegisterAgent(context.Background(), parent))

	ctx := context.Background()
	id, msgID, err := m.Start(ctx, parent, "spawn", "research", "c1", subagent.Request{Prompt: "task"})
	require.NoError(t, err)
	require.Equal(t, "c1", id)
	require.NotEmpty(t, msgID)
	select {
	case n := <-in.msgs:
		require.Equal(t, "Background subagent c1 finished and will do no further work unless you send it more.", n.Text)
		require.Equal(t, []string{"Its closing message:", "first answer"}, n.More)
	case <-time.After(10 * time.Second):
		t.Fatal("no notice")
	}
	// Cold resume.
	_, err = m.Followup(ctx, parent, "c1", "more", session.Source{Kind: "coordinator"})
	require.NoError(t, err)
	n := <-in.msgs
	require.Equal(t, []string{"Its closing message:", "second answer"}, n.More)
	snap, err := store.Load(ctx, "c1")
	require.NoError(t, err)
	var users []string
	for _, e := range snap.Log {
		if e.Kind == session.EntryMessage && e.Role == "user" {
			users = append(users, e.Content[0].Text)
		}
	}
	require.Equal(t, []string{"task", "more"}, users)
	require.Equal(t, uint64(2), snap.Header.Epoch)

	stranger := troupetest.Agent(t, sys, "X")
	_, err = m.Followup(ctx, stranger, "c1", "hi", session.Source{})
	require.ErrorIs(t, err, subagent.ErrUnauthorized)
}
