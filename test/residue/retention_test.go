package residue

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/troupetest"
)

// Bounded job history (issue 15): under registry.Retention, a long-lived system's
// registry holds O(live + retained) records, not O(every job ever), and an evicted
// job leaves nothing behind in any table.

// retentionEnv is a System with the agent registry and the job tools (so every
// owned job's completion notice is delivered) mounted in the global scope.
type retentionEnv struct {
	sys      *troupe.System
	mount    *jobtools.Mount
	done     chan string // the owner session of each settled job ("": unowned)
	agents   []*owner.Agent
	surfaces []*countingSurface
	calls    int
}

func newRetentionEnv(t *testing.T, owners int, mutate func(*troupe.Config)) *retentionEnv {
	t.Helper()
	sys, _ := troupetest.NewSystem(t, mutate)
	ctx := context.Background()
	_, err := sys.Jobs().MountAgents(ctx, sys.Scope())
	require.NoError(t, err)
	m, err := jobtools.MountIn(ctx, sys.Jobs(), sys.Scope(), jobtools.DefaultConfig())
	require.NoError(t, err)
	e := &retentionEnv{sys: sys, mount: m, done: make(chan string, 1024)}
	_, err = sys.Jobs().OnJobDone(ctx, sys.Scope(), func(_ *messages.JobSnapshot, o registry.Owner) { e.done <- o.Session })
	require.NoError(t, err)
	for i := range owners {
		s := &countingSurface{}
		a, err := sys.NewAgent(nil, "keep-"+strconv.Itoa(i), owner.Options{Surface: s})
		require.NoError(t, err)
		require.NoError(t, sys.Jobs().RegisterAgent(ctx, a))
		e.agents, e.surfaces = append(e.agents, a), append(e.surfaces, s)
	}
	return e
}

// run starts n jobs that settle at once, round-robin over the agents and the
// unowned bucket (nil), at most 8 per owner (under the admission limit) and window
// in all in flight, and returns the ids of the first and the last `keep` of them (a test that kept
// every id would itself hold memory linear in n).
func (e *retentionEnv) run(t *testing.T, n, keep, window int) (first, last []string) {
	t.Helper()
	inflight := map[string]int{}
	total := 0
	for i := range n {
		var a *owner.Agent
		session := ""
		if k := i % (len(e.agents) + 1); k < len(e.agents) {
			a = e.agents[k]
			session = a.Session()
		}
		for inflight[session] == 8 || total == window {
			inflight[<-e.done]--
			total--
		}
		id, err := e.sys.Jobs().Start(context.Background(), settledJob(a))
		require.NoError(t, err)
		if i < keep {
			first = append(first, id)
		}
		if i >= n-keep {
			last = append(last, id)
		}
		inflight[session]++
		total++
	}
	for ; total > 0; total-- {
		<-e.done
	}
	return first, last
}

// tool runs a job tool as agent a (nil: no agent) through the mount's pipeline.
func (e *retentionEnv) tool(t *testing.T, a *owner.Agent, name string, args map[string]string) tools.Result {
	t.Helper()
	var tool tools.Tool
	for _, tl := range e.mount.All() {
		if tl.Name == name {
			tool = tl
		}
	}
	raw, err := json.Marshal(args)
	require.NoError(t, err)
	e.calls++
	call := tools.Call{ID: "call-" + strconv.Itoa(e.calls), Name: name, Args: raw, Caller: tools.AsAgent(a)}
	return e.mount.Pipeline().Run(context.Background(), tool, call)
}

func resultText(t *testing.T, r tools.Result) string {
	t.Helper()
	s, ok := r.SingleText()
	require.True(t, ok, "%#v", r.Content)
	return s
}

