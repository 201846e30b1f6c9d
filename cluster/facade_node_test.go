package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/cluster"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/session/postgres"
	"github.com/troupe-rt/troupe/subagent"
)

// facadeFlag makes a re-executed member a facade member (runFacadeNode): a
// troupe.System that joined the cluster, its continuation manager placing
// children through it, the provider "spawn" over a turn runner that answers
// "done: <input>" (SlowPrefix inputs take --slow-turn-delay), and a top-level
// parent agent "p" whose surface prints each message it gets ("pnotice").
// A turn on "spawn:ID" first starts child ID of the turn's own agent through
// the manager (a nested child, placed by the cluster).
const facadeFlag = "--facade"

// facadeOut serialises Lines onto the member's stdout.
type facadeOut struct {
	mu sync.Mutex // guards w: the process's stdout, not runtime state
	w  io.Writer
}

func (o *facadeOut) put(l cluster.Line) {
	l.AtNS = time.Now().UnixNano()
	b, _ := json.Marshal(l)
	o.mu.Lock()
	defer o.mu.Unlock()
	_, _ = o.w.Write(append(b, '\n'))
}

type parentSurface struct {
	out  *facadeOut
	node string
}

func (s *parentSurface) put(verb string, m owner.Message) error {
	s.out.put(cluster.Line{Event: "pnotice", Node: s.node, ID: "p", Child: m.Source.SenderSessionID, Stop: verb,
		Content: strings.Join(append([]string{m.Text}, m.More...), "\n")})
	return nil
}
func (s *parentSurface) Inject(m owner.Message) error   { return s.put("inject", m) }
func (s *parentSurface) Steer(m owner.Message) error    { return s.put("steer", m) }
func (s *parentSurface) Followup(m owner.Message) error { return s.put("followup", m) }

// facadeRunner reports each turn ("fturn", with the member) and runs it.
type facadeRunner struct {
	out  *facadeOut
	node string
	echo subagent.TurnRunner
	mgr  func() *activation.Manager
}

func (r *facadeRunner) RunTurn(ctx context.Context, t subagent.Turn) (subagent.TurnResult, error) {
	in := t.Input.Text()
	r.out.put(cluster.Line{Event: "fturn", Node: r.node, ID: t.Session, Content: in})
	if id, ok := strings.CutPrefix(in, "spawn:"); ok {
		_, _, err := r.mgr().Start(ctx, activation.TurnAgent(ctx), "spawn", "grandchild", id, subagent.Request{Prompt: "grand " + id})
		l := cluster.Line{Event: "fspawn", Node: r.node, ID: t.Session, Child: id}
		if err != nil {
			l.Code, l.Message = string(messages.CodeOf(err)), err.Error()
		}
		r.out.put(l)
	}
	return r.echo.RunTurn(ctx, t)
}

