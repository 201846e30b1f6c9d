package web_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/troupetest"
)

// sseCounter reads one live channel and counts bytes and frames by event.
type sseCounter struct {
	rowsFrames, rowsBytes, outputFrames, outputBytes, total atomic.Int64
	first                                                   chan struct{} // closed at the first rows frame
}

func (c *sseCounter) read(r *bufio.Reader) {
	var name string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		c.total.Add(int64(len(line)))
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimSpace(line[7:])
		case strings.HasPrefix(line, "data: "):
			switch name {
			case "rows":
				if c.rowsFrames.Add(1) == 1 {
					close(c.first)
				}
				c.rowsBytes.Add(int64(len(line)))
			case "output":
				c.outputFrames.Add(1)
				c.outputBytes.Add(int64(len(line)))
			}
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWebFollow100Roster1000 is 100 viewers of one session, each following
// one of 100 live jobs that stream output, over a roster of 1,000 rows (900
// settled, 100 live). One iteration is one 100 ms tick: every live job appends a
// line; every tenth tick one lifecycle change (a job starts and settles). It
// reports server CPU per wall second (the whole process: system, handler and the
// 100 readers), rows bytes per roster change per viewer, rows frames per change
// per viewer, bytes per rows frame (a whole set: what one roster change costs a
// viewer that is keeping up) and output frames per follow per second. The baseline sub-benchmark
// runs the same ticks with no viewer.
func BenchmarkWebFollow100Roster1000(b *testing.B) {
	for _, viewers := range []int{0, 100} {
		b.Run(fmt.Sprintf("viewers=%d", viewers), func(b *testing.B) { benchFollow(b, viewers) })
	}
}

func benchFollow(b *testing.B, viewers int) {
	e := newEnvTB(b, envOpts{flush: 100 * time.Millisecond, maxJobs: ptr(int64(200))})
	recs := make([]*job.Record, 100)
	ids := make([]string, 100)
	for i := range 900 {
		p := troupetest.NewProducer()
		p.Label = fmt.Sprintf("settled %d", i)
		id, err := e.sys.Jobs().Start(bg, p.Spec(nil))
		require.NoError(b, err)
		p.Settle(job.Outcome{Status: job.Completed, Detail: "exit code: 0"})
		troupetest.Settled(b, e.sys, id, registry.NoCaller)
	}
	var live []*troupetest.Producer
	defer func() {
		for _, p := range live {
			p.Settle(job.Outcome{Status: job.Killed})
		}
	}()
	for i := range 100 {
		p := troupetest.NewProducer()
		p.Label = fmt.Sprintf("live %d", i)
		recs[i] = job.NewRecord()
		p.Record = recs[i]
		id, err := e.sys.Jobs().Start(bg, p.Spec(nil))
		require.NoError(b, err)
		ids[i] = id
		live = append(live, p)
	}
	counters := make([]*sseCounter, viewers)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	for i := range viewers {
		c := &sseCounter{first: make(chan struct{})}
		counters[i] = c
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url("events?session=s1&follow="+ids[i]), nil)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(b, err)
		wg.Add(1)
		go func() { defer wg.Done(); defer resp.Body.Close(); c.read(bufio.NewReaderSize(resp.Body, 1<<16)) }()
	}
	// Wait for every viewer's first rows frame (the whole roster).
	for _, c := range counters {
		<-c.first
	}
	line := strings.Repeat("y", 100) + "\n"
	startRows := make([]int64, viewers)
	startRowsBytes := make([]int64, viewers)
	startOut := make([]int64, viewers)
	for i, c := range counters {
		startRows[i], startRowsBytes[i], startOut[i] = c.rowsFrames.Load(), c.rowsBytes.Load(), c.outputFrames.Load()
	}
	changes := 0
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	b.ResetTimer()
	cpu0, wall0 := cpuTime(), time.Now()
	for i := 0; i < b.N; i++ {
		<-tick.C
		for _, r := range recs {
			r.Append(line, job.AppendOptions{Channel: "stdout"})
		}
		if i%10 == 9 {
			p := troupetest.NewProducer()
			id, err := e.sys.Jobs().Start(bg, p.Spec(nil))
			require.NoError(b, err)
			p.Settle(job.Outcome{Status: job.Completed, Detail: "exit code: 0"})
			troupetest.Settled(b, e.sys, id, registry.NoCaller)
			changes++
		}
	}
	wall := time.Since(wall0)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cpu-s/wall-s")
	if viewers > 0 && changes > 0 {
		var frames, bytes, outs int64
		for i, c := range counters {
			frames += c.rowsFrames.Load() - startRows[i]
			bytes += c.rowsBytes.Load() - startRowsBytes[i]
			outs += c.outputFrames.Load() - startOut[i]
		}
		b.ReportMetric(float64(bytes)/float64(changes)/float64(viewers), "rows-B/change/viewer")
		b.ReportMetric(float64(frames)/float64(changes)/float64(viewers), "rows-frames/change/viewer")
		if frames > 0 {
			b.ReportMetric(float64(bytes)/float64(frames), "rows-B/frame")
		}
		b.ReportMetric(float64(outs)/float64(viewers)/wall.Seconds(), "output-frames/follow/s")
	}
	cancel()
	wg.Wait()
}
