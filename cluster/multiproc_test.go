package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/cluster"
	"github.com/troupe-rt/troupe/harness"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/session/postgres"
	"github.com/troupe-rt/troupe/session/postgres/pgtest"
	"github.com/troupe-rt/troupe/test/mutation"
)

// plantEnv is cluster.PlantEnv (declared only in troupe_mutation builds).
const plantEnv = "TROUPE_CLUSTER_PLANT"

// member is one troupe-node OS process driven through its stdin and stdout.
type member struct {
	name  string
	ev    *events // where its events go
	cmd   *exec.Cmd
	stdin io.WriteCloser
	next  atomic.Int64
	dead  atomic.Bool

	mu      sync.Mutex // guards waiting and the encoder: the driver's record, not runtime state
	enc     *json.Encoder
	waiting map[int64]chan cluster.Line
	done    chan struct{} // closed when its stdout ends
}

// events is the record of every node's events, in the order the driver read them.
type events struct {
	mu      sync.Mutex // guards all and changed: the driver's record
	all     []cluster.Line
	changed chan struct{} // closed (and cleared) by each add: wakes waitEvent
}

func (e *events) add(l cluster.Line) {
	e.mu.Lock()
	e.all = append(e.all, l)
	if e.changed != nil {
		close(e.changed)
		e.changed = nil
	}
	e.mu.Unlock()
}

// await waits until ok holds of the events recorded so far (checked after each
// new one), or timeout; it reports whether ok held.
func (e *events) await(timeout time.Duration, ok func([]cluster.Line) bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		e.mu.Lock()
		if ok(e.all) {
			e.mu.Unlock()
			return true
		}
		if e.changed == nil {
			e.changed = make(chan struct{})
		}
		changed := e.changed
		e.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}

func (e *events) snapshot() []cluster.Line {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]cluster.Line(nil), e.all...)
}

func startMember(t testing.TB, name, clusterName, dsn string, ev *events, extra ...string) *member {
	t.Helper()
	return startMemberEnv(t, nil, name, clusterName, dsn, ev, extra...)
}

// startMemberEnv is startMember with env added to the member's environment.
func startMemberEnv(t testing.TB, env []string, name, clusterName, dsn string, ev *events, extra ...string) *member {
	t.Helper()
	args := append([]string{"--name", name, "--cluster", clusterName, "--dsn", dsn,
		"--request-timeout", "700ms", "--ttl", "800ms", "--turn-delay", "60ms"}, extra...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), nodeEnv+"=1", cluster.SecretEnv+"="+testSecret), env...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	dir := os.Getenv("TROUPE_CLUSTER_LOGS") // keep the members' stderr there, for debugging
	if dir == "" {
		dir = t.TempDir()
	}
	stderr, err := os.CreateTemp(dir, name+"-stderr")
	require.NoError(t, err)
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	m := &member{name: name, ev: ev, cmd: cmd, stdin: stdin, enc: json.NewEncoder(stdin),
		waiting: map[int64]chan cluster.Line{}, done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			var l cluster.Line
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			if l.Event == "ready" {
				once.Do(func() { close(ready) })
			}
			if l.Event != "" {
				ev.add(l)
				continue
			}
			m.mu.Lock()
			ch := m.waiting[l.Req]
			delete(m.waiting, l.Req)
			m.mu.Unlock()
			if ch != nil {
				ch <- l
			}
		}
		m.mu.Lock()
		for req, ch := range m.waiting {
			close(ch)
			delete(m.waiting, req)
		}
		m.mu.Unlock()
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		if !m.dead.Load() {
			_ = cmd.Wait()
		}
		<-m.done
		b, _ := os.ReadFile(stderr.Name())
		ours, theirs := raceReports(string(b))
		for _, r := range ours {
			t.Errorf("%s: a data race with troupe's code on the stack:\n%s", name, r)
		}
		if theirs > 0 {
			t.Logf("%s: %d data race report(s) entirely inside protoactor (its gossip state; see README)", name, theirs)
		}
		if t.Failed() {
			b, _ := os.ReadFile(stderr.Name())
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("%s stderr (tail):\n%s", name, b)
		}
	})
	select {
	case <-ready:
	case <-m.done:
		t.Fatalf("%s exited before it was ready", name)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s not ready", name)
	}
	return m
}

