package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/controller"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/tools/workflowtool"
	"github.com/troupe-rt/troupe/troupetest"
	"github.com/troupe-rt/troupe/workflow"
	"github.com/troupe-rt/troupe/workflow/workflowtest"
)

// The race suite (in the style of test/settle): seeded schedules race a run's
// settle sources — child completion, ordinary child failure (null), fatal child
// failure (AGENT_RESULT), the tool's ctx ending (cancel), a human kill and the
// engine's disposal — against a foreground job-mode run of 50 children, and an
// oracle checks each schedule:
//   - every child started is settled exactly once and disposed exactly once;
//   - the run settles once: one workflow/end, one tool result, one terminal job
//     status, and they agree (completed ↔ Completed, cancelled ↔ Killed, error ↔
//     Failed);
//   - agentsStarted equals the starts observed: 50 (every call accepted in the
//     first slice) when the script itself settled, and in every case
//     agent-starts ≤ stub starts ≤ agentsStarted ≤ 50;
//   - the number of children started and not yet disposed never exceeds
//     maxConcurrentAgents (from the stub's recorded start/dispose order);
//   - W45's event invariants hold.
//
// Knobs: TROUPE_SEED (the run's seed; logged), TROUPE_WORKFLOW_SCHEDULES (default
// 500), TROUPE_SCHEDULE (run only that schedule: what a failure's rerun command
// sets).

const raceChildren = 50

func envInt(t *testing.T, name string, def int64) int64 {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err, name)
		return n
	}
	return def
}

type raceWorld struct {
	sys     *troupe.System
	logs    *troupetest.Logs
	rt      *subagent.Runtime
	plugins *scope.Scope
	jobs    *jobtools.Mount
	ctl     *controller.Controller
}

func newRaceWorld(t *testing.T) *raceWorld {
	sys, logs := troupetest.NewSystem(t)
	_, err := sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(t, err)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), slog.New(logs))
	require.NoError(t, err)
	plugins, err := sys.Scope().Child("plugins")
	require.NoError(t, err)
	jobs, err := jobtools.MountIn(t.Context(), sys.Jobs(), plugins, jobtools.Config{})
	require.NoError(t, err)
	ctl, err := sys.StartController(controller.Config{})
	require.NoError(t, err)
	return &raceWorld{sys: sys, logs: logs, rt: rt, plugins: plugins, jobs: jobs, ctl: ctl}
}

func TestWorkflowRace_SettleSourcesAgainstFiftyChildren(t *testing.T) {
	seed := uint64(envInt(t, "TROUPE_SEED", time.Now().UnixNano()))
	n := envInt(t, "TROUPE_WORKFLOW_SCHEDULES", 500)
	only := envInt(t, "TROUPE_SCHEDULE", -1)
	t.Logf("seed %d, %d schedules (rerun: TROUPE_SEED=%d go test -race ./test/workflow -run TestWorkflowRace)", seed, n, seed)
	w := newRaceWorld(t)
	const workers = 2
	kinds := make([]map[string]int, workers)
	// two workers share the system (each schedule has its own scope, engine,
	// provider and agent): a mailbox hop of one overlaps the other's JS
	t.Run("schedules", func(t *testing.T) {
		for k := range workers {
			kinds[k] = map[string]int{}
			t.Run("worker-"+strconv.Itoa(k), func(t *testing.T) {
				t.Parallel()
				for i := int64(k); i < n; i += workers {
					if only >= 0 && i != only {
						continue
					}
					kinds[k][w.schedule(t, seed, i)]++
					if t.Failed() {
						t.Fatalf("schedule %d failed (rerun: TROUPE_SEED=%d TROUPE_SCHEDULE=%d go test -race ./test/workflow -run TestWorkflowRace)", i, seed, i)
					}
				}
			})
		}
	})
	total := map[string]int{}
	for _, m := range kinds {
		for k, v := range m {
			total[k] += v
		}
	}
	t.Logf("endings: %v", total)
	if only < 0 && n >= 100 {
		for _, want := range []string{"completed", "cancelled", "error"} {
			require.NotZero(t, total[want], "no schedule ended %s: the plan lost a source", want)
		}
	}
}

