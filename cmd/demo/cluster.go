package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/troupe-rt/troupe/cluster"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/session/postgres"
)

// Stable codes of the cluster demo's own failures (printed on stderr).
const (
	CodeNoPostgres          messages.Code = "demo/no-postgres"          // TROUPE_PG_DSN is not set
	CodePostgresUnreachable messages.Code = "demo/postgres-unreachable" // TROUPE_PG_DSN does not answer
	CodeNodeFailed          messages.Code = "demo/node-failed"          // a node did not start or join
)

// nodeEnv makes the demo binary a troupe-node (cluster.RunNode): --cluster N
// re-executes the binary once per node, so every node is an OS process of its own.
const nodeEnv = "TROUPE_DEMO_NODE"

// pgStartCommand is the README's command that starts a PostgreSQL for the demo.
const pgStartCommand = `eval "$(.ci/postgres.sh)"`

// Bounds of the cluster demo (it waits for nothing longer).
const (
	clusterStepTimeout = 30 * time.Second // a node's readiness, the membership, the children's rest
	clusterCallTimeout = 8 * time.Second  // one start/followup/probe, hedged and retried by the node
	clusterQuitTimeout = 10 * time.Second // a node's graceful leave before it is killed
	clusterTurnDelay   = 250 * time.Millisecond
)

// clusterNode is one node process of the demo, driven through its stdin and
// stdout (cluster.Command and cluster.Line, one JSON object per line).
type clusterNode struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tailBuffer
	ready  chan cluster.Line // the ready event (buffered, once)
	exited chan struct{}     // closed once the process is reaped
	status error             // the process's Wait error (read after exited)

	mu      sync.Mutex // guards next, enc, waiting: the driver's record, not runtime state
	next    int64
	enc     *json.Encoder
	waiting map[int64]chan cluster.Line
	killed  bool
}

// tailBuffer keeps the last 4 KiB written to it (a node's stderr, shown when it fails).
type tailBuffer struct {
	mu sync.Mutex // guards b between the exec copier and the reader
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = append([]byte(nil), t.b[len(t.b)-4096:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.ToValidUTF8(string(bytes.TrimSpace(t.b)), "?")
}

// startNode starts the demo binary as node name. Its process dies with the
// demo's (Pdeathsig SIGKILL) and leaves when its stdin closes.
func startNode(name, clusterName, dsn, secret string) (*clusterNode, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "--name", name, "--cluster", clusterName, "--dsn", dsn,
		"--turn-delay", clusterTurnDelay.String(), "--ttl", "800ms", "--request-timeout", "700ms")
	cmd.Env = append(os.Environ(), nodeEnv+"=1", cluster.SecretEnv+"="+secret)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	n := &clusterNode{name: name, cmd: cmd, stderr: &tailBuffer{}, ready: make(chan cluster.Line, 1),
		exited: make(chan struct{}), waiting: map[int64]chan cluster.Line{}}
	cmd.Stderr = n.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if n.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	n.enc = json.NewEncoder(n.stdin)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go n.read(stdout)
	return n, nil
}

// read dispatches the node's stdout: replies to their waiters, the ready event
// to ready; when stdout ends it reaps the process and closes every waiter.
func (n *clusterNode) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var l cluster.Line
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		if l.Event == "ready" {
			select {
			case n.ready <- l:
			default:
			}
		}
		if l.Event != "" || l.Req == 0 {
			continue
		}
		n.mu.Lock()
		ch := n.waiting[l.Req]
		delete(n.waiting, l.Req)
		n.mu.Unlock()
		if ch != nil {
			ch <- l
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	n.status = n.cmd.Wait()
	n.mu.Lock()
	for req, ch := range n.waiting {
		close(ch)
		delete(n.waiting, req)
	}
	n.enc = nil
	n.mu.Unlock()
	close(n.exited)
}

// do sends c and waits for its reply; ok is false when the node died first or
// ctx ended.
func (n *clusterNode) do(ctx context.Context, c cluster.Command) (cluster.Line, bool) {
	ch := make(chan cluster.Line, 1)
	n.mu.Lock()
	if n.enc == nil || n.killed {
		n.mu.Unlock()
		return cluster.Line{}, false
	}
	n.next++
	c.Req = n.next
	n.waiting[c.Req] = ch
	err := n.enc.Encode(c)
	if err != nil {
		delete(n.waiting, c.Req)
	}
	n.mu.Unlock()
	if err != nil {
		return cluster.Line{}, false
	}
	select {
	case l, ok := <-ch:
		return l, ok
	case <-ctx.Done():
		return cluster.Line{}, false
	}
}

// kill SIGKILLs the node and waits until it is reaped.
func (n *clusterNode) kill() {
	n.mu.Lock()
	n.killed = true
	n.mu.Unlock()
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
}

// quit asks the node to leave gracefully (quit, then its stdin closed) and kills
// it if it has not exited within clusterQuitTimeout.
func (n *clusterNode) quit() {
	n.mu.Lock()
	if n.enc != nil && !n.killed {
		_ = n.enc.Encode(cluster.Command{Op: "quit"})
	}
	n.mu.Unlock()
	_ = n.stdin.Close()
	select {
	case <-n.exited:
	case <-time.After(clusterQuitTimeout):
		n.kill()
	}
}

// clusterDemo is one run of --cluster N.
type clusterDemo struct {
	ctx    context.Context
	out    io.Writer
	nodes  []*clusterNode
	kept   int
	broken []string
}

func (d *clusterDemo) say(format string, args ...any) { fmt.Fprintf(d.out, format+"\n", args...) }

func (d *clusterDemo) promise(ok bool, what, format string, args ...any) {
	if ok {
		d.kept++
		d.say("  ✓ %s", what)
		return
	}
	detail := fmt.Sprintf(format, args...)
	d.broken = append(d.broken, what+": "+detail)
	d.say("  ✗ %s: %s", what, detail)
}

// demoSchema creates a schema of the run's own on the server and returns a DSN
// whose search_path is it, and the func that drops it.
func demoSchema(ctx context.Context, dsn string) (string, func(), error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	schema := "troupe_demo_" + hex.EncodeToString(b[:])
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(pctx, dsn)
	if err == nil {
		_, err = conn.Exec(pctx, `CREATE SCHEMA `+schema)
		conn.Close(context.Background())
	}
	if err != nil {
		return "", nil, messages.Errorf(CodePostgresUnreachable,
			"PostgreSQL at TROUPE_PG_DSN does not answer: %v; start one with: %s", err, pgStartCommand)
	}
	drop := func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(dctx, dsn); err == nil {
			_, _ = conn.Exec(dctx, `DROP SCHEMA `+schema+` CASCADE`)
			conn.Close(context.Background())
		}
	}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			drop()
			return "", nil, messages.Errorf(CodePostgresUnreachable, "TROUPE_PG_DSN: %v", err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String(), drop, nil
	}
	return dsn + " search_path=" + schema, drop, nil
}

