package notices

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
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
	"github.com/troupe-rt/troupe/internal/userauth"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/test/mutation"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/troupetest"
)

// replyBudget bounds every wait for a reply; nothing waits for it to pass.
const replyBudget = 10 * time.Second

// end is how a job ends.
type end int

const (
	completes   end = iota // the producer settles completed
	fails                  // the producer settles failed
	modelKill              // job_kill (claims), then the producer settles killed
	humanKill              // job.kill (reason, no claim), then the producer settles killed
	outrunsKill            // job_kill returns requested, then the producer settles completed
	numEnds
)

func (e end) String() string {
	return [...]string{"completes", "fails", "killed by model", "killed by human", "outruns a kill"}[e]
}

// outcome is what the producer settles with for an end.
func (e end) outcome() job.Outcome {
	switch e {
	case fails:
		return job.Outcome{Status: job.Failed, Detail: "exit code: 1"}
	case modelKill, humanKill:
		return job.Outcome{Status: job.Killed, Detail: "signal: SIGTERM"}
	default:
		return job.Outcome{Status: job.Completed, Detail: "exit code: 0"}
	}
}

// detail is the settled detail SPEC predicts: a human kill's reason is merged into
// a killed job's detail (§1.1, §2.9 Rev B); a model kill gives no reason.
func (e end) detail() string {
	if e == humanKill {
		return "signal: SIGTERM; " + humanReason
	}
	return e.outcome().Detail
}

const humanReason = "cancelled by the user"

// producer settles when the test says, or with its teardown outcome when a
// teardown cancels it; any other cancel only records that it landed.
type producer struct {
	done     chan job.Outcome
	once     sync.Once
	teardown job.Outcome
}

func newProducer(teardown job.Outcome) *producer {
	return &producer{done: make(chan job.Outcome, 1), teardown: teardown}
}

func (p *producer) settle(o job.Outcome) { p.once.Do(func() { p.done <- o }) }

func (p *producer) run() (job.Hooks, error) {
	return job.Hooks{Done: p.done, Cancel: func(reason string) error {
		if reason == job.ReasonOwnerDisposed || reason == job.ReasonServiceDisposed {
			p.settle(p.teardown)
		}
		return nil
	}}, nil
}

// note is one surface call.
type note struct {
	verb string
	msg  owner.Message
	read <-chan registry.ListResult // the session's jobs, listed as the notice arrived
}

// recorder is an incarnation's delivery surface: it records, never blocks, never
// fails. As an agent handed a notice may, it lists its jobs at once (the query is
// queued at the registry before the surface returns; it is answered later): a
// notice must not arrive before its settlement is committed.
type recorder struct {
	jobs    *registry.Client
	session string
	mu      sync.Mutex
	notes   []note
}

func (r *recorder) add(verb string, m owner.Message) error {
	n := note{verb: verb, msg: m, read: r.jobs.ListAsync(asSession(r.session))}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, n)
	return nil
}

func (r *recorder) Inject(m owner.Message) error   { return r.add("inject", m) }
func (r *recorder) Steer(m owner.Message) error    { return r.add("steer", m) }
func (r *recorder) Followup(m owner.Message) error { return r.add("followup", m) }

// take returns the calls recorded since the last take.
func (r *recorder) take() []note {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.notes
	r.notes = nil
	return out
}

// incarnation is one live agent instance and the test's model of its owner actor.
type incarnation struct {
	name      string // session#n, for messages
	session   string
	agent     *owner.Agent
	surf      *recorder
	probe     <-chan owner.Stats // stats taken while its scope is disposed, before its actor stops
	noProbe   atomic.Bool        // skip the probe: let the actor stop with nothing queued behind its notices
	busy      bool
	spent     int // wakes spent since the last claimed user message
	delivered int // notices it has been handed
	gone      bool
}

// jobRec is one job and what SPEC predicts for it.
type jobRec struct {
	id    string
	label string
	owner *incarnation
	end   end
	torn  bool // its owner is torn down while it runs
	racy  bool // its owner is torn down as it settles: teardown may or may not claim it
	p     *producer

	reported bool // racy: the claim its settlement recorded
}

