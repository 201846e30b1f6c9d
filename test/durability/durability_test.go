// Package durability is TESTING.md's durability suite for continuable sessions:
// kill -9 rounds of a child process writing sessions to a store — a bbolt file,
// and PostgreSQL (session/postgres, on the server of $TROUPE_PG_DSN, a schema of
// the test's own; skipped without it unless TROUPE_PG_REQUIRED=1).
//
// TestDurabilityKill9 (subtests bolt and postgres) re-executes its own test
// binary as a child process (TestDurabilityChild, selected by -test.run and the
// $TROUPE_DURABILITY_CHILD environment variable, the store's location, with
// $TROUPE_DURABILITY_STORE naming the kind). The child opens the store, starts a
// continuation manager on it, starts one new session per round and has a few
// goroutines send followups to the sessions of every round so far; it prints
// "ACK <session> <message id>" on stdout the moment Start or Followup returns —
// that is, the moment the message is acknowledged as accepted (SPEC §1.3 rule 35).
// The parent kills the child with SIGKILL at a seeded moment (while it opens the
// store, right after it is ready, or after a seeded number of acknowledgements),
// reads stdout to its end, and then checks:
//   - acked ⊆ recovered: every acknowledged message (its id and its text) is in its
//     session's inbox journal;
//   - the store is consistent: bbolt's tx.Check() is clean; in PostgreSQL each
//     session's log and inbox seqs run 1…n without gaps, n its row's counter;
//   - the next followup activates exactly once: the session's epoch advances by one
//     and the manager has exactly one live Activation after it (its turn is held).
//
// A kill -9 never loses the page cache, so it cannot tell a synced store from one
// that never syncs. TestDurabilityPowerLoss simulates a power loss instead: it
// keeps an image of what the disk holds, taken page by page from the page cache
// with cachestat(2) (only pages neither dirty nor under writeback), at every
// acknowledgement of concurrent writers on a session.Bolt store, and then checks
// the image a reboot would find: it opens, tx.Check() is clean, and acked ⊆
// recovered.
//
// TestBugMessageIDsRepeatAcrossProcesses shows why messages are matched by id and
// text here, and why "no turn started twice" is not checked by id: message ids
// restart at msg-1 in every process.
//
// Knobs: -seed / TROUPE_SEED (the run's seed: kill moments and the child's choices),
// TROUPE_DURABILITY_ROUNDS (default 20).
package durability

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe/harness"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/troupetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	childEnv    = "TROUPE_DURABILITY_CHILD" // the store's location: run as the child
	storeEnv    = "TROUPE_DURABILITY_STORE" // the store's kind: "bolt" or "postgres"
	roundEnv    = "TROUPE_DURABILITY_ROUND"
	childSeed   = "TROUPE_DURABILITY_SEED"
	roundsEnv   = "TROUPE_DURABILITY_ROUNDS"
	rounds      = 40
	workers     = 4
	maxKillAcks = 40
	budget      = 30 * time.Second
	// childLifetime ends a child the parent forgot to kill (it never should).
	childLifetime = time.Minute
)

func sessionOf(round int) string { return fmt.Sprintf("s%02d", round) }

// TestDurabilityChild is the child process's role; without $TROUPE_DURABILITY_CHILD
// it is skipped.
func TestDurabilityChild(t *testing.T) {
	path := os.Getenv(childEnv)
	if path == "" {
		t.Skip("the child role of TestDurabilityKill9")
	}
	round, err := strconv.Atoi(os.Getenv(roundEnv))
	require.NoError(t, err)
	seed, err := strconv.ParseUint(os.Getenv(childSeed), 10, 64)
	require.NoError(t, err)
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", args...) // one write per line, unbuffered
	}

	store, err := backends[os.Getenv(storeEnv)].open(path)
	require.NoError(t, err)
	_, m, p := troupetest.Continuations(t, store, subagent.NewScripted(subagent.Reply{Text: "ok"}))
	say("READY")

	ctx := context.Background()
	prompt := fmt.Sprintf("start %d", round)
	id, msgID, err := m.Start(ctx, p, "spawn", "durable", sessionOf(round), subagent.Request{Prompt: prompt})
	require.NoError(t, err)
	say("ACK %s %s %s", id, msgID, prompt)
	ids, err := store.IDs(ctx) // the sessions of every round whose start got through
	require.NoError(t, err)
	stop := time.After(childLifetime)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				id := ids[rng.IntN(len(ids))]
				text := fmt.Sprintf("round-%d-worker-%d-#%d", round, w, n)
				msgID, err := m.Followup(ctx, p, id, text,
					session.Source{Kind: "coordinator", Form: "relay", SenderSessionID: "P"})
				if err != nil {
					say("ERR %s %v", id, err)
					continue
				}
				say("ACK %s %s %s", id, msgID, text)
			}
		})
	}
	wg.Wait()
	t.Error("the child was not killed")
}