// runCluster is --cluster N: N node processes (this binary re-executed) over the
// PostgreSQL at $TROUPE_PG_DSN, in a schema of the run's own (dropped at exit);
// parents start children from every node, followups cross nodes, the node that
// hosts the most children is SIGKILLed, and the survivors carry its children on.
// Every node process is ended on every exit path. It returns the exit status.
func runCluster(ctx context.Context, n int, stdout, stderr io.Writer) int {
	dsn := os.Getenv("TROUPE_PG_DSN")
	if dsn == "" {
		fmt.Fprintf(stderr, "demo: %s: --cluster needs PostgreSQL: TROUPE_PG_DSN is not set; start one with: %s\n",
			CodeNoPostgres, pgStartCommand)
		return 1
	}
	dsn, drop, err := demoSchema(ctx, dsn)
	if err != nil {
		fmt.Fprintf(stderr, "demo: %s: %v\n", messages.CodeOf(err), err)
		return 1
	}
	defer drop()
	d := &clusterDemo{ctx: ctx, out: stdout}
	defer func() { // every exit path: no node outlives the demo
		var wg sync.WaitGroup
		for _, nd := range d.nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if ctx.Err() != nil { // interrupted: no graceful leave
					nd.kill()
					return
				}
				nd.quit()
			}()
		}
		wg.Wait()
	}()
	err = d.play(n, dsn)
	if ctx.Err() != nil {
		fmt.Fprintf(stderr, "demo: interrupted (%s): every node was stopped\n", context.Cause(ctx))
		return exitInterrupted
	}
	if err != nil {
		fmt.Fprintf(stderr, "demo: %s: %v\n", messages.CodeOf(err), err)
		return 1
	}
	if len(d.broken) > 0 {
		for _, b := range d.broken {
			fmt.Fprintf(stderr, "demo: cluster: broken promise: %s\n", b)
		}
		return 1
	}
	d.say("cluster: %d promises kept", d.kept)
	return 0
}

// child is one continuable child of the demo, with what the driver saw of it.
type child struct {
	id, parent string
	via        int           // the parent's node (p_i sends through n_i)
	home       string        // the node that answered its start
	cred       string        // the parent's credential for it (the start's reply)
	acked      []string      // inbox ids of its acknowledged messages
	crossed    bool          // its parent's followup was answered by another node
	took       time.Duration // after the kill: how long its followup took to be answered
	moved      bool          // after the kill: answered from a survivor at a new epoch
}

