package durability

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/troupetest"
)

const (
	idsChildEnv = "TROUPE_DURABILITY_IDS_CHILD" // the store's path: run as the child
	idsRoleEnv  = "TROUPE_DURABILITY_IDS_ROLE"  // "first" or "second"
	runBugsEnv  = "TROUPE_RUN_BUGS"
)

// TestBugMessageIDsRepeatAcrossProcesses: accepted messages get ids "msg-N" from a
// process-local counter (actors/activation/actor.go, msgIDs), so every process
// hands out msg-1, msg-2, … again, and two messages of one session get the same
// id. The restore plan (session.Snapshot.Pending) matches turn starts and ends to
// inbox messages by id, so after a crash an acknowledged message that never ran can
// be taken for an older one that did: it is never run — an accepted message lost
// (SPEC §1.3 rule 35) — and a turn cut off by the crash is never recorded aborted.
//
// Process 1: child c is started with "first" (msg-1) and sent "second" (msg-2);
// both turns complete. Process 2 (a restart): followup "A" gets msg-1 and its turn
// starts and hangs; followup "B" gets msg-2 and waits behind it; the process is
// killed. The restore plan must run B and record A aborted: it does neither.
//
// It was a bug (message ids restarted at msg-1 in every process); ids are now random.
func TestMessageIDsNeverRepeatAcrossProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	ids := func(role string, kill bool) map[string]string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDurabilityIDsChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), idsChildEnv+"="+path, idsRoleEnv+"="+role)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		got := map[string]string{}
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 3 && f[0] == "ACK" {
				got[f[1]] = f[2] // text → id
			}
			if len(f) == 1 && f[0] == "DONE" {
				if kill {
					require.NoError(t, cmd.Process.Kill())
				}
				break
			}
		}
		for sc.Scan() {
		}
		err = cmd.Wait()
		if !kill {
			require.NoError(t, err, "%s: %s", role, stderr.String())
		}
		return got
	}
	first := ids("first", false)
	second := ids("second", true)
	t.Logf("process 1 acknowledged %v, process 2 acknowledged %v", first, second)

	store, err := session.OpenBolt(path)
	require.NoError(t, err)
	defer store.Close()
	snap, err := store.Load(context.Background(), "c")
	require.NoError(t, err)
	toRun, cutOff := snap.Pending()
	texts := func(ms []session.InboxMessage) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Content[0].Text)
		}
		return out
	}
	seen := map[string]string{}
	for _, m := range snap.Inbox {
		if prev, dup := seen[m.ID]; dup {
			t.Errorf("inbox id %s is both %q and %q", m.ID, prev, m.Content[0].Text)
		}
		seen[m.ID] = m.Content[0].Text
	}
	require.Equal(t, []string{"B"}, texts(toRun), "accepted, never started: must run after the restore")
	require.Equal(t, []string{"probe A"}, texts(cutOff), "started, cut off by the kill: must be recorded aborted")
}

// TestDurabilityIDsChild is the child role of TestBugMessageIDsRepeatAcrossProcesses.
func TestDurabilityIDsChild(t *testing.T) {
	path := os.Getenv(idsChildEnv)
	if path == "" {
		t.Skip("the child role of TestBugMessageIDsRepeatAcrossProcesses")
	}
	store, err := session.OpenBolt(path)
	require.NoError(t, err)
	runner := &heldRunner{started: make(chan string, 16), release: make(chan struct{})}
	_, m, p := troupetest.Continuations(t, store, runner)
	ctx := context.Background()
	src := session.Source{Kind: "coordinator", Form: "relay", SenderSessionID: "P"}
	say := func(s ...string) { os.Stdout.WriteString(strings.Join(s, " ") + "\n") }
	if os.Getenv(idsRoleEnv) == "first" {
		_, id, err := m.Start(ctx, p, "spawn", "ids", "c", subagent.Request{Prompt: "first"})
		require.NoError(t, err)
		say("ACK", "first", id)
		id, err = m.Followup(ctx, p, "c", "second", src)
		require.NoError(t, err)
		say("ACK", "second", id)
		deadline := time.Now().Add(budget)
		for m.Live(ctx) != 0 { // both turns ended and the Activation was disposed
			require.False(t, time.Now().After(deadline), "the child did not settle")
			runtime.Gosched()
		}
		say("DONE")
		return
	}
	// "second": A's turn hangs (the runner holds "probe " turns), B waits behind it.
	id, err := m.Followup(ctx, p, "c", "probe A", src)
	require.NoError(t, err)
	say("ACK", "A", id)
	for s := range runner.started {
		if s == "probe A" {
			break
		}
	}
	id, err = m.Followup(ctx, p, "c", "B", src)
	require.NoError(t, err)
	say("ACK", "B", id)
	say("DONE")
	<-make(chan struct{}) // until killed
}