// schedule runs one seeded schedule and returns how its run ended.
func (w *raceWorld) schedule(t *testing.T, seed uint64, index int64) string {
	rng := rand.New(rand.NewPCG(seed, uint64(index)))
	name := "s" + strconv.FormatInt(index, 10)
	fail := func(format string, args ...any) string {
		t.Errorf("schedule %d: "+format, append([]any{index}, args...)...)
		return "failed"
	}
	sc, err := w.sys.Scope().Child(name)
	require.NoError(t, err)
	st := newStub("stub-" + name)
	st.Set(func(s *workflowtest.Behaviour) { s.Mode = manual })
	_, err = w.rt.RegisterProvider(t.Context(), sc, st)
	require.NoError(t, err)
	limit := 1 + rng.IntN(8)
	eng, err := workflow.NewEngine(workflow.Host{Actors: w.sys.Actors(), Scope: sc, Inspector: w.sys.Tree().PID(), Logger: slog.New(w.logs)}, sc, w.rt,
		workflow.Config{Provider: str(st.Name()), MaxConcurrentAgents: i64(int64(limit)), DisposeGraceMs: i64(int64(20 + rng.IntN(30)))})
	require.NoError(t, err)
	rec := newRecorder()
	// in the plugin scope (the agent's chain), so the engine's disposal does not
	// remove it before workflow/end
	lis, err := eng.Listen(w.plugins, rec.Hear)
	require.NoError(t, err)
	defer func() { _ = lis.Run(context.Background()) }()
	agent, err := w.sys.NewAgent(w.plugins, "A-"+name, owner.Options{Surface: newInbox()})
	require.NoError(t, err)
	require.NoError(t, w.sys.Jobs().RegisterAgent(context.Background(), agent))
	defer func() { _ = agent.Dispose(context.Background()) }()
	m, err := workflowtool.MountIn(sc, workflowtool.Config{}, workflowtool.Deps{Engine: eng, Jobs: w.sys.Jobs()})
	require.NoError(t, err)
	tool := m.Tool()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	script := fmt.Sprintf("return (await parallel(Array.from({ length: %d }, (_, i) => () => agent('child ' + i)))).filter(v => v !== null).length", raceChildren)
	out := make(chan tools.Result, 1)
	go func() {
		out <- w.jobs.Pipeline().Run(ctx, tool, tools.Call{ID: name, Name: tool.Name, Args: json.RawMessage(toolArgs(script, testMeta)),
			Caller: tools.AsAgent(agent)})
	}()

	// the job id: registered before the first child starts
	st.Await(t, "the first child start", func() bool { return len(st.Runs()) > 0 })
	snaps, err := w.sys.Jobs().List(context.Background(), registry.AsAgent(agent))
	require.NoError(t, err)
	require.Len(t, snaps, 1)
	jobID := snaps[0].GetId()

	// the schedule's plan: which terminal sources fire, at which step; whether
	// children may fail fatally
	plan := map[int]string{}
	if rng.IntN(100) >= 35 {
		for _, src := range []string{"cancel", "human-kill", "engine-dispose"} {
			if rng.IntN(100) < 45 {
				plan[rng.IntN(raceChildren+10)] = src
			}
		}
	}
	fatal := rng.IntN(100) < 25
	step := 0
	disposed := make(chan struct{})
	var terminal []string
	settled := map[int]bool{}
	var res tools.Result
	deadline := time.NewTimer(budget)
	defer deadline.Stop()
loop:
	for {
		select {
		case res = <-out:
			break loop
		default:
		}
		// the planned terminal source of this step
		step++
		if src, ok := plan[step]; ok {
			delete(plan, step)
			switch {
			case src == "cancel":
				terminal = append(terminal, src)
				cancel()
			case src == "human-kill":
				terminal = append(terminal, src)
				go func() { _, _ = w.ctl.Kill(context.Background(), agent.Session(), jobID) }()
			default:
				terminal = append(terminal, src)
				go func() { _ = sc.Dispose(context.Background()); close(disposed) }()
			}
			continue
		}
		// settle one published, unsettled child (or wait for one, or for the end)
		published, ch := st.Published()
		var open []*stubRun
		for _, r := range published {
			if !settled[r.Index] {
				open = append(open, r)
			}
		}
		if len(open) == 0 {
			select {
			case res = <-out:
				break loop
			case <-ch:
			case <-deadline.C:
				return fail("no progress: %d starts, terminal %v", len(st.Runs()), terminal)
			}
			continue
		}
		rng.Shuffle(len(open), func(i, j int) { open[i], open[j] = open[j], open[i] })
		for _, r := range open[:1+rng.IntN(min(4, len(open)))] {
			settled[r.Index] = true
			switch p := rng.IntN(100); {
			case fatal && p < 3:
				r.Settle(subagent.Result{}, errors.New("backend exploded"))
			case p < 10:
				r.Settle(subagent.Result{StopReason: subagent.StopMaxTokens}, nil)
			default:
				r.Settle(text("ok"), nil)
			}
		}
	}
	if strings.Contains(strings.Join(terminal, ","), "engine-dispose") {
		<-disposed
	}

	// ---- the oracle ----
	runs := st.Runs()
	// A provider call that outlasted the grace is disposed when it returns, maybe
	// after the run's Dispose (WORKFLOW.md 3.8: abandoned, as the seam allows):
	// every child must still be disposed, exactly once, soon after.
	st.Await(t, "every child's disposal", func() bool {
		for _, r := range st.Runs() {
			if st.Disposes(r) == 0 {
				return false
			}
		}
		return true
	})
	runs = st.Runs()
	// Dispose settles the run before it returns (the seam's contract), but the stub
	// counts the call when it begins: a child seen disposed may still be settling,
	// so its Done is waited for, within the budget, not polled once.
	settleBy := time.NewTimer(budget)
	defer settleBy.Stop()
	for _, r := range runs {
		select {
		case <-r.Run.Done():
		case <-settleBy.C:
			return fail("child %s never settled", r.ID)
		}
		if d := st.Disposes(r); d != 1 {
			return fail("child %s disposed %d times", r.ID, d)
		}
	}
	live, peak := 0, 0
	for _, o := range st.Order() {
		if strings.HasPrefix(o, "start ") {
			live++
		} else {
			live--
		}
		peak = max(peak, live)
	}
	if peak > limit {
		return fail("%d children live at once, limit %d", peak, limit)
	}
	if v := rec.Violations(); len(v) > 0 {
		return fail("event invariants: %v", v)
	}
	evs := rec.All()
	ends := filter(evs, workflow.EventEnd)
	if len(ends) != 1 {
		return fail("%d workflow/end events (%d events; tool %q; terminal %v)", len(ends), len(evs), res.Content, terminal)
	}
	ri := ends[0].Result
	agentStarts := len(filter(evs, workflow.EventAgentStart))
	if !(agentStarts <= len(runs) && len(runs) <= ri.AgentsStarted && ri.AgentsStarted <= raceChildren) {
		return fail("agent-starts %d, stub starts %d, agentsStarted %d", agentStarts, len(runs), ri.AgentsStarted)
	}
	snap, err := w.sys.Jobs().AwaitSettled(testCtx(t), jobID, registry.AsAgent(agent))
	if err != nil {
		return fail("job: %v", err)
	}
	text, _ := res.SingleText()
	want := map[workflow.StopReason]job.Status{workflow.StopCompleted: job.Completed, workflow.StopCancelled: job.Killed, workflow.StopError: job.Failed}[ri.StopReason]
	if snap.GetStatus() != want {
		return fail("run %s but job %s", ri.StopReason, snap.GetStatus())
	}
	if res.IsError != (ri.StopReason != workflow.StopCompleted) {
		return fail("tool errored %v for a %s run: %s", res.IsError, ri.StopReason, text)
	}
	if ri.StopReason == workflow.StopCompleted && (ri.AgentsStarted != raceChildren || len(runs) != raceChildren) {
		return fail("completed with agentsStarted %d and %d stub starts", ri.AgentsStarted, len(runs))
	}
	if !snap.GetReported() {
		return fail("the foreground wait did not claim the report")
	}
	_ = sc.Dispose(context.Background())
	return string(ri.StopReason)
}
