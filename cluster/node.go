package cluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/cluster/wire"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
)

// Config configures a member.
type Config struct {
	Name     string // the cluster's name (members of one cluster share it)
	NodeName string // this member's name in events and Acks
	Host     string // listen address (default 127.0.0.1; a non-loopback one needs TLS)
	Port     int    // listen port (0: any free port)
	// Secret is the shared secret every member presents; required.
	Secret []byte
	// TLS, if set, is the mutual-TLS configuration of both the listener and the
	// dialer (ClientAuth should be RequireAndVerifyClientCert).
	TLS      *tls.Config
	Store    session.Store            // the shared store (PostgreSQL for failover)
	Provider pcluster.ClusterProvider // membership (a *Provider, or consul/etcd/k8s)
	Runner   subagent.TurnRunner
	// RequestTimeout bounds one routed request (default 2 s); StoreTimeout one
	// store call of a grain (default 5 s).
	RequestTimeout time.Duration
	StoreTimeout   time.Duration
	Logger         *slog.Logger
	// Event, if set, is told each Activation event ("activated", "turn" with the
	// inbox id whose turn started, "rest" with the inbox id of the turn that
	// ended with nothing running or queued after it, "stale") with the session
	// and epoch; it must not block.
	Event func(kind, session string, epoch uint64, inbox string)
	// Refused, if set, is told each refused peer (Guard.Refused).
	Refused func(reason, detail string)
	// Notice, if set, is handed each settlement notice of a child whose parent is
	// a top-level agent of this member (the parent's surface); a retried notice
	// may come twice with the same ID. It must not block. Unset, this member's
	// endpoint refuses notices (CodeNotFound) and the child's member retries.
	Notice func(Notice)
	// Local, if set, makes this a facade member (troupe.System.JoinCluster): its
	// children run on the member's continuation manager (Bind), not on Runner.
	Local *Local
}

// Node is one running member.
type Node struct {
	name         string
	store        session.Store
	runner       subagent.TurnRunner
	storeTimeout time.Duration
	reqTimeout   time.Duration
	eventf       func(kind, session string, epoch uint64, inbox string)
	system       *actor.ActorSystem
	cl           *pcluster.Cluster
	provider     pcluster.ClusterProvider
	notice       func(Notice)
	logger       *slog.Logger
	local        *Local
	proxies      *actor.PID
	// left is closed, and replaced, each time a member leaves the topology: the
	// calls in flight then retry at once (call), instead of waiting out the
	// attempt that went to the member that died.
	left    atomic.Pointer[chan struct{}]
	leftSub *eventstream.Subscription
	// key derives the credentials of this member's top-level parents' children.
	key [credentialBytes]byte
	// ctx ends at Shutdown: the notice deliveries in flight give up.
	ctx    context.Context
	cancel context.CancelFunc
}

func (n *Node) event(kind, id string, epoch uint64, inbox string) {
	if n.eventf != nil {
		n.eventf(kind, id, epoch, inbox)
	}
}

// Address is the member's host:port.
func (n *Node) Address() string { return n.system.Address() }

// ID is the member's id in the topology.
func (n *Node) ID() string { return n.system.ID }