func (d *clusterDemo) play(n int, dsn string) error {
	var sb [18]byte
	_, _ = rand.Read(sb[:])
	secret := hex.EncodeToString(sb[:])
	name := "demo-" + secret[:8]
	d.say("cluster: %d node processes over PostgreSQL (a schema of this run's own, dropped at exit)", n)
	for i := range n {
		nd, err := startNode(fmt.Sprintf("n%d", i), name, dsn, secret)
		if err != nil {
			return messages.Errorf(CodeNodeFailed, "starting node n%d: %v", i, err)
		}
		d.nodes = append(d.nodes, nd)
	}
	for _, nd := range d.nodes {
		select {
		case l := <-nd.ready:
			d.say("  %s ready at %s (pid %d)", nd.name, l.Address, nd.cmd.Process.Pid)
		case <-nd.exited:
			return messages.Errorf(CodeNodeFailed, "node %s exited before it was ready (%v): %s", nd.name, nd.status, nd.stderr)
		case <-time.After(clusterStepTimeout):
			return messages.Errorf(CodeNodeFailed, "node %s not ready after %v", nd.name, clusterStepTimeout)
		case <-d.ctx.Done():
			return d.ctx.Err()
		}
	}
	if err := d.waitMembers(n, d.nodes); err != nil {
		return err
	}
	d.say("  membership: every node sees %d members (heartbeat rows in PostgreSQL)", n)

	// Parents start children from their own node; disthash places each child.
	parents := n
	kids := make([]*child, 3*n)
	for j := range kids {
		kids[j] = &child{id: fmt.Sprintf("c%d", j), parent: fmt.Sprintf("p%d", j%parents), via: j % parents % n}
	}
	via := func(k *child) *clusterNode { return d.nodes[k.via] }
	d.say("start: %d parents (p_i sends through n_i) start %d children", parents, len(kids))
	if err := d.each(kids, func(k *child) (string, error) {
		l, err := d.call(via(k), cluster.Command{Op: "start", ID: k.id, Sender: k.parent, Content: "task " + k.id})
		if err != nil {
			return "", err
		}
		k.home, k.cred, k.acked = l.Where, l.Cred, append(k.acked, l.InboxID)
		return fmt.Sprintf("  %-3s parent %s via %s: lives on %s, epoch %d", k.id, k.parent, via(k).name, l.Where, l.Epoch), nil
	}); err != nil {
		return err
	}
	d.say("followups: each parent sends one to each of its children, through its own node")
	if err := d.each(kids, func(k *child) (string, error) {
		l, err := d.call(via(k), cluster.Command{Op: "followup", ID: k.id, Sender: k.parent, Cred: k.cred, Content: "more for " + k.id})
		if err != nil {
			return "", err
		}
		k.acked = append(k.acked, l.InboxID)
		k.crossed = l.Where != via(k).name
		return "", nil
	}); err != nil {
		return err
	}
	crossed := 0
	for _, k := range kids {
		if k.crossed {
			crossed++
		}
	}
	d.say("  %d of %d acknowledged (each durable in PostgreSQL before its answer); %d crossed nodes", len(kids), len(kids), crossed)

	// The victim: the node hosting the most children, killed while their turns run.
	hosted := map[string][]*child{}
	for _, k := range kids {
		hosted[k.home] = append(hosted[k.home], k)
	}
	victim := d.nodes[0]
	for _, nd := range d.nodes {
		if len(hosted[nd.name]) > len(hosted[victim.name]) {
			victim = nd
		}
	}
	var ids []string
	for _, k := range hosted[victim.name] {
		ids = append(ids, k.id)
	}
	d.say("SIGKILL %s (pid %d) mid-turn: it hosted %s", victim.name, victim.cmd.Process.Pid, strings.Join(ids, " "))
	killedAt := time.Now()
	victim.kill()

	survivors := slices.DeleteFunc(slices.Clone(d.nodes), func(nd *clusterNode) bool { return nd == victim })
	d.say("after the kill: each parent sends a followup through a surviving node")
	if err := d.each(kids, func(k *child) (string, error) {
		nd := via(k)
		if nd == victim {
			nd = survivors[k.via%len(survivors)]
		}
		l, err := d.call(nd, cluster.Command{Op: "followup", ID: k.id, Sender: k.parent, Cred: k.cred, Content: "after the kill, " + k.id})
		if err != nil {
			return "", err
		}
		k.acked = append(k.acked, l.InboxID)
		if k.home != victim.name {
			return "", nil
		}
		k.took, k.moved = time.Since(killedAt), l.Where != victim.name && l.Epoch >= 2
		return fmt.Sprintf("  %-3s was on %s: answered from %s at epoch %d, %v after the kill",
			k.id, victim.name, l.Where, l.Epoch, k.took.Round(time.Millisecond)), nil
	}); err != nil {
		return err
	}
	if err := d.waitRest(kids, survivors); err != nil {
		return err
	}
	return d.check(kids, victim.name, dsn)
}