// settlements records what the onJobDone observers see. It is registered in the
// preset scope after the tool-jobs mount, so for every job it is called after the
// notice listener, in the same registry step (SPEC §1.3 rule 12): once a job's
// snapshot is here, its notice, if any, is already queued at the owner actor.
type settlements struct {
	mu    sync.Mutex
	chans map[string]chan *messages.JobSnapshot
	extra int // calls beyond the first for one job
}

func (s *settlements) ch(id string) chan *messages.JobSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chans[id]
	if c == nil {
		c = make(chan *messages.JobSnapshot, 1)
		s.chans[id] = c
	}
	return c
}

// observe is the onJobDone observer: it runs on the registry and never blocks.
func (s *settlements) observe(snap *messages.JobSnapshot, _ registry.Owner) {
	select {
	case s.ch(snap.Id) <- snap:
	default:
		s.mu.Lock()
		s.extra++
		s.mu.Unlock()
	}
}

func (s *settlements) extras() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.extra
}

// claimed is SPEC §1.3 rule 4 at settlement: a teardown cancel began, or a claiming
// (model) kill returned requested and the job settled killed. Whether a teardown
// racing the settlement began first is up to the schedule: the settlement says.
func (j *jobRec) claimed() bool {
	if j.racy && j.end != modelKill {
		return j.reported
	}
	return j.torn || j.end == modelKill
}

// totals are the run's exact counters.
type totals struct {
	settled, delivered, claimed, followups, injects, stale, duplicates int
}

// world is one System: the agent registry mounted in the global scope, the job tools
// mounted in a "preset" scope every incarnation is composed under.
type world struct {
	t      testing.TB
	sys    *troupe.System
	preset *scope.Scope
	mount  *jobtools.Mount
	cfg    jobtools.Resolved
	noise  func()

	settled *settlements
	calls   atomic.Uint64
	incs    int
	current map[string]*owner.Agent // the last incarnation spawned per session
	jobs    map[string]*jobRec
	noticed map[string]bool
	total   totals
}

// newWorld starts a System (on a seeded dispatcher when d is non-nil) and mounts
// the tools with cfg.
func newWorld(t testing.TB, cfg jobtools.Config, d *harness.Dispatcher, noise func()) *world {
	t.Helper()
	if d != nil {
		t.Cleanup(func() { // registered first: runs after the System's shutdown
			d.Close()
			require.NoError(t, d.Err())
		})
	}
	sys, _ := troupetest.NewSystem(t, func(c *troupe.Config) {
		if d != nil {
			c.Dispatcher = d
		}
	})
	_, err := sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(t, err)
	preset, err := sys.Scope().Child("preset")
	require.NoError(t, err)
	m, err := jobtools.MountIn(context.Background(), sys.Jobs(), preset, cfg)
	require.NoError(t, err)
	settled := &settlements{chans: map[string]chan *messages.JobSnapshot{}}
	_, err = sys.Jobs().OnJobDone(context.Background(), preset, settled.observe)
	require.NoError(t, err)
	if noise == nil {
		noise = func() {}
	}
	return &world{t: t, sys: sys, preset: preset, mount: m, cfg: m.Config(), noise: noise,
		settled: settled, jobs: map[string]*jobRec{}, noticed: map[string]bool{}, current: map[string]*owner.Agent{}}
}

func (w *world) ctx() context.Context {
	c, cancel := context.WithTimeout(context.Background(), replyBudget)
	w.t.Cleanup(cancel)
	return c
}

// spawn starts and registers a new incarnation of session (replacing any
// registered one), with a probe effect added before it owns any job.
func (w *world) spawn(session string) *incarnation {
	t := w.t
	t.Helper()
	w.incs++
	inc := &incarnation{name: fmt.Sprintf("%s#%d", session, w.incs), session: session,
		surf: &recorder{jobs: w.sys.Jobs(), session: session}}
	a, err := w.sys.NewAgent(w.preset, session, owner.Options{Surface: inc.surf})
	require.NoError(t, err)
	inc.agent = a
	probe := make(chan owner.Stats, 1)
	_, err = a.Scope().Add("test.probe", func(context.Context) error {
		if inc.noProbe.Load() {
			return nil
		}
		c, cancel := context.WithTimeout(context.Background(), replyBudget)
		defer cancel()
		st, err := a.Stats(c)
		if err == nil {
			probe <- st
		}
		return err
	})
	require.NoError(t, err)
	inc.probe = probe
	// The new incarnation displaces the last one with its handle (the registration rule).
	if old := w.current[session]; old != nil {
		require.NoError(t, w.sys.Jobs().ReplaceAgent(context.Background(), old, a))
	} else {
		require.NoError(t, w.sys.Jobs().RegisterAgent(context.Background(), a))
	}
	w.current[session] = a
	return inc
}