// Members is the number of members in the topology the provider last published
// (-1 for a provider that does not say: protoactor's member list may not be read
// from outside its own goroutines).
func (n *Node) Members() int {
	if p, ok := n.provider.(interface{ Size() int }); ok {
		return p.Size()
	}
	return -1
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Start starts a member: the guarded remote endpoint, the cluster with the
// disthash lookup and the child kind. It returns once the member has joined
// (protoactor's StartMember holds about a second).
func Start(cfg Config) (*Node, error) {
	switch {
	case cfg.Store == nil || (cfg.Runner == nil && cfg.Local == nil) || cfg.Provider == nil:
		return nil, messages.Errorf(CodeConfig, "cluster: a store, a runner and a provider are required")
	case len(cfg.Secret) < 16:
		return nil, messages.Errorf(CodeConfig, "cluster: the shared secret must be at least 16 bytes")
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if !loopback(cfg.Host) && cfg.TLS == nil {
		return nil, messages.Errorf(CodeInsecureBind, "cluster: listening on %q needs TLS (Config.TLS)", cfg.Host)
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 2 * time.Second
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	n := &Node{name: cfg.NodeName, store: cfg.Store, runner: cfg.Runner, storeTimeout: cfg.StoreTimeout,
		reqTimeout: cfg.RequestTimeout, eventf: cfg.Event, provider: cfg.Provider, notice: cfg.Notice, logger: cfg.Logger,
		local: cfg.Local}
	_, _ = rand.Read(n.key[:])
	n.ctx, n.cancel = context.WithCancel(context.Background())
	g := &Guard{Secret: cfg.Secret, Logger: cfg.Logger, Refused: cfg.Refused}
	sopts, dopts := g.ServerOptions(), g.DialOptions()
	if cfg.TLS != nil {
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
		dopts = append(dopts, grpc.WithTransportCredentials(credentials.NewTLS(cfg.TLS)))
	} else {
		dopts = append(dopts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	n.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return cfg.Logger }))
	rc := remote.Configure(cfg.Host, cfg.Port, remote.WithServerOptions(sopts...), remote.WithDialOptions(dopts...))
	producer := func() actor.Actor { return &grain{n: n} }
	if cfg.Local != nil {
		producer = func() actor.Actor { return &facade{n: n} }
	}
	kind := pcluster.NewKind(Kind, actor.PropsFromProducer(producer))
	cc := pcluster.Configure(cfg.Name, cfg.Provider, disthash.New(), rc,
		pcluster.WithKinds(kind), pcluster.WithRequestTimeout(cfg.RequestTimeout))
	n.cl = pcluster.New(n.system, cc)
	// Subscribed after pcluster.New's own subscriber, which drops the left
	// members' cached PIDs: a retry made on the signal no longer resolves to them.
	first := make(chan struct{})
	n.left.Store(&first)
	n.leftSub = n.system.EventStream.Subscribe(func(evt any) {
		if t, ok := evt.(*pcluster.ClusterTopology); ok && len(t.Left) > 0 {
			n.memberLeft()
		}
	})
	n.proxies = n.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &proxies{n: n, agents: map[string]*owner.Agent{}}
	}))
	n.cl.StartMember()
	if _, err := n.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &endpoint{n: n} }), NoticeEndpoint); err != nil {
		n.cancel()
		n.cl.Shutdown(true)
		n.system.EventStream.Unsubscribe(n.leftSub)
		return nil, messages.Errorf(CodeConfig, "cluster: the notice endpoint: %v", err)
	}
	return n, nil
}

// Shutdown leaves the cluster gracefully (protoactor holds about two seconds);
// notice deliveries still retrying give up.
func (n *Node) Shutdown() {
	n.cancel()
	n.cl.Shutdown(true)
	n.system.EventStream.Unsubscribe(n.leftSub)
}

// memberLeft wakes the calls in flight (see left). It runs inside protoactor's
// topology update, under the member list's lock: it only closes a channel.
func (n *Node) memberLeft() {
	next := make(chan struct{})
	close(*n.left.Swap(&next))
}

// Parent is whom a Start speaks for: a top-level agent of this member (Kind "")
// or a continuable child living in the cluster (Kind session.ParentSubagent).
// The child's settlement notices go back to it: to this member's notice
// endpoint (Config.Notice), or through the cluster into the parent child's inbox.
type Parent struct {
	Session string
	Kind    string
}

// Start creates child id under parent and accepts its first prompt. It mints
// the parent's Credential for the child (only its hash goes to the child's
// member and the store); the caller keeps it: every Followup and Interrupt of
// the child must present it.
func (n *Node) Start(ctx context.Context, parent Parent, id, label, content string) (*wire.Ack, Credential, error) {
	cred, sum := mintCredential(parent.Session)
	msg := &wire.Start{SessionId: id, ParentSession: parent.Session, ParentKind: parent.Kind, Content: content,
		Label: label, MessageId: newID(), CredentialHash: sum}
	if parent.Kind == "" {
		msg.ParentNode = n.Address()
	}
	ack, err := n.call(ctx, id, msg)
	if err != nil {
		return ack, Credential{}, err
	}
	return ack, cred, nil
}