// ack is an acknowledged message.
type ack struct{ session, msgID, text string }

func TestDurabilityKill9(t *testing.T) {
	for _, name := range []string{"bolt", "postgres"} {
		t.Run(name, func(t *testing.T) { kill9Rounds(t, name) })
	}
}

func kill9Rounds(t *testing.T, kind string) {
	be := backends[kind]
	seed := harness.Seed(t)
	n := rounds
	if s := os.Getenv(roundsEnv); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(t, err)
	}
	rng := rand.New(rand.NewPCG(seed, 0xd0ab1e))
	path := be.locate(t)
	var acked []ack
	probes, killedBeforeReady := 0, 0
	start := time.Now()
	for round := range n {
		// When to kill: 0 while it opens the store (as soon as it runs), 1 right after
		// it is ready, else after k acknowledgements.
		k := rng.IntN(maxKillAcks + 2)
		got, ready := runChild(t, kind, path, round, seed+uint64(round), k)
		if !ready {
			killedBeforeReady++
		}
		acked = append(acked, got...)
		if probe(t, be, path, round, acked) {
			probes++
		}
	}
	t.Logf("%d rounds, %d acknowledged messages recovered, %d probes activated exactly once, %d kills before the child was ready, in %v",
		n, len(acked), probes, killedBeforeReady, time.Since(start).Round(time.Millisecond))
	require.GreaterOrEqual(t, probes, n/2, "too few rounds reached a session to probe")
}

// runChild runs one child round and kills it at the kill point k (see the caller);
// it returns every acknowledgement the child printed before it died.
func runChild(t *testing.T, kind, path string, round int, seed uint64, k int) (acks []ack, ready bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDurabilityChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+path, storeEnv+"="+kind, roundEnv+"="+strconv.Itoa(round),
		childSeed+"="+strconv.FormatUint(seed, 10))
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	killed := false
	kill := func() {
		if !killed {
			killed = true
			require.NoError(t, cmd.Process.Kill()) // SIGKILL
		}
	}
	if k == 0 {
		kill()
	}
	var errs []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 1 && f[0] == "READY":
			ready = true
			if k == 1 {
				kill()
			}
		case len(f) >= 4 && f[0] == "ACK":
			acks = append(acks, ack{f[1], f[2], strings.Join(f[3:], " ")})
			if len(acks) >= k-1 {
				kill()
			}
		case len(f) > 0 && f[0] == "ERR":
			errs = append(errs, sc.Text())
		}
	}
	kill()
	err = cmd.Wait()
	require.Error(t, err, "round %d: the child exited on its own:\n%s", round, stderr.String())
	require.Empty(t, errs, "round %d: followups failed in the child", round)
	return acks, ready
}