// do sends c and waits for the reply (ok false: the member died first).
func (m *member) do(c cluster.Command) (cluster.Line, bool) {
	c.Req = m.next.Add(1)
	ch := make(chan cluster.Line, 1)
	m.mu.Lock()
	m.waiting[c.Req] = ch
	err := m.enc.Encode(c)
	m.mu.Unlock()
	if err != nil {
		return cluster.Line{}, false
	}
	select {
	case l, ok := <-ch:
		return l, ok
	case <-m.done: // it died; a reply read before its stdout ended is still in ch
		select {
		case l, ok := <-ch:
			return l, ok
		default:
			return cluster.Line{}, false
		}
	}
}

// retire ends the member gracefully (its stdin closed), or kills it after 10 s.
func (m *member) retire(t testing.TB) {
	_ = m.stdin.Close()
	select {
	case <-m.done:
		_ = m.cmd.Wait()
		m.dead.Store(true)
	case <-time.After(10 * time.Second):
		m.kill(t)
	}
}

func (m *member) kill(t testing.TB) {
	m.dead.Store(true)
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGKILL))
	_ = m.cmd.Wait()
}

// waitMembers waits until every member's last published topology (its
// "members" events) has n members.
func waitMembers(t testing.TB, n int, ms ...*member) {
	t.Helper()
	for _, m := range ms {
		seen := m.ev.await(20*time.Second, func(all []cluster.Line) bool {
			for i := len(all) - 1; i >= 0; i-- {
				if all[i].Event == "members" && all[i].Node == m.name {
					return all[i].Members == n
				}
			}
			return false
		})
		require.True(t, seen, "%s never saw %d members", m.name, n)
	}
}

// restAfter waits for child's "rest" event after the event count from (its
// Activation ended a turn with nothing running or queued), then confirms with a
// probe through m; a busy answer waits for the next rest. It reports whether
// the child came to rest within timeout.
func restAfter(t testing.TB, m *member, ev *events, child string, from int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		ok := ev.await(time.Until(deadline), func(all []cluster.Line) bool {
			for _, l := range all[min(from, len(all)):] {
				if l.Event == "rest" && l.ID == child {
					return true
				}
			}
			return false
		})
		if !ok {
			return false
		}
		from = len(ev.snapshot())
		l, alive := m.do(cluster.Command{Op: "probe", ID: child})
		if !assert.True(t, alive, "%s died", m.name) || !assert.Empty(t, l.Code, l.Message) {
			return false
		}
		if !l.Running && l.Queued == 0 {
			return true
		}
	}
}

// sent is one Start or Followup the driver sent: its content (unique), when it
// was sent and answered, and the answer.
type sent struct {
	child, content string
	call, ret      int64 // ret 0: no answer (the member died)
	ack            cluster.Line
}

// TestClusterFailover is the multi-process cluster suite: 3 troupe-node
// processes over one PostgreSQL, 10 parents and 100 children started from every
// node, a seeded schedule of followups and interrupts sent from random nodes, one
// node SIGKILLed mid-schedule (in a round of bursts, so that queues are deep)
// and, a round later, a fresh member joining mid-burst (so that children move
// while their old Activations still run turns). Oracles (failoverSuite's): every
// child is reachable again within 2 s of the kill; no acknowledged followup is
// lost (each is in the store's inbox and its turn ended or was logged aborted);
// each message accepted once; per-child FIFO (porcupine's FIFO model over the
// acknowledgements and the turns' starts); at most one live Activation per
// session (activation epochs unique per session, the store's epoch gauge at
// least every epoch seen, the store's log serial: no turn starts before the
// previous one ended or was logged aborted, no end of a turn that is not open).
func TestClusterFailover(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TROUPE_CLUSTER_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = v
	}
	failoverSuite(t, seed, "")
}