// Followup accepts content into child id's inbox as from cred's parent; a nil
// error means durable. A credential that is not the child's parent's is refused
// with CodeUnauthorized and nothing is accepted.
func (n *Node) Followup(ctx context.Context, cred Credential, id, content string) (*wire.Ack, error) {
	return n.call(ctx, id, &wire.Followup{SessionId: id, SenderSession: cred.Parent, Content: content,
		MessageId: newID(), Credential: cred.raw()})
}

// Interrupt cancels child id's running turn and parks its queue, as cred's
// parent (refused like Followup).
func (n *Node) Interrupt(ctx context.Context, cred Credential, id string) (*wire.Ack, error) {
	return n.call(ctx, id, &wire.Interrupt{SessionId: id, SenderSession: cred.Parent, Credential: cred.raw()})
}

// Probe activates child id if it is not live and reports its state.
func (n *Node) Probe(ctx context.Context, id string) (*wire.Ack, error) {
	return n.call(ctx, id, &wire.Probe{SessionId: id})
}

// call routes msg to the child's Activation, retrying while the child is
// unreachable or moved (a stale epoch) until ctx ends. Start and Followup carry
// a message id, so a retry of one that was accepted is answered, not accepted
// twice.
func (n *Node) call(ctx context.Context, id string, msg proto.Message) (*wire.Ack, error) {
	if id == "" {
		return nil, messages.Errorf(CodeInvalid, "cluster: empty session id")
	}
	// protoactor's disthash lookup waits a fixed 5 s on an owner that died before
	// the topology dropped it, so one attempt may hang past reqTimeout: a new
	// attempt starts every reqTimeout (hedged; the message id makes them one
	// message), and the first answer from any attempt wins. A member leaving the
	// topology starts a new attempt at once: the one in flight may be waiting on
	// the member that died, and the topology now routes elsewhere.
	const maxAttempts = 32
	type attempt struct {
		res any
		err error
	}
	results := make(chan attempt, maxAttempts) // every attempt's goroutine can always deliver
	launched := 0
	launch := func() {
		launched++
		go func() {
			res, err := n.cl.Request(id, Kind, msg, pcluster.WithTimeout(5*time.Second), pcluster.WithRetryCount(1))
			results <- attempt{res, err}
		}()
	}
	left := *n.left.Load()
	launch()
	next := time.NewTimer(n.reqTimeout)
	defer next.Stop()
	var last error
	for {
		select {
		case a := <-results:
			ack, ok := a.res.(*wire.Ack)
			switch {
			case a.err == nil && ok && ack.Code == "":
				return ack, nil
			case a.err == nil && ok && ack.Code != string(CodeStaleEpoch):
				return ack, messages.Errorf(messages.Code(ack.Code), "%s", ack.Message)
			case a.err == nil && !ok:
				last = fmt.Errorf("unexpected reply %T", a.res)
			case a.err != nil:
				last = a.err
			default:
				last = fmt.Errorf("%s", ack.Message)
			}
			// A failed or moved attempt: try again soon.
			next.Reset(20 * time.Millisecond)
		case <-next.C:
			if launched < maxAttempts {
				launch()
			}
			next.Reset(n.reqTimeout)
		case <-left:
			left = *n.left.Load()
			if launched < maxAttempts {
				launch()
			}
			next.Reset(n.reqTimeout)
		case <-ctx.Done():
			return nil, messages.Errorf(CodeUnavailable, "cluster: child %q unreachable: %v (last: %v)", bound(id), context.Cause(ctx), last)
		}
	}
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "m_" + hex.EncodeToString(b[:])
}
