package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/cluster"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/session/postgres"
	"github.com/troupe-rt/troupe/session/postgres/pgtest"
)

// waitEvent waits until some event satisfies pred (the driver reads every
// member's stdout; each line read wakes the waiters).
func (e *events) waitEvent(t testing.TB, within time.Duration, what string, pred func(cluster.Line) bool) cluster.Line {
	t.Helper()
	deadline := time.After(within)
	for {
		e.mu.Lock()
		for _, l := range e.all {
			if pred(l) {
				e.mu.Unlock()
				return l
			}
		}
		if e.changed == nil {
			e.changed = make(chan struct{})
		}
		ch := e.changed
		e.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no %s within %v", what, within)
		}
	}
}

// TestClusterParentNotices: a parent p on node A starts a child C that lives on
// another node B; C's settlement notice reaches p's surface on A (A's notice
// endpoint). A forged followup for C from a guarded member that says sender=p
// without p's credential (none, another child's, a made-up one) is refused with
// cluster/unauthorized and accepts nothing, runs no turn. C starts a grandchild
// G through the cluster; G's notice goes into C's inbox (C lives wherever the
// cluster places it), C's turn on it settles C again, and p hears of it on A.
// Then B is SIGKILLed in the middle of C's slow turn with a followup queued
// behind it: the next message reaches C on a survivor at a new epoch, the cut-off
// turn is logged aborted, the queued one runs, and the notice still reaches A.
func TestClusterParentNotices(t *testing.T) {
	dsn := pgtest.Schema(t)
	ev := &events{}
	name := fmt.Sprintf("notices%d", time.Now().UnixNano()%1_000_000)
	members := make([]*member, 3)
	for i := range members {
		members[i] = startMember(t, fmt.Sprintf("n%d", i), name, dsn, ev, "--slow-turn-delay", "20s")
	}
	waitMembers(t, 3, members...)
	a := members[0]
	byName := map[string]*member{}
	for _, m := range members {
		byName[m.name] = m
	}

	// A child of p that lives on another member than p's.
	var c, cCred string
	var b *member
	for i := 0; b == nil; i++ {
		require.Less(t, i, 40, "no child landed off node A")
		id := fmt.Sprintf("c%02d", i)
		l, ok := a.do(cluster.Command{Op: "start", ID: id, Sender: "p", Content: "hello " + id})
		require.True(t, ok)
		require.Empty(t, l.Code, l.Message)
		require.NotEmpty(t, l.Cred, "a start's reply carries the parent's credential")
		if l.Where != a.name {
			c, cCred, b = id, l.Cred, byName[l.Where]
		}
	}
	t.Logf("p on %s, child %s on %s", a.name, c, b.name)
	first := ev.waitEvent(t, 10*time.Second, "notice of "+c+" on A", func(l cluster.Line) bool {
		return l.Event == "notice" && l.Child == c && strings.Contains(l.Content, "done: hello "+c)
	})
	require.Equal(t, a.name, first.Node, "the notice reaches the parent's member")
	require.Equal(t, "p", first.ID)
	require.Equal(t, "completed", first.Stop)
	require.True(t, strings.HasPrefix(first.Content, "Background subagent "+c+" finished"), first.Content)

	// Forged senders, from a guarded member other than A (and from A itself).
	probe := func(via *member) cluster.Line {
		l, ok := via.do(cluster.Command{Op: "probe", ID: c})
		require.True(t, ok)
		require.Empty(t, l.Code, l.Message)
		return l
	}
	before := probe(a)
	other := members[1]
	if other == b {
		other = members[2]
	}
	for _, forged := range []struct{ name, cred string }{
		{"no credential", ""},
		{"a made-up credential", strings.Repeat("ab", 32)},
		{"malformed", "not hex"},
	} {
		for _, via := range []*member{other, b, a} {
			for _, op := range []string{"followup", "interrupt"} {
				l, ok := via.do(cluster.Command{Op: op, ID: c, Sender: "p", Cred: forged.cred, Content: "forged " + forged.name})
				require.True(t, ok)
				require.Equal(t, string(cluster.CodeUnauthorized), l.Code, "%s %s via %s: %s", op, forged.name, via.name, l.Message)
			}
		}
	}
	// Another child's real credential does not speak for c.
	l, ok := a.do(cluster.Command{Op: "start", ID: c + "-sib", Sender: "p", Content: "sibling"})
	require.True(t, ok)
	require.Empty(t, l.Code, l.Message)
	l, ok = other.do(cluster.Command{Op: "followup", ID: c, Sender: "p", Cred: l.Cred, Content: "forged sibling"})
	require.True(t, ok)
	require.Equal(t, string(cluster.CodeUnauthorized), l.Code, l.Message)
	// The right credential with another sender is refused too.
	l, ok = other.do(cluster.Command{Op: "followup", ID: c, Sender: "q", Cred: cCred, Content: "forged q"})
	require.True(t, ok)
	require.Equal(t, string(cluster.CodeUnauthorized), l.Code, l.Message)
	after := probe(a)
	require.Equal(t, before.Ended, after.Ended, "a refused request ran no turn")
	require.False(t, after.Running)
	require.Zero(t, after.Queued)

	// The grandchild: started by c (through n1's API, c's credential kept by the
	// driver, as c's own holder), settles; its notice wakes c wherever c lives.
	g := c + "-g"
	l, ok = members[2].do(cluster.Command{Op: "start", ID: g, Sender: c, ParentKind: session.ParentSubagent, Content: "grand"})
	require.True(t, ok)
	require.Empty(t, l.Code, l.Message)
	require.NotEmpty(t, l.Cred)
	second := ev.waitEvent(t, 15*time.Second, "c's notice after g's", func(l cluster.Line) bool {
		return l.Event == "notice" && l.Child == c && strings.Contains(l.Content, "Background subagent "+g+" finished")
	})
	require.Equal(t, a.name, second.Node)
	require.NotEqual(t, first.InboxID, second.InboxID, "one notice per settlement")

	// SIGKILL of c's member in the middle of a slow turn, a followup queued behind it.
	l, ok = a.do(cluster.Command{Op: "followup", ID: c, Sender: "p", Cred: cCred, Content: cluster.SlowPrefix + "long"})
	require.True(t, ok)
	require.Empty(t, l.Code, l.Message)
	slowID := l.InboxID
	l, ok = a.do(cluster.Command{Op: "followup", ID: c, Sender: "p", Cred: cCred, Content: "after the crash"})
	require.True(t, ok)
	require.Empty(t, l.Code, l.Message)
	afterID := l.InboxID
	// Kill the member the slow turn runs on (c's member).
	ran := ev.waitEvent(t, 10*time.Second, "the slow turn's start", func(l cluster.Line) bool {
		return l.Event == "turn" && l.InboxID == slowID
	})
	victim := byName[ran.Node]
	require.NotEqual(t, a, victim, "c's turn runs off the parent's member")
	victim.kill(t)
	var survivor *member
	for _, m := range members {
		if m != victim && m != a {
			survivor = m
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for ctx.Err() == nil { // the next message activates c on a survivor
		l, ok = survivor.do(cluster.Command{Op: "probe", ID: c, TimeoutMS: 5000})
		require.True(t, ok)
		if l.Code == "" {
			break
		}
	}
	require.Empty(t, l.Code, l.Message)
	require.NotEqual(t, victim.name, l.Where)
	third := ev.waitEvent(t, 15*time.Second, "c's notice after the crash", func(l cluster.Line) bool {
		return l.Event == "notice" && l.Child == c && strings.Contains(l.Content, "done: after the crash")
	})
	require.Equal(t, a.name, third.Node)

	store, _ := requireRecovered(t, dsn, c, slowID, afterID)
	head, err := store.Head(context.Background(), g)
	require.NoError(t, err)
	require.Equal(t, c, head.Header.ParentSession)
	require.Equal(t, session.ParentSubagent, head.Header.ParentKind)
}

// requireRecovered opens the cluster's store and checks child c's session after its
// member's SIGKILL: the turn of message slowID that was cut off is logged aborted,
// the queued message afterID ran after the crash, and no refused (forged) request is
// in its inbox. It returns the store (closed at cleanup) and the session.
func requireRecovered(t *testing.T, dsn, c, slowID, afterID string) (*postgres.Store, session.Snapshot) {
	t.Helper()
	store, err := postgres.Open(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	snap, err := store.Load(context.Background(), c)
	require.NoError(t, err)
	var aborted, ranAfter bool
	for _, e := range snap.Log {
		aborted = aborted || (e.Kind == session.EntryTurnAborted && e.InboxID == slowID)
		ranAfter = ranAfter || (e.Kind == session.EntryTurnEnd && e.InboxID == afterID)
	}
	require.True(t, aborted, "the cut-off turn is logged aborted")
	require.True(t, ranAfter, "the queued followup ran after the crash")
	for _, m := range snap.Inbox {
		require.False(t, strings.HasPrefix(m.Content[0].Text, "forged"), "a refused request was accepted: %q", m.Content[0].Text)
	}
	return store, snap
}