// The multi-process suite's named oracles (the mutation check counts a planted
// run as caught only when one of them fires).
const (
	oracleReach = mutation.ClusterReach
	oracleOne   = mutation.ClusterOneActivation
	oracleLoss  = mutation.ClusterNoLoss
	oracleOnce  = mutation.ClusterOnce
	oracleFIFO  = mutation.ClusterFIFO
)

// failoverSuite is TestClusterFailover's body for seed; planted, if not empty,
// is planted in every member process (cluster.PlantEnv; troupe_mutation builds).
func failoverSuite(t testing.TB, seed uint64, planted string) {
	dsn := pgtest.Schema(t)
	t.Logf("seed %d (TROUPE_CLUSTER_SEED=%d to replay)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 19))
	var env []string
	if planted != "" {
		env = []string{plantEnv + "=" + planted}
	}
	ev := &events{}
	name := fmt.Sprintf("suite%d", seed%1_000_000)
	members := make([]*member, 3)
	for i := range members { // one after another: startMember may fail the test, from this goroutine only
		members[i] = startMemberEnv(t, env, fmt.Sprintf("n%d", i), name, dsn, ev)
	}
	waitMembers(t, 3, members...)

	const children, parents, rounds = 100, 10, 6
	child := func(i int) string { return fmt.Sprintf("c%03d", i) }
	parent := func(i int) string { return fmt.Sprintf("p%d", i%parents) }
	var recMu sync.Mutex // guards record: the driver's record
	record := map[string][]*sent{}
	where := map[string]string{} // child → member that last answered for it
	creds := map[string]string{} // child → its parent's credential (the start's reply)
	send := func(m *member, i int, op, content string) *sent {
		s := &sent{child: child(i), content: content, call: time.Now().UnixNano()}
		recMu.Lock()
		cred := creds[child(i)]
		recMu.Unlock()
		l, ok := m.do(cluster.Command{Op: op, ID: child(i), Sender: parent(i), Cred: cred, Content: content, TimeoutMS: 8000})
		if ok {
			s.ret, s.ack = time.Now().UnixNano(), l
		}
		recMu.Lock()
		if op == "start" && ok && l.Code == "" {
			creds[s.child] = l.Cred
		}
		if op != "interrupt" {
			record[s.child] = append(record[s.child], s)
		}
		if ok && l.Code == "" {
			where[s.child] = l.Where
		}
		recMu.Unlock()
		return s
	}
	// Starts, from every node.
	var wg sync.WaitGroup
	for i := range children {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := send(members[i%3], i, "start", fmt.Sprintf("%s/start", child(i)))
			assert.Empty(t, s.ack.Code, "start %s: %s", child(i), s.ack.Message)
		}()
	}
	wg.Wait()
	require.False(t, t.Failed(), "a start failed")

	// The schedule: per round, per child, a followup (or, 1 in 8, an interrupt)
	// from a random live node; one node is SIGKILLed in the middle of round
	// killAt, while turns run and followups are in flight (those sent through the
	// victim get no answer: unacknowledged, they may or may not have been
	// accepted, and the FIFO check takes them either way).
	type step struct {
		node      int
		interrupt bool
	}
	// killAt's followups are bursts of burst followups each, sent one after
	// another, so that the victim dies while queues are deep. joinAt's are streams,
	// one followup after another from the round's start until burst more after
	// the round's pause ended (at most maxStream): a newcomer joins in the dead
	// victim's place, then a survivor is paused (SIGSTOP) with turns running,
	// until the others have dropped it and its children have moved, and resumed
	// (SIGCONT): its Activations are stale but live, and their turns end.
	const burst, maxStream = 4, 80
	resumed := make(chan struct{})
	killAt, victim := 2+rng.IntN(rounds-3), rng.IntN(3)
	joinAt := killAt + 1
	plan := make([][]step, rounds)
	for r := range plan {
		plan[r] = make([]step, children)
		for i := range plan[r] {
			n := rng.IntN(3)
			for r == killAt+1 && n == victim { // the newcomer starts mid-round
				n = rng.IntN(3)
			}
			plan[r][i] = step{node: n, interrupt: rng.IntN(8) == 0}
		}
	}
	var killedAt time.Time
	var onVictim []string
	kill := func() {
		recMu.Lock()
		for c, w := range where {
			if w == members[victim].name {
				onVictim = append(onVictim, c)
			}
		}
		recMu.Unlock()
		killedAt = time.Now()
		members[victim].kill(t)
		t.Logf("SIGKILLed %s mid-round (%d children lived there)", members[victim].name, len(onVictim))
	}
	for r := range rounds {
		answered := make(chan struct{}, children)
		for i := range children {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { answered <- struct{}{} }()
				st := plan[r][i]
				m := members[st.node]
				if st.interrupt {
					send(m, i, "interrupt", "")
					return
				}
				switch r {
				case killAt:
					for k := range burst {
						send(m, i, "followup", fmt.Sprintf("%s/r%d.%d", child(i), r, k))
					}
				case joinAt:
					after := -1 // followups sent since the newcomer was up
					for k := 0; k < maxStream && after < burst; k++ {
						send(m, i, "followup", fmt.Sprintf("%s/r%d.%d", child(i), r, k))
						select {
						case <-resumed:
							after++
						default:
						}
					}
				default:
					send(m, i, "followup", fmt.Sprintf("%s/r%d", child(i), r))
				}
			}()
		}
		if r == joinAt {
			dead := members[victim].name
			members[victim] = startMemberEnv(t, env, "n3", name, dsn, ev)
			t.Logf("n3 joined mid-round, in the dead %s's place", dead)
			waitMembers(t, 3, members...)
			paused, others := members[(victim+1)%3], []*member{members[victim], members[(victim+2)%3]}
			t.Cleanup(func() { _ = paused.cmd.Process.Signal(syscall.SIGCONT) }) // never leave it stopped
			require.NoError(t, paused.cmd.Process.Signal(syscall.SIGSTOP))
			waitMembers(t, 2, others...)
			// Its children answer from the others now (activated there at a new epoch).
			recMu.Lock()
			var moved []int
			for i := range children {
				if where[child(i)] == paused.name {
					moved = append(moved, i)
				}
			}
			recMu.Unlock()
			var pw sync.WaitGroup
			for k, i := range moved {
				pw.Add(1)
				go func() {
					defer pw.Done()
					l, ok := others[k%2].do(cluster.Command{Op: "probe", ID: child(i), TimeoutMS: 8000})
					assert.True(t, ok && l.Code == "", "probe %s while %s is paused: %s", child(i), paused.name, l.Message)
				}()
			}
			pw.Wait()
			require.NoError(t, paused.cmd.Process.Signal(syscall.SIGCONT))
			close(resumed)
			t.Logf("%s paused until %d of its children answered from the others, then resumed", paused.name, len(moved))
		}
		if r == killAt {
			for range children / 3 {
				<-answered
			}
			kill()
			// Every child that lived there is reachable within 2 s of the kill.
			reach := make([]time.Duration, len(onVictim))
			var rw sync.WaitGroup
			for k, c := range onVictim {
				rw.Add(1)
				go func() {
					defer rw.Done()
					m := members[(victim+1+k%2)%3]
					l, ok := m.do(cluster.Command{Op: "probe", ID: c, TimeoutMS: 5000})
					reach[k] = time.Since(killedAt)
					if !assert.True(t, ok) || !assert.Empty(t, l.Code, "probe %s: %s", c, l.Message) {
						reach[k] = time.Hour // unreachable: fails the bound below too
					}
				}()
			}
			rw.Wait()
			var worst time.Duration
			for _, d := range reach {
				worst = max(worst, d)
			}
			t.Logf("failover: every child of %s reachable again %v after the kill", members[victim].name, worst)
			// Not fatal: the later oracles still run (a loaded machine can stretch
			// this bound, and a mutation run must still see what they see).
			assert.LessOrEqual(oracleReach.TB(t), worst, 2*time.Second, "a child was unreachable for more than 2 s after its node died")
		}
		wg.Wait()
		if r == joinAt { // the resumed member is blocked by the others (protoactor): retire and replace it
			i := (victim + 1) % 3
			members[i].retire(t)
			members[i] = startMemberEnv(t, env, "n4", name, dsn, ev)
			waitMembers(t, 3, members...)
		}
	}
	// A last waking followup unparks interrupted queues; then wait for quiet.
	survivors := []*member{members[(victim+1)%3], members[(victim+2)%3]}
	var restless atomic.Int32 // children whose final followup or rest failed
	for i := range children {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from := len(ev.snapshot()) // a rest before the final followup is not the final rest
			s := send(survivors[i%2], i, "followup", child(i)+"/final")
			if !assert.Empty(t, s.ack.Code, "final followup %s: %s", child(i), s.ack.Message) {
				restless.Add(1)
				return
			}
			if !assert.True(t, restAfter(t, survivors[i%2], ev, child(i), from, 60*time.Second), "%s never came to rest", child(i)) {
				restless.Add(1)
			}
		}()
	}
	wg.Wait()
	require.Zero(t, restless.Load(), "a child did not come to rest")

	// The oracles, from the store.
	store, err := postgres.Open(context.Background(), dsn)
	require.NoError(t, err)
	defer store.Close()
	all := ev.snapshot()
	epochsSeen := map[string]map[uint64]string{}
	turnAt := map[string]int64{} // inbox id → the turn event's time
	for _, l := range all {
		switch l.Event {
		case "activated":
			if epochsSeen[l.ID] == nil {
				epochsSeen[l.ID] = map[uint64]string{}
			}
			prev, dup := epochsSeen[l.ID][l.Epoch]
			require.False(oracleOne.TB(t), dup, "%s activated at epoch %d on %s and on %s", l.ID, l.Epoch, prev, l.Node)
			epochsSeen[l.ID][l.Epoch] = l.Node
		case "turn":
			turnAt[l.InboxID] = l.AtNS
		}
	}
	end := time.Now().UnixNano()
	var acked, lostNone, aborted int
	// Two passes over the children: first the oracles of the store's own
	// structure (one live Activation, each message accepted once) for every
	// child, then the ones of what the clients were told (no acknowledged message
	// lost, FIFO). A stale Activation's writes can also lose a message: checked
	// child by child in one pass, such a loss in an early child would stop the
	// suite before a later child's serial-log check could name the cause.
	type childView struct {
		c      string
		inbox  map[string]session.InboxMessage
		byText map[string]session.InboxMessage
		ended  map[string]bool
		order  []string
	}
	views := make([]childView, 0, children)
	for i := range children {
		c := child(i)
		snap, err := store.Load(context.Background(), c)
		require.NoError(t, err)
		for e := range epochsSeen[c] {
			require.GreaterOrEqual(oracleOne.TB(t), snap.Header.Epoch, e, "%s: the store's epoch gauge is behind an activation", c)
		}
		inbox := map[string]session.InboxMessage{}
		byText := map[string]session.InboxMessage{}
		for _, m := range snap.Inbox {
			inbox[m.ID] = m
			prev, twice := byText[m.Content[0].Text]
			require.False(oracleOnce.TB(t), twice, "%s: %q accepted twice (seq %d and %d)", c, m.Content[0].Text, prev.Seq, m.Seq)
			byText[m.Content[0].Text] = m
		}
		// The log is serial: one turn open at a time, each message's turn once.
		open, startedOnce := "", map[string]bool{}
		ended := map[string]bool{}
		var order []string
		for _, e := range snap.Log {
			switch e.Kind {
			case session.EntryTurnStart:
				require.Empty(oracleOne.TB(t), open, "%s: turn of %s started while %s was open", c, e.InboxID, open)
				require.False(oracleOne.TB(t), startedOnce[e.InboxID], "%s: %s started twice", c, e.InboxID)
				open, startedOnce[e.InboxID] = e.InboxID, true
				order = append(order, e.InboxID)
			case session.EntryTurnEnd:
				require.Equal(oracleOne.TB(t), open, e.InboxID, "%s: an end for a turn that is not open", c)
				open, ended[e.InboxID] = "", true
			case session.EntryTurnAborted:
				if open == e.InboxID {
					open = ""
				}
				ended[e.InboxID] = true
				aborted++
			}
		}
		require.Empty(t, open, "%s: a turn is still open after quiescence", c)
		views = append(views, childView{c: c, inbox: inbox, byText: byText, ended: ended, order: order})
	}
	for _, v := range views {
		c, inbox, byText, ended, order := v.c, v.inbox, v.byText, v.ended, v.order
		// No acknowledged message lost: in the inbox, and its turn ran or was
		// logged aborted.
		recMu.Lock()
		sends := record[c]
		recMu.Unlock()
		var ops []porcupine.Operation
		for k, s := range sends {
			m, in := byText[s.content]
			if s.ret != 0 && s.ack.Code == "" {
				acked++
				require.True(oracleLoss.TB(t), in, "%s: acknowledged %q is not in the store", c, s.content)
				require.Equal(oracleLoss.TB(t), s.ack.InboxID, m.ID, "%s: acknowledged %q: another inbox id", c, s.content)
				require.True(oracleLoss.TB(t), ended[m.ID], "%s: acknowledged %q never ran", c, s.content)
				lostNone++
			}
			if !in {
				continue // refused or never accepted: not in the FIFO
			}
			ret := s.ret
			if ret == 0 {
				ret = end
			}
			ops = append(ops, porcupine.Operation{ClientId: k, Input: harness.FIFOOp{Session: c, Kind: harness.Enqueue,
				Text: s.content, Seq: m.Seq}, Call: s.call, Output: harness.FIFOOp{}, Return: ret})
		}
		enqueued := map[string]int64{}
		for _, s := range sends {
			enqueued[s.content] = s.call
		}
		var prev int64
		ats := make([]int64, len(order))
		for k, id := range order {
			text := inbox[id].Content[0].Text
			at, seen := turnAt[id]
			if !seen {
				// SIGKILL landed between the turn's start in the store and its
				// event: place it just after the previous turn (and its own send).
				at = max(prev+1, enqueued[text]+1)
			}
			prev, ats[k] = at, at
		}
		// A turn's event is an upper bound on its start (the store write comes
		// first), and the log is serial: a start is also before the next one's.
		// A member paused between the two (SIGSTOP) emits a late event.
		for k := len(ats) - 2; k >= 0; k-- {
			ats[k] = min(ats[k], ats[k+1]-1)
		}
		for k, id := range order {
			ops = append(ops, porcupine.Operation{ClientId: len(sends) + 1, Input: harness.FIFOOp{Session: c,
				Kind: harness.Dequeue, Text: inbox[id].Content[0].Text}, Call: ats[k], Output: harness.FIFOOp{}, Return: ats[k]})
		}
		require.NoError(oracleFIFO.TB(t), harness.CheckFIFO(c, ops))
	}
	t.Logf("%d acknowledged messages, all durable and run (%d turns logged aborted by the kill); %d activations",
		acked, aborted, func() (n int) {
			for _, es := range epochsSeen {
				n += len(es)
			}
			return
		}())
	require.Equal(t, acked, lostNone)
	require.Greater(t, acked, children*rounds/2, "the schedule acknowledged too little to mean anything")
}

// raceReports splits a race-enabled process's stderr into its race reports:
// those with a frame of this module's code (returned) and those entirely in
// libraries (counted).
func raceReports(stderr string) (ours []string, theirs int) {
	const head = "WARNING: DATA RACE"
	parts := strings.Split(stderr, head)
	for _, p := range parts[1:] {
		report, _, _ := strings.Cut(p, "==================")
		if topFrameOurs(report) {
			ours = append(ours, head+report)
			continue
		}
		theirs++
	}
	return ours, theirs
}

// topFrameOurs: the racing access itself (the first frame under a "Read at",
// "Write at" or "Previous ..." line) is in this module's code.
func topFrameOurs(report string) bool {
	lines := strings.Split(report, "\n")
	for i, l := range lines {
		if (strings.Contains(l, " at 0x") || strings.HasPrefix(strings.TrimSpace(l), "Previous")) && i+1 < len(lines) {
			f := strings.TrimSpace(lines[i+1])
			if strings.HasPrefix(f, "github.com/troupe-rt/troupe/") {
				return true
			}
		}
	}
	return false
}