// setBusy reports inc's status to its owner actor (and the model).
func (w *world) setBusy(inc *incarnation, busy bool) {
	inc.busy = busy
	inc.agent.SetBusy(busy)
}

// claim reports a claimed inbox message of kind; "user" resets the budget.
func (w *world) claim(inc *incarnation, kind string) {
	if kind == "user" {
		inc.spent = 0
	}
	inc.agent.InboxClaimed(kind)
}

// start starts a job owned by inc that will end as e.
func (w *world) start(inc *incarnation, e end) *jobRec {
	t := w.t
	t.Helper()
	j := &jobRec{owner: inc, end: e, p: newProducer(e.outcome())}
	j.label = fmt.Sprintf("work %d for %s", len(w.jobs)+1, inc.name)
	id, err := w.sys.Jobs().Start(context.Background(), job.Spec{Kind: "bash", Label: j.label, Owner: inc.agent, Run: j.p.run})
	require.NoError(t, err)
	j.id = id
	w.jobs[id] = j
	return j
}

// kill performs j's kill, if its end has one, and checks that it landed.
func (w *world) kill(j *jobRec) error {
	switch j.end {
	case modelKill, outrunsKill:
		var tool tools.Tool
		for _, tl := range w.mount.All() {
			if tl.Name == jobtools.NameKill {
				tool = tl
			}
		}
		args, _ := json.Marshal(map[string]string{"job_id": j.id})
		call := tools.Call{ID: fmt.Sprintf("call-%d", w.calls.Add(1)), Name: jobtools.NameKill, Args: args, Caller: tools.AsAgent(w.current[j.owner.session])} // the session's model: its registered incarnation (the job's may be replaced)
		res := w.mount.Pipeline().Run(w.ctx(), tool, call)
		got, _ := res.SingleText()
		if want := "requested cancellation of job " + j.id; res.IsError || got != want {
			return fmt.Errorf("job_kill %s: got %q (errored %v), want %q", j.id, got, res.IsError, want)
		}
	case humanKill:
		r, _, err := w.sys.Jobs().Kill(context.Background(), j.id, asSession(j.owner.session), registry.KillOptions{Reason: humanReason, NoClaim: true})
		if err != nil || r != messages.KillResult_KILL_RESULT_REQUESTED {
			return fmt.Errorf("human kill %s: %v, %v", j.id, r, err)
		}
	}
	return nil
}

// finish ends a job whose owner stays live: its kill, then its outcome.
func (w *world) finish(j *jobRec) error {
	w.noise()
	if err := w.kill(j); err != nil {
		return err
	}
	w.noise()
	j.p.settle(j.end.outcome())
	return nil
}

// settleThenTearDown ends inc's jobs (kills, outcomes) and disposes inc right
// after, without waiting for the settlements: each job's notice is either claimed
// by the teardown or already on its way, and must then be delivered before the
// owner actor stops. No probe runs: nothing else is queued behind the notices.
func (w *world) settleThenTearDown(inc *incarnation, jobs []*jobRec) error {
	for _, j := range jobs {
		if err := w.finish(j); err != nil {
			return err
		}
	}
	w.noise()
	inc.noProbe.Store(true)
	return inc.agent.Dispose(w.ctx())
}

// tearDown ends an incarnation while its jobs run: their kills, then the
// disposal of its scope, whose teardown cancel settles each job with its outcome.
func (w *world) tearDown(inc *incarnation, jobs []*jobRec) error {
	for _, j := range jobs {
		w.noise()
		if err := w.kill(j); err != nil {
			return err
		}
	}
	w.noise()
	return inc.agent.Dispose(w.ctx())
}

// group is one incarnation's part of a round.
type group struct {
	inc   *incarnation
	state state
	ends  []end // jobs of inc
	fresh []end // state replaced: jobs of the replacement
	// set by round
	replacement *incarnation
}

// state is what happens to a group's incarnation during the round.
type state int

