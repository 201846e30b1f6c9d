package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session/postgres"
	"github.com/troupe-rt/troupe/subagent"
)

// SecretEnv names the environment variable holding the cluster's shared secret.
const SecretEnv = "TROUPE_CLUSTER_SECRET"

// Command is one line a node's driver writes on its stdin (RunNode).
type Command struct {
	Req     int64  `json:"req"`
	Op      string `json:"op"` // start, followup, interrupt, probe, members, quit
	ID      string `json:"id,omitempty"`
	Sender  string `json:"sender,omitempty"`
	Content string `json:"content,omitempty"`
	// Cred is the parent's credential secret for the child (a start's reply
	// carries it): followup and interrupt present it, as Sender.
	Cred string `json:"cred,omitempty"`
	// ParentKind is a start's parent kind: "" for a top-level parent on this
	// node, "subagent" for a parent that is a cluster child.
	ParentKind string `json:"parentKind,omitempty"`
	// TimeoutMS bounds the call (default 10 s).
	TimeoutMS int `json:"timeoutMs,omitempty"`
}

// Line is one line a node writes on its stdout: a reply to a Command (Req set)
// or an event (Event set).
type Line struct {
	Req     int64  `json:"req,omitempty"`
	Event   string `json:"event,omitempty"` // ready, members, activated, turn, rest, stale, refused, notice, notice-lost
	Node    string `json:"node,omitempty"`
	ID      string `json:"id,omitempty"`
	Epoch   uint64 `json:"epoch,omitempty"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	InboxID string `json:"inboxId,omitempty"`
	Ended   uint64 `json:"ended,omitempty"`
	Members int    `json:"members,omitempty"`
	Running bool   `json:"running,omitempty"`
	Queued  uint64 `json:"queued,omitempty"`
	Where   string `json:"where,omitempty"` // the member that answered (the child's node)
	Address string `json:"address,omitempty"`
	// Cred is a start's credential (its reply); Child, Stop and Content are a
	// notice event's child, stop reason and text (ID is its parent, InboxID its id).
	Cred    string `json:"cred,omitempty"`
	Child   string `json:"child,omitempty"`
	Stop    string `json:"stop,omitempty"`
	Content string `json:"content,omitempty"`
	AtNS    int64  `json:"atNs"`
}

// EchoRunner is the demo's turn runner: each turn answers "done: <input>" after
// Delay (a cancelled turn ends early, aborted). troupe runs no LLM.
func EchoRunner(delay time.Duration) subagent.TurnRunner { return SlowEchoRunner(delay, delay) }

// SlowPrefix makes a SlowEchoRunner turn take its slow delay.
const SlowPrefix = "slow:"

// SlowEchoRunner is EchoRunner whose turns on an input starting with SlowPrefix
// take slow instead of delay (tests kill a member in the middle of one).
func SlowEchoRunner(delay, slow time.Duration) subagent.TurnRunner {
	s := subagent.NewScripted()
	s.Match = func(t subagent.Turn) (subagent.Reply, bool) {
		d := delay
		if strings.HasPrefix(t.Input.Text(), SlowPrefix) {
			d = slow
		}
		return subagent.Reply{Text: "done: " + t.Input.Text(), Delay: d}, true
	}
	return turnsOnly{s}
}

// turnsOnly drops Scripted's record of turns (a node runs unboundedly many).
type turnsOnly struct{ s *subagent.Scripted }

func (r turnsOnly) RunTurn(ctx context.Context, t subagent.Turn) (subagent.TurnResult, error) {
	reply, _ := r.s.Match(t)
	one := subagent.NewScripted(reply)
	return one.RunTurn(ctx, t)
}

// RunNode is cmd/troupe-node: a member against the PostgreSQL at --dsn, driven by
// JSON Commands on stdin, answering with JSON Lines on stdout. It returns the
// process's exit status.
func RunNode(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("troupe-node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "node", "this member's name")
	clusterName := fs.String("cluster", "troupe", "the cluster's name")
	host := fs.String("host", "127.0.0.1", "listen address (loopback only without TLS)")
	port := fs.Int("port", 0, "listen port (0: any)")
	dsn := fs.String("dsn", os.Getenv("TROUPE_PG_DSN"), "PostgreSQL connection string")
	delay := fs.Duration("turn-delay", 20*time.Millisecond, "how long each demo turn takes")
	slow := fs.Duration("slow-turn-delay", 5*time.Second, `how long a turn on an input starting with "slow:" takes`)
	reqTimeout := fs.Duration("request-timeout", 2*time.Second, "one routed request's timeout (retried)")
	ttl := fs.Duration("ttl", time.Second, "a member whose heartbeat is older is dead")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	plantFromEnv() // troupe_mutation builds only: the multi-process suite's planted bug
	secret := os.Getenv(SecretEnv)
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	out := &lineWriter{w: bufio.NewWriter(stdout)}
	if *dsn == "" || secret == "" {
		fmt.Fprintln(stderr, "troupe-node: --dsn (or TROUPE_PG_DSN) and "+SecretEnv+" are required")
		return 2
	}
	ctx := context.Background()
	store, err := postgres.Open(ctx, *dsn)
	if err != nil {
		fmt.Fprintln(stderr, "troupe-node: store:", err)
		return 1
	}
	defer store.Close()
	pool, err := pgxpool.New(ctx, *dsn)
	if err != nil {
		fmt.Fprintln(stderr, "troupe-node: pool:", err)
		return 1
	}
	defer pool.Close()
	n, err := Start(Config{Name: *clusterName, NodeName: *name, Host: *host, Port: *port, Secret: []byte(secret),
		Store: store, Provider: &Provider{Pool: pool, Logger: logger, TTL: *ttl, Beat: *ttl / 5,
			OnTopology: func(members int) { out.put(Line{Event: "members", Node: *name, Members: members}) }},
		Runner: SlowEchoRunner(*delay, *slow),
		Logger: logger, RequestTimeout: *reqTimeout,
		Event: func(kind, id string, epoch uint64, inbox string) {
			out.put(Line{Event: kind, Node: *name, ID: id, Epoch: epoch, InboxID: inbox})
		},
		Refused: func(reason, detail string) {
			out.put(Line{Event: "refused", Node: *name, Code: reason, Message: detail})
		},
		Notice: func(nt Notice) {
			out.put(Line{Event: "notice", Node: *name, ID: nt.Parent, Child: nt.Child, InboxID: nt.ID,
				Stop: nt.StopReason, Content: nt.Content})
		}})
	if err != nil {
		fmt.Fprintln(stderr, "troupe-node:", err)
		return 1
	}
	out.put(Line{Event: "ready", Node: *name, Address: n.Address(), Members: n.Members()})
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	cmds := make(chan Command)
	go func() {
		defer close(cmds)
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			var c Command
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				out.put(Line{Code: string(CodeInvalid), Message: bound(err.Error())})
				continue
			}
			cmds <- c
		}
	}()
	var wg sync.WaitGroup
	defer func() { wg.Wait(); n.Shutdown() }()
	for {
		select {
		case <-sigs:
			return 0
		case c, ok := <-cmds:
			if !ok || c.Op == "quit" {
				return 0
			}
			wg.Add(1)
			go func() { defer wg.Done(); out.put(serve(n, *name, c)) }()
		}
	}
}

func serve(n *Node, name string, c Command) Line {
	timeout := 10 * time.Second
	if c.TimeoutMS > 0 {
		timeout = time.Duration(c.TimeoutMS) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	l := Line{Req: c.Req, Node: name, ID: c.ID}
	var err error
	var ack interface {
		GetEpoch() uint64
		GetInboxId() string
		GetTurnsEnded() uint64
		GetNode() string
		GetRunning() bool
		GetQueued() uint64
	}
	switch strings.ToLower(c.Op) {
	case "start":
		var cred Credential
		ack, cred, err = n.Start(ctx, Parent{Session: c.Sender, Kind: c.ParentKind}, c.ID, "demo", c.Content)
		l.Cred = cred.Secret
	case "followup":
		ack, err = n.Followup(ctx, Credential{Parent: c.Sender, Secret: c.Cred}, c.ID, c.Content)
	case "interrupt":
		ack, err = n.Interrupt(ctx, Credential{Parent: c.Sender, Secret: c.Cred}, c.ID)
	case "probe":
		ack, err = n.Probe(ctx, c.ID)
	case "members":
		l.Members = n.Members()
		return l
	default:
		l.Code, l.Message = string(CodeInvalid), "unknown op "+bound(c.Op)
		return l
	}
	if err != nil {
		l.Code, l.Message = string(messages.CodeOf(err)), bound(err.Error())
		return l
	}
	l.Epoch, l.InboxID, l.Ended, l.Where = ack.GetEpoch(), ack.GetInboxId(), ack.GetTurnsEnded(), ack.GetNode()
	l.Running, l.Queued = ack.GetRunning(), ack.GetQueued()
	return l
}

// lineWriter serialises Lines onto stdout (the process's one writer of it).
type lineWriter struct {
	mu sync.Mutex // guards w: the node's stdout, not runtime state
	w  *bufio.Writer
}

func (o *lineWriter) put(l Line) {
	l.AtNS = time.Now().UnixNano()
	b, _ := json.Marshal(l)
	o.mu.Lock()
	defer o.mu.Unlock()
	_, _ = o.w.Write(append(b, '\n'))
	_ = o.w.Flush()
}