// requireEvicted checks that id answers as an unknown id everywhere: the API's
// Get, Read and Kill (job/not-found, "unknown job <id>"), job_output and job_kill
// (SPEC's rendering of that error), and no job_list row.
func (e *retentionEnv) requireEvicted(t *testing.T, id string, a *owner.Agent) {
	t.Helper()
	ctx := context.Background()
	caller := registry.NoCaller
	if a != nil {
		caller = registry.AsAgent(a)
	}
	want := "unknown job " + id
	_, err := e.sys.Jobs().Get(ctx, id, caller)
	requireNotFound(t, err, want)
	_, _, err = e.sys.Jobs().Read(ctx, id, caller)
	requireNotFound(t, err, want)
	_, _, err = e.sys.Jobs().Kill(ctx, id, caller, registry.KillOptions{Reason: "gone?"})
	requireNotFound(t, err, want)
	for _, name := range []string{jobtools.NameOutput, jobtools.NameKill} {
		r := e.tool(t, a, name, map[string]string{"job_id": id})
		require.True(t, r.IsError, name)
		require.Equal(t, "Error: "+want, resultText(t, r), name)
	}
	list, err := e.sys.Jobs().List(ctx, caller)
	require.NoError(t, err)
	for _, s := range list {
		require.NotEqual(t, id, s.Id, "an evicted job is listed")
	}
}

func requireNotFound(t *testing.T, err error, msg string) {
	t.Helper()
	var me *messages.Error
	require.True(t, errors.As(err, &me), "%v", err)
	require.Equal(t, messages.CodeNotFound, me.Code)
	require.Equal(t, msg, me.Message)
}

// TestRetentionBoundsHistory runs 100,000 jobs (5,000 under -race or -short) over
// four owners and the unowned bucket under Retention{PerOwner: 10}: afterwards the
// registry's tables hold exactly the 50 retained records (each owner's and the
// unowned bucket's last 10), every notice was delivered, an evicted id answers as
// an unknown one everywhere, the retained heap did not grow with the number of
// jobs, and once the owners are disposed nothing of theirs remains.
func TestRetentionBoundsHistory(t *testing.T) {
	const owners, keep = 4, 10
	e := newRetentionEnv(t, owners, func(c *troupe.Config) { c.Retention = troupe.Retention{PerOwner: keep} })
	warmProcessRegistry(e.sys)
	first, _ := e.run(t, warmup, 2*(owners+1), 40)
	quiesce(t, e.sys)
	base := liveHeap()
	n := churnCount()
	// ids are the last 2×keep rounds: n is a multiple of owners+1, so ids[k] is
	// agent k%(owners+1)'s job (owners: the unowned bucket).
	// Retention keeps the last settled, and with 8 in flight per owner jobs settle
	// out of registration order: the last 2×keep rounds run one at a time, so they
	// settle in registration order.
	tail := 2 * keep * (owners + 1)
	e.run(t, n-tail, 0, 40)
	_, ids := e.run(t, tail, tail, 1)
	f := quiesce(t, e.sys)
	after := liveHeap()
	grew := int64(after) - int64(base)
	t.Logf("%d jobs under retention %d: retained heap %+d B in total (%.3f B per job)", n, keep, grew, float64(grew)/float64(n))

	want := registry.Footprint{
		Owners: owners, Agents: owners,
		Kinds: 1, Jobs: (owners + 1) * keep, Sessions: owners, Unowned: keep, History: (owners + 1) * keep,
		Registrations: 4, Layers: 1, Controllers: 1, AgentMounts: 1, // agents, tool-jobs and its notice listener, this test's OnJobDone (the global layer)
	}
	require.Equal(t, want, f, "registry tables after %d jobs", warmup+n)
	require.Less(t, grew, int64(retainedBudget), "retained heap grew by %d B over %d jobs", grew, n)
	var noticed int64
	for _, s := range e.surfaces {
		noticed += s.n.Load()
	}
	require.Equal(t, int64((warmup+n)/(owners+1)*owners), noticed, "every owned job's notice was delivered")

	// What is kept: each owner's and the unowned bucket's last 10.
	for i, a := range e.agents {
		list, err := e.sys.Jobs().List(context.Background(), registry.AsAgent(a))
		require.NoError(t, err)
		// Its own last 10 and the unowned bucket's last 10, in registration order.
		var wantIDs []string
		for k := keep * (owners + 1); k < len(ids); k++ {
			if o := k % (owners + 1); o == i || o == owners {
				wantIDs = append(wantIDs, ids[k])
			}
		}
		got := make([]string, len(list))
		for k, s := range list {
			got[k] = s.Id
			require.True(t, s.Status.Terminal())
		}
		require.Equal(t, wantIDs, got, "job_list of %s", a.Session())
		r := e.tool(t, a, jobtools.NameOutput, map[string]string{"job_id": wantIDs[len(wantIDs)-1]})
		require.False(t, r.IsError, resultText(t, r))
	}
	// What is gone: an owned and an unowned job, from the warm-up and from the run.
	e.requireEvicted(t, first[0], e.agents[0])
	e.requireEvicted(t, first[owners], e.agents[0])
	e.requireEvicted(t, ids[1], e.agents[1])
	e.requireEvicted(t, ids[owners], nil)

	ctx, cancel := context.WithTimeout(context.Background(), stepBudget)
	defer cancel()
	for _, a := range e.agents {
		require.NoError(t, a.Dispose(ctx))
	}
	f = quiesce(t, e.sys)
	require.Equal(t, registry.Footprint{Kinds: 1, Jobs: keep, Unowned: keep, History: keep,
		Registrations: 4, Layers: 1, Controllers: 1, AgentMounts: 1}, f, "registry tables once the owners are disposed")
}

