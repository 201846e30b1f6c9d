package cluster

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"strings"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// secretHeader carries the shared secret on every gRPC call between members.
const secretHeader = "troupe-cluster-secret"

// AllowedTypes is the allow-list of message type names a member accepts in a
// frame: troupe's cluster messages and the protoactor cluster protocol's own
// (gossip, activation, identity handover, watch). Everything else — actor.Stop,
// actor.PoisonPill, an unknown or forged name — ends the stream that carried it.
var AllowedTypes = map[string]bool{
	"troupe.cluster.v1.Start":     true,
	"troupe.cluster.v1.Followup":  true,
	"troupe.cluster.v1.Interrupt": true,
	"troupe.cluster.v1.Probe":     true,
	"troupe.cluster.v1.Notice":    true,
	"troupe.cluster.v1.Ack":       true,
	// protoactor's cluster protocol.
	"cluster.GossipRequest":               true,
	"cluster.GossipResponse":              true,
	"cluster.GossipState":                 true,
	"cluster.ActivationRequest":           true,
	"cluster.ActivationResponse":          true,
	"cluster.ActivationTerminated":        true,
	"cluster.IdentityHandover":            true,
	"cluster.IdentityHandoverAck":         true,
	"cluster.ClusterTopology":             true,
	"cluster.ClusterIdentity":             true,
	"cluster.GrainRequest":                true,
	"cluster.GrainResponse":               true,
	"cluster.GrainErrorResponse":          true,
	"cluster.ClusterTopologyNotification": true,
	"remote.ActorPidRequest":              true,
	"remote.ActorPidResponse":             true,
	"actor.Terminated":                    true,
	"actor.Watch":                         true,
	"actor.Unwatch":                       true,
}

// Guard is the security layer of a member's remote endpoint: a recovering,
// authenticating, allow-listing interceptor on the server and the secret on the
// client. Refusals are logged and counted; they never stop the process.
type Guard struct {
	Secret []byte
	Allow  func(typeName string) bool // nil: AllowedTypes
	Logger *slog.Logger
	// Refused is called once per refused stream or call, with a stable reason
	// ("unauthenticated", "type", "malformed", "panic"); tests count them.
	Refused func(reason, detail string)
}

func (g *Guard) allow(name string) bool {
	if g.Allow != nil {
		return g.Allow(name)
	}
	return AllowedTypes[name]
}

func (g *Guard) refuse(reason, detail string) {
	if g.Logger != nil {
		g.Logger.Warn("cluster: refused a peer", "reason", reason, "detail", detail)
	}
	if g.Refused != nil {
		g.Refused(reason, detail)
	}
}

func (g *Guard) authenticated(ctx context.Context) bool {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return false
	}
	vs := md.Get(secretHeader)
	return len(vs) == 1 && len(g.Secret) > 0 && subtle.ConstantTimeCompare([]byte(vs[0]), g.Secret) == 1
}

// ServerOptions are the gRPC server options of a guarded member.
func (g *Guard) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainStreamInterceptor(g.stream),
		grpc.ChainUnaryInterceptor(g.unary),
	}
}

// DialOptions are the gRPC dial options that present the secret to a peer.
func (g *Guard) DialOptions() []grpc.DialOption {
	add := func(ctx context.Context) context.Context {
		return metadata.AppendToOutgoingContext(ctx, secretHeader, string(g.Secret))
	}
	return []grpc.DialOption{
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn,
			method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(add(ctx), desc, cc, method, opts...)
		}),
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
			cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(add(ctx), method, req, reply, cc, opts...)
		}),
	}
}

func (g *Guard) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	if !g.authenticated(ctx) {
		g.refuse("unauthenticated", info.FullMethod)
		return nil, status.Error(codes.Unauthenticated, "troupe cluster: unauthenticated peer")
	}
	defer func() {
		if v := recover(); v != nil {
			g.refuse("panic", fmt.Sprint(v))
			resp, err = nil, status.Error(codes.Internal, "troupe cluster: request failed")
		}
	}()
	return h(ctx, req)
}

func (g *Guard) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
	if !g.authenticated(ss.Context()) {
		g.refuse("unauthenticated", info.FullMethod)
		return status.Error(codes.Unauthenticated, "troupe cluster: unauthenticated peer")
	}
	defer func() {
		if v := recover(); v != nil {
			g.refuse("panic", fmt.Sprint(v))
			err = status.Error(codes.Internal, "troupe cluster: stream failed")
		}
	}()
	return h(srv, &checkedStream{ServerStream: ss, g: g})
}

// checkedStream vets every received frame before the endpoint reader sees it.
type checkedStream struct {
	grpc.ServerStream
	g *Guard
}

func (s *checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	rm, ok := m.(*remote.RemoteMessage)
	if !ok {
		return nil
	}
	if reason, detail := s.g.check(rm); reason != "" {
		s.g.refuse(reason, detail)
		return status.Error(codes.PermissionDenied, "troupe cluster: frame refused: "+reason)
	}
	return nil
}

// check returns the reason ("type", "malformed") a frame is refused, or "".
func (g *Guard) check(rm *remote.RemoteMessage) (reason, detail string) {
	b := rm.GetMessageBatch()
	if b == nil {
		return "", ""
	}
	for _, n := range b.TypeNames {
		if !g.allow(n) {
			return "type", bound(n)
		}
	}
	for _, e := range b.Envelopes {
		switch {
		case e.TypeId < 0 || int(e.TypeId) >= len(b.TypeNames):
			return "malformed", "type index out of range"
		case e.Target < 0 || int(e.Target) >= len(b.Targets):
			return "malformed", "target index out of range"
		case e.Sender < 0 || int(e.Sender) > len(b.Senders):
			return "malformed", "sender index out of range"
		case e.SerializerId != 0:
			return "malformed", "serializer other than protobuf"
		}
	}
	return "", ""
}

// bound keeps a peer's string printable in a log line.
func bound(s string) string {
	if len(s) > 128 {
		s = s[:128]
	}
	return strings.ToValidUTF8(s, "?")
}
