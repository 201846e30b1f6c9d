package exhaustion

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/harness"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/troupetest"
)

// The contract's figures (TESTING.md, exhaustion row): 1,000 owners, 11 starts
// each, troupe's default admission limit of 10 live jobs per owner.
const (
	owners         = 1000
	startsPerOwner = troupe.DefaultMaxConcurrentJobsPerOwner + 1
	perOwnerLimit  = troupe.DefaultMaxConcurrentJobsPerOwner
	admittedWant   = owners * perOwnerLimit
)

// maxLiveJobHeap bounds the live heap per admitted job, the test's own producer,
// its Done channel and its bookkeeping included. troupe's benchmark measures about
// 1.7 KiB per live idle job (README, "Performance"); the bound leaves room for the
// race detector and the test, and still catches a job that keeps a buffer, a
// goroutine stack's worth of heap or a copy of its owner.
const maxLiveJobHeap = 16 * kib

// maxSampledJobHeap bounds the sampled high-water (live objects plus garbage not
// yet collected) per admitted job during the storm of starts.
const maxSampledJobHeap = 64 * kib

// budget bounds every wait for the runtime; nothing waits for it to pass.
const budget = 30 * time.Second

// liveProducer is a job that stays live until it is completed or cancelled: its
// Done carries exactly one outcome, whichever of the two comes first. Cancel never
// blocks.
type liveProducer struct {
	done    chan job.Outcome
	settled atomic.Bool
}

func newLiveProducer() *liveProducer { return &liveProducer{done: make(chan job.Outcome, 1)} }

func (p *liveProducer) settle(o job.Outcome) {
	if p.settled.CompareAndSwap(false, true) {
		p.done <- o
	}
}

func (p *liveProducer) hooks() job.Hooks {
	return job.Hooks{
		Cancel: func(string) error { p.settle(job.Outcome{Status: job.Killed, Detail: "signal: SIGTERM"}); return nil },
		Done:   p.done,
	}
}

// attempt is one start of a storm: who asked, and what it got.
type attempt struct {
	owner int
	id    string
	err   error
	prod  *liveProducer // set by Run, only if the registry admitted the start
}

// storm starts startsPerOwner jobs for every agent, all at once: one goroutine per
// start, launched in a seeded order and released together by a barrier. It
// returns once every start was answered, with the attempts in launch order, and
// counts Run calls in runs.
func storm(t *testing.T, sys *troupe.System, agents []*owner.Agent, rng *rand.Rand, runs *atomic.Int64) []attempt {
	t.Helper()
	atts := make([]attempt, 0, len(agents)*startsPerOwner)
	for o := range agents {
		for range startsPerOwner {
			atts = append(atts, attempt{owner: o})
		}
	}
	rng.Shuffle(len(atts), func(i, j int) { atts[i], atts[j] = atts[j], atts[i] })
	barrier := make(chan struct{})
	var wg sync.WaitGroup
	for i := range atts {
		a := &atts[i]
		spec := job.Spec{Kind: "bash", Label: "sleep 1000", Owner: agents[a.owner], Run: func() (job.Hooks, error) {
			runs.Add(1)
			a.prod = newLiveProducer() // read by the starter after its reply (happens-after)
			return a.prod.hooks(), nil
		}}
		wg.Go(func() {
			<-barrier
			a.id, a.err = sys.Jobs().Start(context.Background(), spec)
		})
	}
	close(barrier)
	wg.Wait()
	return atts
}

// requireExactAdmission checks a storm's answers: per owner exactly perOwnerLimit
// admitted and exactly one refused with ErrCapacity (no other error), the admitted
// ids exactly wantIDs, and the producer of every admitted start (and only those)
// run.
func requireExactAdmission(t *testing.T, atts []attempt, wantIDs map[string]bool) {
	t.Helper()
	admitted, refused := make([]int, owners), make([]int, owners)
	got := map[string]bool{}
	for _, a := range atts {
		if a.err != nil {
			require.ErrorIs(t, a.err, messages.ErrCapacity, "owner %d: a start failed otherwise", a.owner)
			require.Contains(t, a.err.Error(), fmt.Sprintf("(limit: %d)", perOwnerLimit))
			require.Nil(t, a.prod, "owner %d: a refused start ran its producer", a.owner)
			refused[a.owner]++
			continue
		}
		require.NotNil(t, a.prod, "start %s: admitted without running its producer", a.id)
		require.False(t, got[a.id], "id %s admitted twice", a.id)
		got[a.id] = true
		admitted[a.owner]++
	}
	for o := range owners {
		require.Equal(t, perOwnerLimit, admitted[o], "owner %d: admitted", o)
		require.Equal(t, 1, refused[o], "owner %d: refused", o)
	}
	require.Equal(t, wantIDs, got, "the admitted ids")
}

// bashIDs returns {bash-from, …, bash-to}.
func bashIDs(from, to int) map[string]bool {
	ids := make(map[string]bool, to-from+1)
	for n := from; n <= to; n++ {
		ids[fmt.Sprintf("bash-%d", n)] = true
	}
	return ids
}

// doneCounter is a job-done observer: it counts settlements by status and closes
// reached when the count reaches target (set before the jobs it waits for settle).
type doneCounter struct {
	completed, killed, other atomic.Int64
	target                   atomic.Int64
	mu                       sync.Mutex
	reached                  chan struct{}
}

func (d *doneCounter) observe(snap *messages.JobSnapshot, _ registry.Owner) {
	switch snap.Status.Name() {
	case "completed":
		d.completed.Add(1)
	case "killed":
		d.killed.Add(1)
	default:
		d.other.Add(1)
	}
	if d.total() == d.target.Load() {
		d.mu.Lock()
		close(d.reached)
		d.mu.Unlock()
	}
}

