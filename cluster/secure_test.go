package cluster_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/troupe-rt/troupe/cluster"
	"github.com/troupe-rt/troupe/cluster/wire"
)

const testSecret = "0123456789abcdef-test-secret"

// peer is a node in an OS process of its own (this test binary re-executed:
// protoactor's remote races with a second one in one process), reporting on its
// stdout what reached it: "refused REASON", "got TYPE".
type peer struct {
	addr  string
	lines chan string
	stdin io.WriteCloser
	cmd   *exec.Cmd
}

// servePeer starts a peer; mode is "guarded", "allow-all" (the Guard without its
// allow-list) or "bare" (no Guard at all).
func servePeer(t *testing.T, mode string) *peer {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), peerEnv+"="+mode)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &peer{lines: make(chan string, 64), stdin: stdin, cmd: cmd}
	sc := bufio.NewScanner(stdout)
	require.True(t, sc.Scan(), "the peer printed no address")
	p.addr = strings.TrimPrefix(sc.Text(), "addr ")
	go func() {
		defer close(p.lines)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
		for range p.lines {
		}
	})
	return p
}

// next returns the peer's next line (or fails after 5 s).
func (p *peer) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		require.True(t, ok, "the peer's output ended: it died")
		return l
	case <-time.After(5 * time.Second):
		t.Fatal("the peer said nothing")
		return ""
	}
}

// exit closes the peer's stdin and returns its exit error (nil: it was up and
// left normally).
func (p *peer) exit() error {
	_ = p.stdin.Close()
	return p.cmd.Wait()
}

// sendFrame opens a stream to addr (with the secret unless secret is ""), sends
// one RemoteMessage and returns how the stream ended (an error: refused).
func sendFrame(t *testing.T, addr, secret string, m *remote.RemoteMessage) error {
	t.Helper()
	conn, err := grpc.Dial(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if secret != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "troupe-cluster-secret", secret)
	}
	st, err := remote.NewRemotingClient(conn).Receive(ctx)
	if err != nil {
		return err
	}
	if err := st.Send(m); err != nil && err != io.EOF {
		return err
	}
	_, err = st.Recv()
	return err
}

// goodFrame sends one authenticated, allow-listed Probe to addr's "probe" actor.
func goodFrame(t *testing.T, addr string) {
	t.Helper()
	probe, err := proto.Marshal(&wire.Probe{SessionId: "s"})
	require.NoError(t, err)
	conn, err := grpc.Dial(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(),
		"troupe-cluster-secret", testSecret), 5*time.Second)
	defer cancel()
	st, err := remote.NewRemotingClient(conn).Receive(ctx)
	require.NoError(t, err)
	require.NoError(t, st.Send(batch(addr, "troupe.cluster.v1.Probe", probe, 0)))
	require.NoError(t, st.CloseSend())
	_, _ = st.Recv() // the server's end of the stream
}

func batch(addr string, typeName string, data []byte, target int32) *remote.RemoteMessage {
	return &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: &remote.MessageBatch{
		TypeNames: []string{typeName},
		Targets:   []*actor.PID{{Address: addr, Id: "probe"}},
		Envelopes: []*remote.MessageEnvelope{{TypeId: 0, MessageData: data, Target: target}},
	}}}
}

// TestGuardRefusesHostilePeers: an unauthenticated connection, a wrong secret, an
// unknown type name, actor.Stop addressed to a named actor and forged frames
// (indices out of range) are each refused — the stream ends with an error and the
// node reports the refusal — and undecodable bytes end their stream; the node
// then still delivers an authenticated, allow-listed message to the same actor
// (which never got a Stop) and leaves normally: it never crashed.
func TestGuardRefusesHostilePeers(t *testing.T) {
	p := servePeer(t, "guarded")
	addr := p.addr
	probe, err := proto.Marshal(&wire.Probe{SessionId: "s"})
	require.NoError(t, err)
	stop, err := proto.Marshal(&actor.Stop{})
	require.NoError(t, err)
	forgedType := batch(addr, "troupe.cluster.v1.Probe", probe, 0)
	forgedType.GetMessageBatch().Envelopes[0].TypeId = 3

	cases := []struct {
		name, secret, reason string
		frame                *remote.RemoteMessage
	}{
		{"unauthenticated", "", "unauthenticated", batch(addr, "troupe.cluster.v1.Probe", probe, 0)},
		{"wrong secret", "0123456789abcdef-not-the-secret", "unauthenticated", batch(addr, "troupe.cluster.v1.Probe", probe, 0)},
		{"unknown type", testSecret, "type", batch(addr, "evil.DoesNotExist", probe, 0)},
		{"actor.Stop to a named actor", testSecret, "type", batch(addr, "actor.Stop", stop, 0)},
		{"forged target index", testSecret, "malformed", batch(addr, "troupe.cluster.v1.Probe", probe, 7)},
		{"forged type index", testSecret, "malformed", forgedType},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Error(t, sendFrame(t, addr, c.secret, c.frame), "the hostile stream must be refused")
			require.Equal(t, "refused "+c.reason, p.next(t))
		})
	}
	require.Error(t, sendFrame(t, addr, testSecret, batch(addr, "troupe.cluster.v1.Probe", []byte{0xff, 0xff, 0xff}, 0)),
		"undecodable bytes end the stream")

	goodFrame(t, addr)
	require.Equal(t, "got troupe.cluster.v1.Probe", p.next(t), "the actor got the good frame, and no Stop before it")
	require.NoError(t, p.exit(), "the node left normally: it never crashed")
}

// TestGuardRecoversFromPanics: with the allow-list switched off, an unknown type
// name panics inside protoactor's endpoint reader; the Guard's recovering
// interceptor turns it into a refused stream and the node keeps serving.
func TestGuardRecoversFromPanics(t *testing.T) {
	p := servePeer(t, "allow-all")
	require.Error(t, sendFrame(t, p.addr, testSecret, batch(p.addr, "evil.DoesNotExist", []byte{1}, 0)))
	require.Equal(t, "refused panic", p.next(t))
	goodFrame(t, p.addr)
	require.Equal(t, "got troupe.cluster.v1.Probe", p.next(t), "the node still serves after the panic")
	require.NoError(t, p.exit(), "the node left normally: it never crashed")
}

// TestUnguardedRemoteCrashes is the baseline the guard exists for: a bare
// protoactor remote (no guard) in a process of its own dies on one frame with an
// unknown type name. It fails if the library ever stops crashing (then the guard's
// recovery is no longer what keeps a node up, and this test says so).
func TestUnguardedRemoteCrashes(t *testing.T) {
	p := servePeer(t, "bare")
	_ = sendFrame(t, p.addr, "", batch(p.addr, "evil.DoesNotExist", []byte{1}, 0))
	err := p.cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "the unguarded process must have died")
	require.NotEqual(t, 0, ee.ExitCode(), fmt.Sprint(err))
}

// TestAllowListNamesRealTypes: every allow-listed name is a registered protobuf
// message (a typo would silently refuse a protocol message), and the list holds
// none of the control messages a peer must not send.
func TestAllowListNamesRealTypes(t *testing.T) {
	for name := range cluster.AllowedTypes {
		_, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(name))
		require.NoError(t, err, name)
	}
	for _, banned := range []string{"actor.Stop", "actor.PoisonPill", "actor.Restart", "actor.Failure"} {
		require.False(t, cluster.AllowedTypes[banned], banned)
	}
}
