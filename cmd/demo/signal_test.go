package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDemoSignalShutsEverySystemDown: SIGTERM or SIGINT in the middle of the jobs
// scenario makes the demo shut its system down — the running shell job is torn
// down by Shutdown (settled killed, not left to the watchdog) — and exit 130 with a
// summary that says it was interrupted; no process of its jobs is left.
func TestDemoSignalShutsEverySystemDown(t *testing.T) {
	bin := buildDemo(t)
	for _, c := range []struct {
		sig   syscall.Signal
		cause string
	}{{syscall.SIGTERM, "terminated signal received"}, {syscall.SIGINT, "interrupt signal received"}} {
		t.Run(c.sig.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "--json", "--scenario", "jobs", "--data", t.TempDir())
			outR, outW, err := os.Pipe()
			require.NoError(t, err)
			defer outR.Close()
			errF, err := os.CreateTemp(t.TempDir(), "stderr")
			require.NoError(t, err)
			defer errF.Close()
			cmd.Stdout, cmd.Stderr = outW, errF
			require.NoError(t, cmd.Start())
			outW.Close()

			var events []streamEvent
			var lines []string
			ticker := ""
			sc := bufio.NewScanner(outR)
			for sc.Scan() {
				var ev streamEvent
				require.NoError(t, json.Unmarshal(sc.Bytes(), &ev), "line %q", sc.Text())
				events = append(events, ev)
				lines = append(lines, sc.Text())
				if ticker == "" && ev.Kind == "job-started" && strings.HasPrefix(ev.Text, "i=0; while") {
					ticker = ev.Job
					require.NoError(t, cmd.Process.Signal(c.sig))
				}
			}
			err = cmd.Wait()
			stderr, _ := os.ReadFile(errF.Name())
			var exit *exec.ExitError
			require.True(t, errors.As(err, &exit), "the demo exited %v; stderr:\n%s", err, stderr)
			require.Equal(t, exitInterrupted, exit.ExitCode(), "stderr:\n%s", stderr)
			require.NotEmpty(t, ticker, "the shell job never started")
			require.Contains(t, string(stderr), "demo: interrupted ("+c.cause+"): every live system was shut down")
			require.NotContains(t, string(stderr), "troupe watchdog:", "the watchdog had to stop jobs: Shutdown did not")

			settled, shut := false, false
			for _, ev := range events {
				if ev.Kind == "job-settled" && ev.Job == ticker {
					require.Equal(t, "killed", ev.Status, "the shell job: %+v", ev)
					settled = true
				}
				if ev.Kind == "system" && ev.Status == "shut down" {
					shut = true
				}
			}
			require.True(t, settled, "the shell job never settled")
			require.True(t, shut, "the system never said it shut down")
			var last struct {
				Kind    string `json:"kind"`
				Summary struct {
					Interrupted string `json:"interrupted"`
				} `json:"summary"`
			}
			require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last))
			require.Equal(t, "summary", last.Kind)
			require.Equal(t, c.cause, last.Summary.Interrupted)
			require.Empty(t, markedBy(cmd.Process.Pid), "processes of the demo's jobs outlived it")
		})
	}
}

// markedBy lists the live processes whose job marker (TROUPE_JOB=<program>-<pidns>-
// <pid>-<start>/<token>, producers/process) names host pid.
func markedBy(host int) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	var out []int
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue
		}
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
			continue
		}
		env, _ := os.ReadFile("/proc/" + n + "/environ")
		for _, kv := range strings.Split(string(env), "\x00") {
			v, ok := strings.CutPrefix(kv, "TROUPE_JOB=")
			if !ok {
				continue
			}
			inst, _, _ := strings.Cut(v, "/")
			if f := strings.Split(inst, "-"); len(f) == 4 && f[2] == strconv.Itoa(host) {
				out = append(out, pid)
			}
		}
	}
	return out
}
