package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/cluster"
	"github.com/troupe-rt/troupe/session/postgres/pgtest"
)

// TestClusterFacade is the facade path over 3 member processes, each a
// troupe.System that joined the cluster (System.JoinCluster, then the usual
// StartContinuations): parent agent p on member A starts child C through its
// continuation manager (Manager.Start, as the subagent tool does); C lands on
// another member B, whose own Manager runs its Activation, owner agent and
// turns; C's settlement notice reaches p's surface on A. A forged followup and
// interrupt from a guarded member that says sender=p with a made-up credential
// are refused cluster/unauthorized and run no turn. C's turn starts grandchild G
// through B's Manager (placed by the cluster); G's notice becomes C's next turn,
// and p hears of it on A. p interrupts C's slow turn through the manager and
// hears that C stopped. Then B is SIGKILLed in the middle of C's slow turn with
// a followup queued: p's next followup reaches C on a survivor at a new epoch,
// the cut-off turn is logged aborted, the queued one runs, and p's notice
// arrives on A.
func TestClusterFacade(t *testing.T) {
	dsn := pgtest.Schema(t)
	ev := &events{}
	name := fmt.Sprintf("facade%d", time.Now().UnixNano()%1_000_000)
	members := make([]*member, 3)
	for i := range members {
		members[i] = startMember(t, fmt.Sprintf("f%d", i), name, dsn, ev, facadeFlag)
	}
	waitMembers(t, 3, members...)
	a := members[0]
	byName := map[string]*member{}
	for _, m := range members {
		byName[m.name] = m
	}
	l, ok := a.do(cluster.Command{Op: "parent"})
	require.True(t, ok)
	require.Empty(t, l.Code, l.Message)

	// A child of p that lives off A.
	var c string
	var b *member
	for i := 0; b == nil; i++ {
		require.Less(t, i, 40, "no child landed off member A")
		id := fmt.Sprintf("c%02d", i)
		l, ok := a.do(cluster.Command{Op: "fstart", ID: id, Content: "hello " + id})
		require.True(t, ok)
		require.Empty(t, l.Code, l.Message)
		require.NotEmpty(t, l.InboxID, "the start answers the accepted prompt's id")
		turn := ev.waitEvent(t, 10*time.Second, "the first turn of "+id, func(l cluster.Line) bool {
			return l.Event == "fturn" && l.ID == id
		})
		if turn.Node != a.name {
			c, b = id, byName[turn.Node]
		}
	}
	t.Logf("p on %s, child %s on %s", a.name, c, b.name)
	first := ev.waitEvent(t, 10*time.Second, "p's notice of "+c, func(l cluster.Line) bool {
		return l.Event == "pnotice" && l.Child == c && strings.Contains(l.Content, "done: hello "+c)
	})
	require.Equal(t, a.name, first.Node, "the notice reaches the parent's member")
	require.True(t, strings.HasPrefix(first.Content,
		"Background subagent "+c+" finished and will do no further work unless you send it more.\nIts closing message:\n"), first.Content)

	// Forged requests from guarded members: sender=p with a credential they made up.
	for _, via := range members {
		for _, op := range []string{"forge", "forge-interrupt"} {
			l, ok := via.do(cluster.Command{Op: op, ID: c, Sender: "p", Cred: strings.Repeat("cd", 32), Content: "forged via " + via.name})
			require.True(t, ok)
			require.Equal(t, string(cluster.CodeUnauthorized), l.Code, "%s via %s: %s", op, via.name, l.Message)
		}
	}

	// A hedged retry of an accepted followup (the same message id, again) is
	// answered with the first acceptance and runs no second turn.
	l, ok = a.do(cluster.Command{Op: "fdup", ID: c, Content: "sent twice"})
	require.True(t, ok)
	require.Empty(t, l.Code, l.Message)
	ev.waitEvent(t, 15*time.Second, "p's notice of the repeated followup", func(l cluster.Line) bool {
		return l.Event == "pnotice" && l.Child == c && strings.Contains(l.Content, "done: sent twice")
	})

	// Nested: C's turn starts G through B's manager; G's notice wakes C; p hears.
	g := c + "-g"
	l, ok = a.do(cluster.Command{Op: "ffollowup", ID: c, Content: "spawn:" + g})
	require.True(t, ok)
	require.Empty(t, l.Code, l.Message)
	spawned := ev.waitEvent(t, 10*time.Second, c+" starting "+g, func(l cluster.Line) bool {
		return l.Event == "fspawn" && l.Child == g
	})
	require.Empty(t, spawned.Code, spawned.Message)
	gTurn := ev.waitEvent(t, 10*time.Second, g+"'s turn", func(l cluster.Line) bool {
		return l.Event == "fturn" && l.ID == g
	})
	t.Logf("grandchild %s on %s", g, gTurn.Node)
	nested := ev.waitEvent(t, 15*time.Second, "p's notice after "+g+"'s", func(l cluster.Line) bool {
		return l.Event == "pnotice" && l.Child == c && strings.Contains(l.Content, "Background subagent "+g+" finished")
	})
	require.Equal(t, a.name, nested.Node)
	twice := 0
	for _, l := range ev.snapshot() {
		if l.Event == "fturn" && l.ID == c && l.Content == "sent twice" {
			twice++
		}
	}
	require.Equal(t, 1, twice, "the repeated followup ran once (C's later turns have run)")

	// An interrupt through the manager: the parent's credential over the cluster
	// cancels the slow turn on B, and p hears that C stopped.
	l, ok = a.do(cluster.Command{Op: "ffollowup", ID: c, Content: cluster.SlowPrefix + "interrupted"})
	require.True(t, ok)
	require.Empty(t, l.Code, l.Message)
	ev.waitEvent(t, 10*time.Second, "the turn to interrupt", func(l cluster.Line) bool {
		return l.Event == "fturn" && l.ID == c && l.Content == cluster.SlowPrefix+"interrupted"
	})
	l, ok = a.do(cluster.Command{Op: "finterrupt", ID: c})
	require.True(t, ok)
	require.Empty(t, l.Code, l.Message)
	stopped := ev.waitEvent(t, 10*time.Second, "p's notice of the interrupt", func(l cluster.Line) bool {
		return l.Event == "pnotice" && l.Child == c && strings.HasPrefix(l.Content, "Background subagent "+c+" was stopped before it finished.")
	})
	require.Equal(t, a.name, stopped.Node)

	// SIGKILL of C's member mid-turn, a followup queued behind the slow turn.
	l, ok = a.do(cluster.Command{Op: "ffollowup", ID: c, Content: cluster.SlowPrefix + "long"})
	require.True(t, ok)
	require.Empty(t, l.Code, l.Message)
	slowID := l.InboxID
	l, ok = a.do(cluster.Command{Op: "ffollowup", ID: c, Content: "after the crash"})
	require.True(t, ok)
	require.Empty(t, l.Code, l.Message)
	afterID := l.InboxID
	ran := ev.waitEvent(t, 10*time.Second, "the slow turn", func(l cluster.Line) bool {
		return l.Event == "fturn" && l.ID == c && l.Content == cluster.SlowPrefix+"long"
	})
	victim := byName[ran.Node]
	require.NotEqual(t, a, victim)
	victim.kill(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		l, ok = a.do(cluster.Command{Op: "ffollowup", ID: c, Content: "wake"})
		require.True(t, ok)
		if l.Code == "" {
			break
		}
		t.Logf("followup after the kill: %s %s (retrying)", l.Code, l.Message)
	}
	require.Empty(t, l.Code, l.Message)
	last := ev.waitEvent(t, 15*time.Second, "p's notice after the crash", func(l cluster.Line) bool {
		return l.Event == "pnotice" && l.Child == c && strings.Contains(l.Content, "done: wake")
	})
	require.Equal(t, a.name, last.Node)
	again := ev.waitEvent(t, time.Second, "c's turn on a survivor", func(l cluster.Line) bool {
		return l.Event == "fturn" && l.ID == c && l.Content == "after the crash"
	})
	require.NotEqual(t, victim.name, again.Node)

	store, snap := requireRecovered(t, dsn, c, slowID, afterID)
	require.Greater(t, snap.Header.Epoch, uint64(1), "C moved at a new epoch")
	for _, l := range ev.snapshot() {
		require.False(t, l.Event == "fturn" && strings.HasPrefix(l.Content, "forged"), "a forged request ran a turn")
	}
	head, err := store.Head(context.Background(), g)
	require.NoError(t, err)
	require.Equal(t, c+"@cluster", head.Header.ParentSession, "G's parent of record is C's cluster name")
}
