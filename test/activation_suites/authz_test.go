package activationsuites

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/test/mutation"
)

// TestAuthzResident: a generated tree — top-level parents, their children, and
// grandchildren started by the children's own agents — all resident (every first
// turn held). Every ordered pair (sender, target) sends a followup, all at once:
// it is delivered iff the sender is the exact live agent registered for the
// target's parent session of record. Ancestors (a grandparent), siblings, a child
// to its parent, an agent to itself, strangers, a forged instance of the parent's
// session that is not the registered one, and stale incarnations (a parent
// replaced by a same-session instance, kept live or disposed) all get UNAUTHORIZED,
// whatever source they claim, and the turn runner never sees their messages.
func TestAuthzResident(t *testing.T) {
	forSchedules(t, schedules(t, 80, 20), func(t testing.TB, m mode, seed uint64, rng *rand.Rand) {
		authzSchedule(t, m, seed, rng, true)
	})
}

// TestAuthzCold: the same with settled children (no grandchildren: a settled child
// has no agent to start them), so authority is checked against the persisted
// header on cold resumes — and, once the authorized followup has resumed a child,
// against the resident Activation.
func TestAuthzCold(t *testing.T) {
	forSchedules(t, schedules(t, 80, 20), func(t testing.TB, m mode, seed uint64, rng *rand.Rand) {
		authzSchedule(t, m, seed, rng, false)
	})
}

// node is a continuable child of the generated tree.
type node struct {
	id, parent string // parent: the parent session of record
}

// sender is an agent instance that sends followups.
type sender struct {
	label string
	agent *owner.Agent
}

func authzSchedule(t testing.TB, m mode, seed uint64, rng *rand.Rand, resident bool) {
	w := newWorld(t, worldOpts{mode: m, seed: seed})
	var hold chan struct{}
	if resident {
		hold = w.runner.holdAll()
		defer func() {
			select {
			case <-hold:
			default:
				close(hold)
			}
		}()
	}
	// registered: the instance registered for each session (the parent of record's
	// live agent); everyone else is not live.
	registered := map[string]*owner.Agent{}
	var senders []sender
	var nodes []node
	parents := 2 + rng.IntN(2)
	for i := range parents {
		ps := fmt.Sprintf("P%d", i)
		registered[ps] = w.parent(ps)
		senders = append(senders, sender{ps, registered[ps]})
		for j := range 1 + rng.IntN(2) {
			c := fmt.Sprintf("%s.c%d", ps, j)
			w.start(registered[ps], c, holdPrefix+"start "+c)
			nodes = append(nodes, node{c, ps})
			if !resident || rng.IntN(2) == 0 {
				continue
			}
			g := c + ".g0"
			ca := w.child(c)
			require.NotNil(t, ca, "no agent captured for %s", c)
			w.start(ca, g, holdPrefix+"start "+g)
			nodes = append(nodes, node{g, c})
		}
	}
	if resident {
		w.runner.awaitStarted(len(nodes))
		for _, n := range nodes {
			a := w.child(n.id)
			registered[n.id] = a
			senders = append(senders, sender{n.id, a})
		}
	} else {
		w.runner.awaitTurns(len(nodes))
		eventually(t, func() bool { return w.m.Live(context.Background()) == 0 }, func() string { return "the children did not settle" })
	}
	// Stale incarnations: P0 replaced by a same-session instance (kept live, or
	// disposed); strangers: X (live, no children), and a forged instance of P1's
	// session that was never registered.
	stale := registered["P0"]
	registered["P0"] = w.replaceParent(stale, "P0")
	senders = append(senders, sender{"P0 (replacement)", registered["P0"]})
	if rng.IntN(2) == 0 {
		require.NoError(t, stale.Dispose(t.Context()))
		senders = append(senders, sender{"P0 (stale, disposed)", stale})
	} else {
		senders = append(senders, sender{"P0 (stale, live)", stale})
	}
	registered["X"] = w.parent("X")
	senders = append(senders, sender{"X (stranger)", registered["X"]},
		sender{"P1 (forged, unregistered)", w.unregistered("P1")})
	senders = senders[1:] // "P0" was the stale instance: it is listed as such

	type pair struct {
		s       sender
		target  node
		text    string
		deliver bool
		err     error
	}
	var pairs []*pair
	for _, s := range senders {
		for _, n := range nodes {
			live := registered[s.agent.Session()] == s.agent
			pairs = append(pairs, &pair{s: s, target: n, text: fmt.Sprintf("authz %s -> %s", s.label, n.id),
				deliver: live && s.agent.Session() == n.parent})
		}
	}
	rng.Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
	t.Logf("%d children in the tree, %d senders, %d pairs, resident=%v", len(nodes), len(senders), len(pairs), resident)

	barrier := make(chan struct{})
	var wg sync.WaitGroup
	for _, p := range pairs {
		wg.Go(func() {
			<-barrier
			w.noise()
			// The source always claims the parent of record: it grants nothing.
			_, p.err = w.followup(p.s.agent, p.target.id, p.text, coordinator(p.target.parent))
		})
	}
	close(barrier)
	wg.Wait()

	want := map[string]bool{}
	oracle := mutation.AuthzPairs.TB(t) // delivered iff the direct parent of record sent it
	for _, p := range pairs {
		if p.deliver {
			require.NoError(oracle, p.err, "%s: the direct parent of record was refused", p.text)
			want[p.text] = true
			continue
		}
		require.Error(oracle, p.err, "%s: delivered", p.text)
		require.True(oracle, errors.Is(p.err, subagent.ErrUnauthorized), "%s: %v (code %s), want UNAUTHORIZED",
			p.text, p.err, messages.CodeOf(p.err))
		wantText := "belongs to another parent session"
		if registered[p.s.agent.Session()] != p.s.agent {
			wantText = "delivery requires the exact live parent agent"
		}
		require.Contains(t, p.err.Error(), wantText, p.text)
	}
	if resident {
		close(hold)
	}
	authz := func() map[string]int {
		got := map[string]int{}
		for _, tr := range w.runner.all() {
			if strings.HasPrefix(tr.text, "authz ") {
				got[tr.text]++
			}
		}
		return got
	}
	eventually(t, func() bool { return len(authz()) >= len(want) }, func() string {
		return fmt.Sprintf("%d of %d delivered followups ran", len(authz()), len(want))
	})
	w.drain()
	got := authz()
	for text, n := range got {
		require.True(t, want[text], "the turn runner was called for a refused followup: %q", text)
		require.Equal(t, 1, n, "%q ran %d times", text, n)
	}
	require.Len(t, got, len(want))
}
