package cluster_test

import (
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/troupe-rt/troupe/cluster"
)

// nodeEnv makes the test binary a troupe-node (the multi-process suite's members
// are this binary re-executed, one member per OS process); peerEnv makes it a
// bare remote endpoint for the security tests ("guarded", "allow-all", "bare").
const (
	nodeEnv = "TROUPE_CLUSTER_TEST_NODE"
	peerEnv = "TROUPE_CLUSTER_TEST_PEER"
)

func TestMain(m *testing.M) {
	if os.Getenv(nodeEnv) == "1" {
		if slices.Contains(os.Args[1:], facadeFlag) {
			os.Exit(runFacadeNode(os.Args[1:]))
		}
		os.Exit(cluster.RunNode(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	if mode := os.Getenv(peerEnv); mode != "" {
		os.Exit(runPeer(mode))
	}
	goleak.VerifyTestMain(m)
}

// runPeer serves one remote endpoint with an actor "probe", prints "addr ADDR",
// then one line per refusal and per message the actor gets, until stdin closes.
func runPeer(mode string) int {
	var mu sync.Mutex // guards stdout between the guard's and the actor's goroutines
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	var opts []remote.ConfigOption
	if mode != "bare" {
		g := &cluster.Guard{Secret: []byte(testSecret), Refused: func(reason, _ string) { say("refused %s", reason) }}
		if mode == "allow-all" {
			g.Allow = func(string) bool { return true }
		}
		opts = append(opts, remote.WithServerOptions(g.ServerOptions()...),
			remote.WithDialOptions(append(g.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...))
	}
	sys := actor.NewActorSystem()
	r := remote.NewRemote(sys, remote.Configure("127.0.0.1", 0, opts...))
	r.Start()
	_, err := sys.Root.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started, *actor.Stopped:
		case *actor.Stopping:
			say("got stop")
		default:
			say("got troupe.cluster.v1.%s", reflect.TypeOf(m).Elem().Name())
		}
	}), "probe")
	if err != nil {
		return 1
	}
	say("addr %s", sys.Address())
	_, _ = io.Copy(io.Discard, os.Stdin)
	r.Shutdown(true)
	return 0
}