const (
	live             state = iota // stays registered and live (busy or idle as set)
	tearingDown                   // its scope is disposed while its jobs run
	settlingTornDown              // its scope is disposed as its jobs settle
	replaced                      // a same-session incarnation is registered while its jobs run
)

// round runs groups concurrently and checks the oracle. It returns the verbs each
// involved incarnation received, by name.
func (w *world) round(rng *rand.Rand, groups []*group) map[string][]string {
	t := w.t
	t.Helper()
	var jobs []*jobRec
	type action func() error
	var actions []action
	for _, g := range groups {
		var mine []*jobRec
		for _, e := range g.ends {
			j := w.start(g.inc, e)
			j.torn = g.state == tearingDown
			j.racy = g.state == settlingTornDown
			mine = append(mine, j)
		}
		jobs = append(jobs, mine...)
		switch g.state {
		case tearingDown:
			actions = append(actions, func() error { return w.tearDown(g.inc, mine) })
		case settlingTornDown:
			actions = append(actions, func() error { return w.settleThenTearDown(g.inc, mine) })
		case replaced:
			g.replacement = w.spawn(g.inc.session)
			for _, e := range g.fresh {
				mine = append(mine, w.start(g.replacement, e))
			}
			jobs = append(jobs, mine[len(g.ends):]...)
			fallthrough
		default:
			for _, j := range mine {
				actions = append(actions, func() error { return w.finish(j) })
			}
		}
	}

	errs := make(chan error, len(actions))
	var wg sync.WaitGroup
	for _, i := range rng.Perm(len(actions)) {
		wg.Go(func() { errs <- actions[i]() })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	// The oracles (test/mutation names them); a timeout or a failed call is none.
	settledTB := mutation.NoticesSettled.TB(t)
	noticeTB := mutation.NoticesDelivered.TB(t)
	accountTB := mutation.NoticesAccount.TB(t)

	// Every job has settled, and the notice listener has run for it.
	settled, claimed := 0, 0
	for _, j := range jobs {
		var snap *messages.JobSnapshot
		select {
		case snap = <-w.settled.ch(j.id):
		case <-time.After(replyBudget):
			t.Fatalf("job %s (%s) never settled", j.id, j.end)
		}
		settled++
		if j.racy {
			j.reported = snap.Reported
		}
		if snap.Reported {
			claimed++
		}
		wantStatus := j.end.outcome().Status
		require.Equal(settledTB, wantStatus.Name(), snap.Status.Name(), "job %s (%s, torn %v)", j.id, j.end, j.torn)
		require.NotNil(settledTB, snap.Detail, "job %s", j.id)
		require.Equal(settledTB, j.end.detail(), *snap.Detail, "job %s (%s)", j.id, j.end)
		require.Equal(settledTB, j.claimed(), snap.Reported, "job %s (%s, torn %v): claimed at settlement", j.id, j.end, j.torn)
	}
	require.Zero(settledTB, w.settled.extras(), "onJobDone ran more than once for a job")

	// Each involved incarnation: its notices, its lanes and its owner actor's state.
	var incs []*incarnation
	for _, g := range groups {
		incs = append(incs, g.inc)
		if g.replacement != nil {
			incs = append(incs, g.replacement)
		}
	}
	got := map[string][]string{}
	delivered := 0
	for _, inc := range incs {
		var st owner.Stats
		g := groupOf(groups, inc)
		stopped := g != nil && g.state == settlingTornDown // its actor has stopped: no stats
		if inc.gone || (g != nil && g.state == tearingDown) {
			select {
			case st = <-inc.probe:
			case <-time.After(replyBudget):
				t.Fatalf("%s: probe never ran", inc.name)
			}
			inc.gone = true
		} else if stopped {
			inc.gone = true
		} else {
			// Sent after every settlement above: processed after every notice.
			var err error
			st, err = inc.agent.Stats(w.ctx())
			require.NoError(t, err)
		}
		notes := inc.surf.take()
		due := 0
		for _, j := range jobs {
			if j.owner == inc && !j.claimed() {
				due++
			}
		}
		followups := 0
		if w.cfg.CompletionDelivery == jobtools.Wakeup && !inc.busy && (!inc.gone || stopped) {
			followups = min(due, w.cfg.MaxConsecutiveWakes-inc.spent)
		}
		verbs := []string{}
		for k, n := range notes {
			verbs = append(verbs, n.verb)
			id := noticedID(n.msg.Text)
			j := w.jobs[id]
			require.NotNil(noticeTB, j, "%s: notice for an unknown job: %q", inc.name, n.msg.Text)
			if w.noticed[id] {
				w.total.duplicates++
			}
			w.noticed[id] = true
			if j.owner != inc {
				w.total.stale++
			}
			require.Equal(noticeTB, inc.name, j.owner.name, "notice for %s reached another incarnation", id)
			require.False(noticeTB, j.claimed(), "%s: notice for claimed job %s (%s)", inc.name, id, j.end)
			require.Equal(noticeTB, noticeText(j), n.msg.Text)
			require.Empty(noticeTB, liveAt(t, n.read, id), "%s: notice for %s arrived while a read showed it live", inc.name, id)
			require.Equal(noticeTB, owner.Source{Kind: "plugin", Plugin: "tool-jobs", Form: "notice",
				Summary: "bash " + j.label + " " + statusLine(j)}, n.msg.Source)
			require.Equal(noticeTB, "user", n.msg.Role)
			want := "inject"
			if k < followups {
				want = "followup"
			}
			require.Equal(noticeTB, want, n.verb, "%s: notice %d of %d (%d wakes spent of %d, busy %v)",
				inc.name, k+1, due, inc.spent, w.cfg.MaxConsecutiveWakes, inc.busy)
		}
		require.Len(noticeTB, notes, due, "%s: notices delivered", inc.name)
		got[inc.name] = verbs
		delivered += len(notes)
		inc.spent += followups
		inc.delivered += len(notes)
		w.total.followups += followups
		w.total.injects += len(notes) - followups

		if stopped {
			continue
		}
		require.Zero(noticeTB, st.Duplicates, "%s: the owner actor dropped a duplicate notice", inc.name)
		require.Zero(noticeTB, st.Failed, "%s", inc.name)
		require.Equal(noticeTB, inc.delivered, st.Delivered, "%s: delivered", inc.name)
		require.Equal(noticeTB, inc.spent, st.SpentWakes, "%s: wakes spent", inc.name)
		require.LessOrEqual(noticeTB, st.SpentWakes, w.cfg.MaxConsecutiveWakes, "%s: wake budget exceeded", inc.name)
		require.Equal(noticeTB, inc.busy, st.Busy, "%s", inc.name)
	}
	require.Equal(accountTB, settled, delivered+claimed, "jobs settled == notices delivered + claimed")
	w.total.settled += settled
	w.total.delivered += delivered
	w.total.claimed += claimed
	require.Zero(accountTB, w.total.duplicates)
	require.Zero(accountTB, w.total.stale)
	return got
}

// liveAt returns job id's status in a listing if it is not settled, else "" (also
// when the listing no longer has it: a teardown removed it after it settled).
func liveAt(t testing.TB, read <-chan registry.ListResult, id string) string {
	t.Helper()
	var res registry.ListResult
	select {
	case res = <-read:
	case <-time.After(replyBudget):
		t.Fatalf("the listing taken at %s's notice never came", id)
	}
	require.NoError(t, res.Err)
	for _, snap := range res.Jobs {
		if snap.Id == id && !snap.Status.Terminal() {
			return snap.Status.Name()
		}
	}
	return ""
}

func groupOf(groups []*group, inc *incarnation) *group {
	for _, g := range groups {
		if g.inc == inc {
			return g
		}
	}
	return nil
}

// noticedID is the job id a notice names: `background job <id> (…`.
func noticedID(text string) string {
	rest, ok := strings.CutPrefix(text, "background job ")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, " ")
	return id
}

func statusLine(j *jobRec) string {
	return "[status: " + j.end.outcome().Status.Name() + ", " + j.end.detail() + "]"
}

// noticeText is SPEC §3.7's unbounded notice, written out.
func noticeText(j *jobRec) string {
	return "background job " + j.id + " (bash: " + j.label + ") finished " + statusLine(j) + ". Read its output with job_output."
}

// asSession is the user authority over session, as the human surface holds it
// (SPEC §4): the notice recorder lists what the session sees at a notice — its
// incarnation may be replaced or torn down by then — and a human kill acts with it.
// Only troupe's own code can mint it (internal/userauth).
func asSession(session string) registry.Caller {
	return userauth.ForSession(session).(registry.Caller)
}
