package main

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// probe is a require.TestingT that records a failure instead of failing the test.
type probe struct {
	failed bool
	why    string
}

func (p *probe) Errorf(format string, args ...any) {
	p.failed, p.why = true, fmt.Sprintf(format, args...)
}
func (p *probe) FailNow() { p.failed = true; runtime.Goexit() }

// fails runs check on events in a goroutine of its own (which FailNow ends) and
// returns why it failed, or "" if it passed.
func fails(check func(require.TestingT, []streamEvent), events []streamEvent) string {
	p := &probe{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(p, events)
	}()
	<-done
	if p.failed && p.why == "" {
		p.why = "failed"
	}
	return p.why
}

// first is the index of the first event of evs that matches.
func first(t require.TestingT, evs []streamEvent, match func(streamEvent) bool) int {
	i := slices.IndexFunc(evs, match)
	require.GreaterOrEqual(t, i, 0, "the stream has no event to break")
	return i
}

// TestStreamChecksCatchBrokenPromises: the end-to-end test's checks pass on a real
// stream and fail on the same stream with one promise broken in it.
func TestStreamChecksCatchBrokenPromises(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"--json", "--data", t.TempDir()}, &stdout, &stderr), "stderr:\n%s", stderr.String())
	events := parseStream(t, stdout.String())
	for _, check := range streamChecks {
		require.Empty(t, fails(check.run, events), "check %s on the real stream", check.name)
	}

	settledBy := func(cause string) func(streamEvent) bool {
		return func(ev streamEvent) bool { return ev.Kind == "job-settled" && ev.Cause == cause }
	}
	noticeOf := func(t *testing.T, evs []streamEvent, cause string) int {
		job := evs[first(t, evs, settledBy(cause))].Job
		return first(t, evs, func(ev streamEvent) bool { return ev.Kind == "notice" && ev.Scenario == "notices" && ev.Job == job })
	}
	turnOf := func(scenario, status string, system int) func(streamEvent) bool {
		return func(ev streamEvent) bool {
			return ev.Scenario == scenario && ev.Kind == "turn" && ev.Status == status && ev.System >= system &&
				slices.Contains(continuableChildren(of(events, scenario)), ev.Who)
		}
	}
	mutations := []struct {
		name   string
		check  func(require.TestingT, []streamEvent)
		mutate func(*testing.T, []streamEvent) []streamEvent
	}{
		{"an actor that outlived its system", checkLifecycle, func(t *testing.T, evs []streamEvent) []streamEvent {
			i := first(t, evs, func(ev streamEvent) bool {
				return ev.Kind == "lifecycle" && strings.HasPrefix(ev.Who, "owner/") && ev.Status == "stopped"
			})
			return slices.Delete(evs, i, i+1)
		}},
		{"a job the tree settled otherwise", checkLifecycle, func(t *testing.T, evs []streamEvent) []streamEvent {
			i := first(t, evs, func(ev streamEvent) bool { return ev.Kind == "lifecycle" && ev.Status == "settled" })
			evs[i].Detail = "failed (panic), cause panic"
			return evs
		}},
		{"a broken promise", checkSummary, func(t *testing.T, evs []streamEvent) []streamEvent {
			evs[first(t, evs, func(ev streamEvent) bool { return ev.Kind == "promise" })].OK = ptr(false)
			return evs
		}},
		{"a job settled twice", checkSettlements, func(t *testing.T, evs []streamEvent) []streamEvent {
			return append(evs, evs[first(t, evs, func(ev streamEvent) bool { return ev.Kind == "job-settled" })])
		}},
		{"a job never settled", checkSettlements, func(t *testing.T, evs []streamEvent) []streamEvent {
			return slices.Delete(evs, first(t, evs, settledBy("teardown")), first(t, evs, settledBy("teardown"))+1)
		}},
		{"the human kill not told", checkNotices, func(t *testing.T, evs []streamEvent) []streamEvent {
			i := noticeOf(t, evs, "human-kill")
			return slices.Delete(evs, i, i+1)
		}},
		{"the human kill told without its reason", checkNotices, func(t *testing.T, evs []streamEvent) []streamEvent {
			evs[noticeOf(t, evs, "human-kill")].Text = "background job finished [status: killed, signal: SIGTERM]"
			return evs
		}},
		{"the model told of its own kill", checkNotices, func(t *testing.T, evs []streamEvent) []streamEvent {
			told := evs[noticeOf(t, evs, "human-kill")]
			told.Job = evs[first(t, evs, settledBy("model-kill"))].Job
			return append(evs, told)
		}},
		{"the wake budget exceeded", checkNotices, func(t *testing.T, evs []streamEvent) []streamEvent {
			evs[first(t, evs, func(ev streamEvent) bool { return ev.Kind == "notice" && ev.Lane == "inject" })].Lane = "followup"
			return evs
		}},
		{"a restart at the crashed epoch", checkCrashRestart, func(t *testing.T, evs []streamEvent) []streamEvent {
			crash := evs[first(t, evs, func(ev streamEvent) bool { return ev.Kind == "activation-crash" })]
			evs[first(t, evs, func(ev streamEvent) bool { return ev.Kind == "activation-restart" })].Epoch = crash.Epoch
			return evs
		}},
		{"a parked message lost in the crash", checkCrashRestart, func(t *testing.T, evs []streamEvent) []streamEvent {
			restart := first(t, evs, func(ev streamEvent) bool { return ev.Kind == "activation-restart" })
			i := restart + first(t, evs[restart:], turnOf("crash", "started", 1))
			return slices.Delete(evs, i, i+2) // the turn's start and end
		}},
		{"the cut-off turn re-run", checkCrashRestart, func(t *testing.T, evs []streamEvent) []streamEvent {
			crash := first(t, evs, func(ev streamEvent) bool { return ev.Kind == "activation-crash" })
			cut := evs[crash-1-first(t, reversed(evs[:crash]), turnOf("crash", "started", 1))]
			last := len(evs) - 1 - first(t, reversed(evs), turnOf("crash", "started", 1))
			evs[last].Text = cut.Text
			return evs
		}},
		{"the child resumed at an old epoch", checkResumeAfterRestart, func(t *testing.T, evs []streamEvent) []streamEvent {
			evs[first(t, evs, func(ev streamEvent) bool {
				return ev.Scenario == "subagents" && ev.Kind == "session-activated" && ev.System == 2
			})].Epoch = 1
			return evs
		}},
		{"the parked message lost across the restart", checkResumeAfterRestart, func(t *testing.T, evs []streamEvent) []streamEvent {
			i := first(t, evs, turnOf("subagents", "started", 2))
			return slices.Delete(evs, i, i+2)
		}},
		{"the resumed child without its history", checkAllHistories, func(t *testing.T, evs []streamEvent) []streamEvent {
			evs[first(t, evs, turnOf("subagents", "started", 2))].History = ptr(0)
			return evs
		}},
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			why := fails(m.check, m.mutate(t, slices.Clone(events)))
			require.NotEmpty(t, why, "the check passed a stream with %s", m.name)
			t.Logf("caught: %s", why)
		})
	}
}

func reversed(evs []streamEvent) []streamEvent {
	out := slices.Clone(evs)
	slices.Reverse(out)
	return out
}
