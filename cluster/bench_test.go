package cluster_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/cluster"
	"github.com/troupe-rt/troupe/session/postgres/pgtest"
)

// benchCluster starts n members over a fresh schema and 30 children spread by
// the cluster; it returns the members and each child's home member index.
func benchCluster(b *testing.B, n int) ([]*member, []string, map[string]int, map[string]string) {
	b.Helper()
	dsn := pgtest.Schema(b)
	ev := &events{}
	name := fmt.Sprintf("bench%d-%d", n, time.Now().UnixNano()%1_000_000)
	ms := make([]*member, n)
	for i := range ms {
		ms[i] = startMember(b, fmt.Sprintf("b%d", i), name, dsn, ev, "--turn-delay", "1ms")
	}
	waitMembers(b, n, ms...)
	byName := map[string]int{}
	for i, m := range ms {
		byName[m.name] = i
	}
	children := make([]string, 30)
	home := map[string]int{}
	creds := map[string]string{} // child → the parent's credential (the start's reply)
	for i := range children {
		children[i] = fmt.Sprintf("bc%02d", i)
		l, ok := ms[i%n].do(cluster.Command{Op: "start", ID: children[i], Sender: "p", Content: "start"})
		require.True(b, ok)
		require.Empty(b, l.Code, l.Message)
		home[children[i]] = byName[l.Where]
		creds[children[i]] = l.Cred
	}
	return ms, children, home, creds
}

// BenchmarkClusterFollowups: acknowledged (durable) followups per second through
// 30 children, 30 concurrent senders, sent through every member in turn; one
// member against three in the same run.
func BenchmarkClusterFollowups(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			ms, children, _, creds := benchCluster(b, n)
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := range children {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := next.Add(1); k <= int64(b.N); k = next.Add(1) {
						l, ok := ms[int(k)%n].do(cluster.Command{Op: "followup", ID: children[w], Sender: "p", Cred: creds[children[w]],
							Content: fmt.Sprintf("f%d", k)})
						if !ok || l.Code != "" {
							b.Errorf("followup: %v %s", ok, l.Message)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "followups/s")
		})
	}
}

// BenchmarkClusterFollowupLatency: one followup at a time to a child, sent
// through the member it lives on (same-node) or through another (cross-node).
func BenchmarkClusterFollowupLatency(b *testing.B) {
	ms, children, home, creds := benchCluster(b, 3)
	for _, cross := range []bool{false, true} {
		b.Run(map[bool]string{false: "same-node", true: "cross-node"}[cross], func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				c := children[i%len(children)]
				via := home[c]
				if cross {
					via = (via + 1) % 3
				}
				l, ok := ms[via].do(cluster.Command{Op: "followup", ID: c, Sender: "p", Cred: creds[c], Content: fmt.Sprintf("l%d", i)})
				if !ok || l.Code != "" {
					b.Fatalf("followup: %v %s", ok, l.Message)
				}
			}
		})
	}
}
