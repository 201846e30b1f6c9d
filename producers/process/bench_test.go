package process

import (
	"context"
	"io"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/troupetest"
)

const throughputBytes = 64 << 20

var produce = "head -c " + strconv.Itoa(throughputBytes) + " /dev/zero"

// cpuTime returns the CPU time (user plus system) this process and its waited-for
// children have used so far: on a loaded machine it moves far less than the wall
// time does.
func cpuTime(b *testing.B) time.Duration {
	var self, kids syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &self))
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids))
	return time.Duration(self.Utime.Nano() + self.Stime.Nano() + kids.Utime.Nano() + kids.Stime.Nano())
}

// reportCPU reports the CPU time per op since cpu0 (cpu-ns/op: the whole process,
// GC included, plus the producing command's).
func reportCPU(b *testing.B, cpu0 time.Duration) {
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkShellThroughput runs a producer that writes 64 MiB and reads its deltas
// until it settles: bytes/s through the job (what the reads did not take in time is
// dropped by retention, reported as delivered-frac), and the CPU time per op.
// Baseline: BenchmarkPipeBaseline.
func BenchmarkShellThroughput(b *testing.B) {
	sys, _ := troupetest.Served(b)
	b.SetBytes(throughputBytes)
	cpu0 := cpuTime(b)
	var delivered, total int64
	for b.Loop() {
		id, err := sys.Jobs().Start(context.Background(), Shell(produce, Config{}))
		require.NoError(b, err)
		for {
			text, snap, err := sys.Jobs().Read(context.Background(), id, registry.NoCaller)
			require.NoError(b, err)
			delivered += int64(len(text))
			if snap.Status.Terminal() {
				break
			}
			if text == "" {
				_, _ = sys.Jobs().Wait(context.Background(), id, readPace, registry.NoCaller)
			}
		}
		total += throughputBytes
	}
	reportCPU(b, cpu0)
	b.ReportMetric(float64(delivered)/float64(total), "delivered-frac")
}

// BenchmarkPipeBaseline pipes the same command's output into io.Discard.
func BenchmarkPipeBaseline(b *testing.B) {
	b.SetBytes(throughputBytes)
	cpu0 := cpuTime(b)
	for b.Loop() {
		cmd := exec.Command("/bin/sh", "-c", produce)
		out, err := cmd.StdoutPipe()
		require.NoError(b, err)
		require.NoError(b, cmd.Start())
		_, err = io.Copy(io.Discard, out)
		require.NoError(b, err)
		require.NoError(b, cmd.Wait())
	}
	reportCPU(b, cpu0)
}

// BenchmarkShellStartToFirstOutput measures Start until the first read returns output.
func BenchmarkShellStartToFirstOutput(b *testing.B) {
	sys, _ := troupetest.Served(b)
	for b.Loop() {
		id, err := sys.Jobs().Start(context.Background(), Shell("echo hi", Config{}))
		require.NoError(b, err)
		for {
			text, _, err := sys.Jobs().Read(context.Background(), id, registry.NoCaller)
			require.NoError(b, err)
			if text != "" {
				break
			}
		}
		troupetest.Settled(b, sys, id, registry.NoCaller)
	}
}

// BenchmarkExecStartToOutput is the baseline: os/exec running the same command.
func BenchmarkExecStartToOutput(b *testing.B) {
	for b.Loop() {
		out, err := exec.Command("/bin/sh", "-c", "echo hi").Output()
		require.NoError(b, err)
		require.Equal(b, "hi\n", string(out))
	}
}

// BenchmarkShellKillToSettled measures kill → settled for a program that obeys
// SIGTERM, with the default grace period (only the first signal is needed).
func BenchmarkShellKillToSettled(b *testing.B) {
	sys, _ := troupetest.Served(b)
	for b.Loop() {
		b.StopTimer()
		id, err := sys.Jobs().Start(context.Background(), Shell("echo ready; exec sleep 1000", Config{}))
		require.NoError(b, err)
		for {
			text, _, err := sys.Jobs().Read(context.Background(), id, registry.NoCaller)
			require.NoError(b, err)
			if text != "" {
				break
			}
		}
		b.StartTimer()
		_, _, err = sys.Jobs().Kill(context.Background(), id, registry.NoCaller, registry.KillOptions{})
		require.NoError(b, err)
		snap := troupetest.Settled(b, sys, id, registry.NoCaller)
		require.Equal(b, job.Killed, snap.Status)
	}
}

// BenchmarkExecKillToExit is the baseline: SIGTERM to an os/exec child and Wait.
func BenchmarkExecKillToExit(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		cmd := exec.Command("sleep", "1000")
		require.NoError(b, cmd.Start())
		b.StartTimer()
		require.NoError(b, cmd.Process.Signal(syscall.SIGTERM))
		_ = cmd.Wait()
	}
}

// BenchmarkTreeScan is one scan of /proc for a job's processes.
func BenchmarkTreeScan(b *testing.B) {
	t := newTree("bench")
	for b.Loop() {
		t.scan()
	}
}
