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
//
// The nodes=3 sub-benchmark also reports "x-vs-1-node": its followups/s over
// the nodes=1 sub-benchmark's of the same run (with -count k, the pairs
// interleave: 1, 3, 1, 3, …; each ratio is against the 1-node figure just before).
func BenchmarkClusterFollowups(b *testing.B) {
	var oneNode float64 // the nodes=1 figure of this run
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
			rate := float64(b.N) / time.Since(start).Seconds()
			b.ReportMetric(rate, "followups/s")
			if n == 1 {
				oneNode = rate
			} else if oneNode > 0 {
				b.ReportMetric(rate/oneNode, "x-vs-1-node")
			}
		})
	}
}

// BenchmarkClusterFollowupLatency: one followup at a time to a child, sent
// through the member it lives on (same-node) or through another (cross-node).
// cross-node also reports "x-vs-same-node": its ns/op over same-node's, same run.
func BenchmarkClusterFollowupLatency(b *testing.B) {
	ms, children, home, creds := benchCluster(b, 3)
	var same float64 // same-node's ns/op in this run
	for _, cross := range []bool{false, true} {
		b.Run(map[bool]string{false: "same-node", true: "cross-node"}[cross], func(b *testing.B) {
			b.ReportAllocs()
			start := time.Now()
			i := 0
			for ; b.Loop(); i++ {
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
			perOp := float64(time.Since(start).Nanoseconds()) / float64(max(i, 1))
			if !cross {
				same = perOp
			} else if same > 0 {
				b.ReportMetric(perOp/same, "x-vs-same-node")
			}
		})
	}
}

// BenchmarkClusterFailover: the failover time after a SIGKILL. 3 members, 30
// children; one op SIGKILLs the member that hosts children (each op the next
// member in turn) and lasts until every child it hosted has answered a probe
// through a survivor (the probe activates it there from PostgreSQL at a new
// epoch). Between ops, untimed, a fresh member replaces the dead one and the
// children's homes are re-read. ns/op is the kill-to-last-answer time;
// "children/op" is how many children the killed member hosted, and
// "ms-worst" the slowest op's time.
func BenchmarkClusterFailover(b *testing.B) {
	dsn := pgtest.Schema(b)
	ev := &events{}
	name := fmt.Sprintf("failover%d", time.Now().UnixNano()%1_000_000)
	ms := make([]*member, 3)
	started := 0
	spawn := func() *member {
		started++
		return startMember(b, fmt.Sprintf("f%d", started), name, dsn, ev, "--turn-delay", "1ms")
	}
	for i := range ms {
		ms[i] = spawn()
	}
	waitMembers(b, 3, ms...)
	children := make([]string, 30)
	for i := range children {
		children[i] = fmt.Sprintf("fc%02d", i)
		l, ok := ms[i%3].do(cluster.Command{Op: "start", ID: children[i], Sender: "p", Content: "start"})
		require.True(b, ok)
		require.Empty(b, l.Code, l.Message)
	}
	var hostedTotal int
	var worst time.Duration
	b.ResetTimer()
	for op := 0; op < b.N; op++ {
		b.StopTimer()
		// Where each child lives now (a probe answers from its Activation's member).
		homes := map[string][]string{}
		for i, c := range children {
			l, ok := ms[i%3].do(cluster.Command{Op: "probe", ID: c, TimeoutMS: 8000})
			require.True(b, ok)
			require.Empty(b, l.Code, l.Message)
			homes[l.Where] = append(homes[l.Where], c)
		}
		v := op % 3
		for k := 0; k < 3 && len(homes[ms[v].name]) == 0; k++ {
			v = (v + 1) % 3
		}
		victim, hosted := ms[v], homes[ms[v].name]
		require.NotEmpty(b, hosted, "no member hosts a child")
		survivors := []*member{ms[(v+1)%3], ms[(v+2)%3]}
		b.StartTimer()
		killedAt := time.Now()
		victim.kill(b)
		var wg sync.WaitGroup
		failed := make(chan string, len(hosted))
		for k, c := range hosted {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, ok := survivors[k%2].do(cluster.Command{Op: "probe", ID: c, TimeoutMS: 10000})
				if !ok || l.Code != "" || l.Where == victim.name {
					failed <- fmt.Sprintf("%s: %v %s %s", c, ok, l.Code, l.Message)
				}
			}()
		}
		wg.Wait()
		took := time.Since(killedAt)
		b.StopTimer()
		close(failed)
		for f := range failed {
			b.Fatalf("a child of the killed member did not answer again: %s", f)
		}
		hostedTotal += len(hosted)
		worst = max(worst, took)
		ms[v] = spawn()
		waitMembers(b, 3, ms...)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(hostedTotal)/float64(b.N), "children/op")
	b.ReportMetric(float64(worst.Microseconds())/1000, "ms-worst")
}