// fakeClock is an injected clock in whole milliseconds.
type fakeClock struct{ ms atomic.Int64 }

func (c *fakeClock) now() time.Time      { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) add(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// TestRetentionMaxAgeEvictsWithoutTimers: under Retention{MaxAge} and an injected
// clock, settled records are evicted once MaxAge old, at the first lookup or
// settlement after that — no timer — and onJobsChanged tells their owners; live
// jobs stay whatever their age, and once every record has aged out the tables and
// the retention queues are empty.
func TestRetentionMaxAgeEvictsWithoutTimers(t *testing.T) {
	clock := &fakeClock{}
	clock.ms.Store(1_000_000)
	e := newRetentionEnv(t, 2, func(c *troupe.Config) {
		c.Clock = clock.now
		c.Retention = troupe.Retention{MaxAge: 5 * time.Second}
	})
	ctx := context.Background()
	changed := make(chan string, 64)
	_, err := e.sys.Jobs().OnJobsChanged(ctx, e.sys.Scope(), func(o registry.Owner) { changed <- o.Session })
	require.NoError(t, err)
	alice, bob := e.agents[0], e.agents[1]

	old, _ := e.run(t, 3, 3, 40) // alice, bob, unowned: settled at t0
	clock.add(3 * time.Second)
	newer, _ := e.run(t, 3, 3, 40) // settled at t0+3s
	p := troupetest.NewProducer()
	liveID, err := e.sys.Jobs().Start(ctx, p.Spec(alice))
	require.NoError(t, err)
	for len(changed) > 0 {
		<-changed
	}

	clock.add(2*time.Second - time.Millisecond) // t0+5s-1ms: nothing has aged out
	list, err := e.sys.Jobs().List(ctx, registry.AsAgent(alice))
	require.NoError(t, err)
	require.Len(t, list, 5)
	require.Empty(t, changed)

	clock.add(time.Millisecond) // t0+5s: the first three are MaxAge old
	list, err = e.sys.Jobs().List(ctx, registry.AsAgent(bob))
	require.NoError(t, err)
	require.Equal(t, []string{newer[1], newer[2]}, []string{list[0].Id, list[1].Id})
	require.ElementsMatch(t, []string{alice.Session(), bob.Session(), ""}, []string{<-changed, <-changed, <-changed},
		"each owner that lost records is told once")
	for _, id := range old {
		e.requireEvicted(t, id, alice)
	}
	f := quiesce(t, e.sys)
	require.Equal(t, 4, f.Jobs, "three newer settled and one live")
	// Each retained record is in its owner's queue and the age queue; each owner's
	// queue also keeps its evicted record's entry (stale entries are compacted once
	// they outnumber the current ones).
	require.Equal(t, 3*2+3, f.History)

	clock.add(time.Hour)
	e.requireEvicted(t, newer[0], alice)
	snap, err := e.sys.Jobs().Get(ctx, liveID, registry.AsAgent(alice))
	require.NoError(t, err, "a live job is never evicted")
	require.Equal(t, job.Running, snap.Status)
	p.Settle(job.Outcome{Status: job.Completed})
	troupetest.Settled(t, e.sys, liveID, registry.AsAgent(alice))
	clock.add(time.Hour)
	e.requireEvicted(t, liveID, alice)
	f = quiesce(t, e.sys)
	require.Zero(t, f.Jobs)
	require.Zero(t, f.History, "no stale entry is left in a retention queue")
	require.Zero(t, f.Sessions)
	require.Zero(t, f.Unowned)
}