// check reads every child's session from PostgreSQL and states the promises.
func (d *clusterDemo) check(kids []*child, victim string, dsn string) error {
	ctx, cancel := context.WithTimeout(d.ctx, clusterStepTimeout)
	defer cancel()
	store, err := postgres.Open(ctx, dsn)
	if err != nil {
		return messages.Errorf(CodePostgresUnreachable, "reading the sessions back: %v", err)
	}
	defer store.Close()
	var acked, aborted, lost int
	var notMoved []string
	var worst time.Duration
	for _, k := range kids {
		snap, err := store.Load(ctx, k.id)
		if err != nil {
			return messages.Errorf(CodePostgresUnreachable, "loading %s: %v", k.id, err)
		}
		ended := map[string]bool{}
		for _, e := range snap.Log {
			switch e.Kind {
			case session.EntryTurnEnd:
				ended[e.InboxID] = true
			case session.EntryTurnAborted:
				ended[e.InboxID] = true
				aborted++
			}
		}
		for _, id := range k.acked {
			acked++
			if !ended[id] {
				lost++
			}
		}
		if k.home == victim && !k.moved {
			notMoved = append(notMoved, k.id)
		}
		if k.home == victim {
			worst = max(worst, k.took)
		}
	}
	d.say("at rest: %d acknowledged messages; %d turns cut off by the kill were logged %s and not rerun",
		acked, aborted, session.EntryTurnAborted)
	d.say("promises:")
	d.promise(len(notMoved) == 0, fmt.Sprintf("every child of %s answered again from a survivor, at a new epoch (the last %v after the kill)",
		victim, worst.Round(time.Millisecond)), "not moved: %v", notMoved)
	d.promise(lost == 0, "no acknowledged message lost: each one's turn ended, or was logged aborted by the kill",
		"%d of %d acknowledged messages have no turn end", lost, acked)
	return nil
}

// call runs one command on nd; a refusal (an error code) is an error.
func (d *clusterDemo) call(nd *clusterNode, c cluster.Command) (cluster.Line, error) {
	c.TimeoutMS = int(clusterCallTimeout / time.Millisecond)
	l, ok := nd.do(d.ctx, c)
	switch {
	case d.ctx.Err() != nil:
		return l, d.ctx.Err()
	case !ok:
		return l, messages.Errorf(CodeNodeFailed, "node %s died during %s %s: %s", nd.name, c.Op, c.ID, nd.stderr)
	case l.Code != "":
		return l, messages.Errorf(messages.Code(l.Code), "%s %s via %s: %s", c.Op, c.ID, nd.name, l.Message)
	}
	return l, nil
}

// each runs f for every child concurrently and prints the lines it returns in
// the children's order.
func (d *clusterDemo) each(kids []*child, f func(*child) (string, error)) error {
	lines, errs := make([]string, len(kids)), make([]error, len(kids))
	var wg sync.WaitGroup
	for j, k := range kids {
		wg.Add(1)
		go func() { defer wg.Done(); lines[j], errs[j] = f(k) }()
	}
	wg.Wait()
	for j := range kids {
		if errs[j] != nil {
			return errs[j]
		}
		if lines[j] != "" {
			d.say("%s", lines[j])
		}
	}
	return nil
}

// waitMembers polls the nodes' membership views (another process's view: there
// is no event to wait on) until each sees want members.
func (d *clusterDemo) waitMembers(want int, nodes []*clusterNode) error {
	deadline := time.Now().Add(clusterStepTimeout)
	for _, nd := range nodes {
		for {
			l, err := d.call(nd, cluster.Command{Op: "members"})
			if err != nil {
				return err
			}
			if l.Members == want {
				break
			}
			if time.Now().After(deadline) {
				return messages.Errorf(CodeNodeFailed, "%s sees %d members, want %d", nd.name, l.Members, want)
			}
			if err := d.pause(50 * time.Millisecond); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitRest probes every child (through a survivor) until none runs a turn or
// has one queued.
func (d *clusterDemo) waitRest(kids []*child, survivors []*clusterNode) error {
	deadline := time.Now().Add(clusterStepTimeout)
	for j := 0; j < len(kids); {
		l, err := d.call(survivors[j%len(survivors)], cluster.Command{Op: "probe", ID: kids[j].id})
		if err != nil {
			return err
		}
		if !l.Running && l.Queued == 0 {
			j++
			continue
		}
		if time.Now().After(deadline) {
			return messages.Errorf(CodeNodeFailed, "%s still busy after %v", kids[j].id, clusterStepTimeout)
		}
		if err := d.pause(50 * time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

func (d *clusterDemo) pause(dur time.Duration) error {
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-d.ctx.Done():
		return d.ctx.Err()
	}
}