func (d *doneCounter) total() int64 { return d.completed.Load() + d.killed.Load() + d.other.Load() }

// expect arms the counter for n settlements in all and returns the channel closed
// when they happened.
func (d *doneCounter) expect(n int64) <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reached = make(chan struct{})
	d.target.Store(n)
	return d.reached
}

func awaitClosed(t *testing.T, ch <-chan struct{}, what func() string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(budget):
		t.Fatal(what())
	}
}

// TestAdmissionExhaustion: 1,000 registered agents each send 11 concurrent starts
// (all 11,000 released by one barrier) of jobs that stay live. Exactly 10,000 are
// admitted — ids bash-1…bash-10000, each producer run once — and exactly one start
// per owner is refused with ErrCapacity before its producer runs. The live heap
// per admitted job is bounded. Then every job settles (a seeded half completed by
// its producer, the other half killed through the registry) and the 1,000 owners
// storm again: again exactly 10 admitted and 1 refused each — the first round left
// 0 in flight, whichever way its jobs settled.
func TestAdmissionExhaustion(t *testing.T) {
	seed := harness.Seed(t)
	rng := rand.New(rand.NewPCG(seed, seed^0xad31))
	sys, _ := troupetest.Served(t)
	done := &doneCounter{}
	_, err := sys.Jobs().OnJobDone(context.Background(), sys.Scope(), done.observe)
	require.NoError(t, err)

	setup := time.Now()
	agents := make([]*owner.Agent, owners)
	for o := range agents {
		agents[o] = troupetest.Agent(t, sys, fmt.Sprintf("owner-%04d", o))
	}
	t.Logf("%d agents registered in %s", owners, time.Since(setup).Round(time.Millisecond))

	var runs atomic.Int64
	base := liveHeap()
	watch := watchHeap()
	began := time.Now()
	first := storm(t, sys, agents, rng, &runs)
	took := time.Since(began)
	sampled := watch.Stop()
	live := liveHeap()
	requireExactAdmission(t, first, bashIDs(1, admittedWant))
	require.Equal(t, int64(admittedWant), runs.Load(), "producers run")

	perJob := float64(above(live, base)) / admittedWant
	perJobSampled := float64(above(sampled, base)) / admittedWant
	t.Logf("storm 1: %d starts answered in %s (%d admitted, %d refused)", len(first), took.Round(time.Millisecond),
		admittedWant, owners)
	t.Logf("live heap per live job (after GC, producer and test bookkeeping included): %.0f B; "+
		"sampled high-water per job: %.0f B (base %.1f MiB, live %.1f MiB, high-water %.1f MiB)",
		perJob, perJobSampled, float64(base)/mib, float64(live)/mib, float64(sampled)/mib)
	require.Less(t, perJob, float64(maxLiveJobHeap), "live heap per live job")
	require.Less(t, perJobSampled, float64(maxSampledJobHeap), "sampled heap high-water per live job")

	// Every admitted job settles: a seeded half by completion, the rest by a kill.
	began = time.Now()
	settled := done.expect(admittedWant)
	var completeWant, killWant int64
	kills := make([][]string, owners)
	for _, a := range first {
		if a.err != nil {
			continue
		}
		if rng.IntN(2) == 0 {
			completeWant++
			a.prod.settle(job.Outcome{Status: job.Completed, Detail: "exit code: 0"})
		} else {
			killWant++
			kills[a.owner] = append(kills[a.owner], a.id)
		}
	}
	killAll(t, sys, agents, kills)
	awaitClosed(t, settled, func() string {
		return fmt.Sprintf("%d of %d jobs settled", done.total(), admittedWant)
	})
	t.Logf("%d completed and %d killed, all settled in %s", completeWant, killWant, time.Since(began).Round(time.Millisecond))
	require.Equal(t, completeWant, done.completed.Load(), "settled completed")
	require.Equal(t, killWant, done.killed.Load(), "settled killed")
	require.Zero(t, done.other.Load(), "settled otherwise")

	// 0 in flight: every owner has its 10 slots again, and no more.
	began = time.Now()
	second := storm(t, sys, agents, rng, &runs)
	t.Logf("storm 2: %d starts answered in %s", len(second), time.Since(began).Round(time.Millisecond))
	requireExactAdmission(t, second, bashIDs(admittedWant+1, 2*admittedWant))
	require.Equal(t, int64(2*admittedWant), runs.Load(), "producers run")

	// Leave nothing for the shutdown to tear down.
	settled = done.expect(2 * admittedWant)
	for _, a := range second {
		if a.err == nil {
			a.prod.settle(job.Outcome{Status: job.Completed, Detail: "exit code: 0"})
		}
	}
	awaitClosed(t, settled, func() string {
		return fmt.Sprintf("%d of %d jobs settled", done.total(), 2*admittedWant)
	})
}

// killAll kills each owner's listed jobs as that owner, one goroutine per owner,
// and requires every kill to be requested (the job was live and its Cancel ran).
func killAll(t *testing.T, sys *troupe.System, agents []*owner.Agent, kills [][]string) {
	t.Helper()
	errs := make([]error, len(agents))
	var wg sync.WaitGroup
	for o, ids := range kills {
		wg.Go(func() {
			for _, id := range ids {
				res, _, err := sys.Jobs().Kill(context.Background(), id, registry.AsAgent(agents[o]), registry.KillOptions{Reason: "exhaustion"})
				if err == nil && res != messages.KillResult_KILL_RESULT_REQUESTED {
					err = fmt.Errorf("kill %s: %s, want requested", id, res)
				}
				if err != nil {
					errs[o] = err
					return
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}