// probe checks the store after a kill (see the package doc) and reports whether a
// session existed to probe.
func probe(t *testing.T, be backend, path string, round int, acked []ack) bool {
	t.Helper()
	store, err := be.open(path)
	require.NoError(t, err, "round %d: reopening the store", round)
	defer func() { require.NoError(t, store.Close()) }()
	require.NoError(t, be.check(store, path), "round %d: the store is inconsistent", round)

	ctx := context.Background()
	inboxes := map[string]map[ack]bool{}
	for _, a := range acked {
		if inboxes[a.session] == nil {
			snap, err := store.Load(ctx, a.session)
			require.NoError(t, err, "round %d: an acknowledged session is missing: %s", round, a.session)
			inboxes[a.session] = map[ack]bool{}
			for _, m := range snap.Inbox {
				inboxes[a.session][ack{a.session, m.ID, m.Content[0].Text}] = true
			}
		}
		require.True(t, inboxes[a.session][a], "round %d: acknowledged %s %s %q is not in the inbox journal",
			round, a.session, a.msgID, a.text)
	}

	ids, err := store.IDs(ctx)
	require.NoError(t, err)
	if len(ids) == 0 {
		return false
	}
	id := ids[len(ids)-1]
	before, err := store.Load(ctx, id)
	require.NoError(t, err)

	// The next followup: exactly one activation.
	runner := &heldRunner{started: make(chan string, 1024), release: make(chan struct{})}
	sys, m, p := troupetest.Continuations(t, store, runner)
	text := fmt.Sprintf("probe %d", round)
	_, err = m.Followup(ctx, p, id, text, session.Source{Kind: "coordinator", Form: "relay", SenderSessionID: "P"})
	require.NoError(t, err, "round %d: the followup after the kill", round)
	// Restored messages run first, in acceptance order: every journaled message
	// whose turn never started (and that no disposal discarded), in the order of
	// the inbox journal, then the probe.
	want := restoreOrder(before)
	var ranFirst []string
	deadline := time.After(budget)
	for held := false; !held; {
		select {
		case s := <-runner.started:
			held = s == text
			if !held {
				ranFirst = append(ranFirst, s)
			}
		case <-deadline:
			t.Fatalf("round %d: the probe's turn never started", round)
		}
	}
	require.Equal(t, want, ranFirst, "round %d: %s: the restored messages did not run first, in acceptance order", round, id)
	require.Equal(t, 1, m.Live(ctx), "round %d: live Activations after the followup", round)
	after, err := store.Load(ctx, id)
	require.NoError(t, err)
	require.Equal(t, before.Header.Epoch+1, after.Header.Epoch, "round %d: %s activated more than once", round, id)
	close(runner.release)
	sctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	require.NoError(t, sys.Shutdown(sctx)) // drains the manager before the store closes
	final, err := store.Load(ctx, id)
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(final.Inbox, func(m session.InboxMessage) bool { return m.Content[0].Text == text }))
	return true
}

// restoreOrder is the test's own reading of SPEC's restore rule, from the stored
// session: the texts of the inbox journal's messages, in journal (acceptance)
// order, whose turns never started and that were not discarded.
func restoreOrder(s session.Snapshot) []string {
	started, discarded := map[string]bool{}, map[string]bool{}
	for _, e := range s.Log {
		switch e.Kind {
		case session.EntryTurnStart:
			started[e.InboxID] = true
		case session.EntryDiscarded:
			discarded[e.InboxID] = true
		}
	}
	slices.SortFunc(s.Inbox, func(a, b session.InboxMessage) int { return cmp.Compare(a.Seq, b.Seq) })
	var out []string
	for _, m := range s.Inbox {
		if !started[m.ID] && !discarded[m.ID] {
			out = append(out, m.Content[0].Text)
		}
	}
	return out
}

// heldRunner signals each turn's text and holds the probe's turn until release.
type heldRunner struct {
	started chan string
	release chan struct{}
}

func (r *heldRunner) RunTurn(ctx context.Context, turn subagent.Turn) (subagent.TurnResult, error) {
	text := turn.Input.Content[0].Text
	r.started <- text
	if strings.HasPrefix(text, "probe ") {
		select {
		case <-r.release:
		case <-ctx.Done():
			return subagent.TurnResult{}, context.Cause(ctx)
		}
	}
	return subagent.TurnResult{Messages: []subagent.Message{{Role: "assistant",
		Content: []subagent.Block{{Type: "text", Text: "ok"}}}}}, nil
}