func runFacadeNode(args []string) int {
	fs := flag.NewFlagSet("facade-node", flag.ContinueOnError)
	_ = fs.Bool("facade", true, "")
	name := fs.String("name", "node", "")
	clusterName := fs.String("cluster", "troupe", "")
	dsn := fs.String("dsn", "", "")
	delay := fs.Duration("turn-delay", 20*time.Millisecond, "")
	slow := fs.Duration("slow-turn-delay", 20*time.Second, "")
	reqTimeout := fs.Duration("request-timeout", 2*time.Second, "")
	ttl := fs.Duration("ttl", time.Second, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	out := &facadeOut{w: os.Stdout}
	ctx := context.Background()
	fatal := func(what string, err error) int { fmt.Fprintln(os.Stderr, "facade-node:", what, err); return 1 }
	store, err := postgres.Open(ctx, *dsn)
	if err != nil {
		return fatal("store", err)
	}
	defer store.Close()
	pool, err := pgxpool.New(ctx, *dsn)
	if err != nil {
		return fatal("pool", err)
	}
	defer pool.Close()
	sys, err := troupe.New(troupe.Config{Logger: logger})
	if err != nil {
		return fatal("system", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = sys.Shutdown(sctx)
	}()
	if _, err := sys.Jobs().MountAgents(ctx, sys.Scope()); err != nil {
		return fatal("agents", err)
	}
	node, err := sys.JoinCluster(cluster.Config{Name: *clusterName, NodeName: *name, Secret: []byte(os.Getenv(cluster.SecretEnv)),
		Store: store, Provider: &cluster.Provider{Pool: pool, Logger: logger, TTL: *ttl, Beat: *ttl / 5,
			OnTopology: func(members int) { out.put(cluster.Line{Event: "members", Node: *name, Members: members}) }},
		Logger: logger, RequestTimeout: *reqTimeout,
		Event: func(kind, id string, epoch uint64, inbox string) {
			out.put(cluster.Line{Event: kind, Node: *name, ID: id, Epoch: epoch, InboxID: inbox})
		}})
	if err != nil {
		return fatal("join", err)
	}
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), logger)
	if err != nil {
		return fatal("runtime", err)
	}
	var mgr *activation.Manager
	runner := &facadeRunner{out: out, node: *name, echo: cluster.SlowEchoRunner(*delay, *slow), mgr: func() *activation.Manager { return mgr }}
	if _, err := rt.RegisterProvider(ctx, sys.Scope(), subagent.NewSpawn(sys.Actors(), runner)); err != nil {
		return fatal("provider", err)
	}
	mgr, err = sys.StartContinuations(store, rt, runner, nil)
	if err != nil {
		return fatal("continuations", err)
	}
	var parent *owner.Agent
	out.put(cluster.Line{Event: "ready", Node: *name, Address: node.Address(), Members: node.Members()})
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var wg sync.WaitGroup
	defer wg.Wait()
	for sc.Scan() {
		var c cluster.Command
		if json.Unmarshal(sc.Bytes(), &c) != nil {
			continue
		}
		if c.Op == "quit" {
			return 0
		}
		if c.Op == "parent" { // serially: the later commands use it
			parent, err = sys.NewAgent(nil, "p", owner.Options{Surface: &parentSurface{out: out, node: *name}})
			if err == nil {
				err = sys.Jobs().RegisterAgent(ctx, parent)
			}
			l := cluster.Line{Req: c.Req, Node: *name}
			if err != nil {
				l.Code, l.Message = string(messages.CodeOf(err)), err.Error()
			}
			out.put(l)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			l := cluster.Line{Req: c.Req, Node: *name, ID: c.ID}
			var err error
			switch c.Op {
			case "members":
				l.Members = node.Members()
			case "fstart":
				_, l.InboxID, err = mgr.Start(cctx, parent, "spawn", "child", c.ID, subagent.Request{Prompt: c.Content})
			case "ffollowup":
				l.InboxID, err = mgr.Followup(cctx, parent, c.ID, c.Content, session.Source{Kind: "coordinator"})
			case "fdup": // one followup sent twice as the same message (a hedged retry)
				var second string
				l.InboxID, second, err = node.FollowupTwiceForTest(cctx, parent, "", c.ID, c.Content)
				if err == nil && second != l.InboxID {
					err = messages.Errorf(cluster.CodeInvalid, "the repeat was accepted as %s, the first as %s", second, l.InboxID)
				}
			case "finterrupt":
				err = mgr.Interrupt(cctx, c.ID, activation.Authority{Ancestor: parent})
			case "forge": // this guarded member says sender=c.Sender with a credential it made up
				_, err = node.Followup(cctx, cluster.Credential{Parent: c.Sender, Secret: c.Cred}, c.ID, c.Content)
			case "forge-interrupt":
				_, err = node.Interrupt(cctx, cluster.Credential{Parent: c.Sender, Secret: c.Cred}, c.ID)
			default:
				err = messages.Errorf(cluster.CodeInvalid, "unknown op %q", c.Op)
			}
			if err != nil {
				l.Code, l.Message = string(messages.CodeOf(err)), err.Error()
			}
			out.put(l)
		}()
	}
	return 0
}
