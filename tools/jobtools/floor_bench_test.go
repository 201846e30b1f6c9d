package jobtools_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// BenchmarkNoticeFloorRequestResponse is BenchmarkNoticeLatency's baseline, measured
// in the same run (the target: notice latency ≤ 2× it): protoactor's
// RequestFuture round trip to an echo actor, on a bare system configured as troupe
// configures its own — test/bench's BenchmarkFloorRequestResponse, here so that
// `go test -bench 'NoticeLatency|NoticeFloor' ./tools/jobtools/` has both.
func BenchmarkNoticeFloorRequestResponse(b *testing.B) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }),
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond))
	b.Cleanup(sys.Shutdown)
	root := sys.Root
	type ping struct{}
	echo := root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*ping); ok {
			c.Respond(m)
		}
	}))
	b.Cleanup(func() { _ = root.StopFuture(echo).Wait() })
	msg := &ping{}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := root.RequestFuture(echo, msg, 10*time.Second).Result(); err != nil {
			b.Fatal(err)
		}
	}
}
