package e2e

import (
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/web"
)

func TestWebU04_StatusWordsMarkersAndTextOnlyLabels(t *testing.T) {
	e := newEnv(t, opts{})
	_, build := e.start(t, e.a, "bash", "pnpm run build", nil, T)
	_, markup := e.start(t, e.a, "bash", "<b>x</b>", nil, T+1)
	_, b := e.start(t, e.a, "bash", "b", nil, T+2)
	_, _, err := e.sys.Jobs().Kill(bg, b, registry.AsAgent(e.a), registry.KillOptions{})
	require.NoError(t, err)
	rec := job.NewRecord()
	rec.Append("hello world\n", job.AppendOptions{Channel: "stdout"})
	pc, c := e.start(t, e.a, "bash", "c", rec, T+3)
	pd, d := e.start(t, e.a, "bash", "d", nil, T+4)
	pe, ee := e.start(t, e.a, "bash", "e", nil, T+5)
	e.settle(t, pc, c, job.Outcome{Status: job.Completed, Detail: "exit code: 0"}, T+10)
	_, _, err = e.sys.Jobs().Kill(bg, d, registry.AsAgent(e.a), registry.KillOptions{})
	require.NoError(t, err)
	e.settle(t, pd, d, job.Outcome{Status: job.Killed}, T+20)
	e.settle(t, pe, ee, job.Outcome{Status: job.Failed}, T+30)

	tb := e.open(t, "session=s1")
	tb.live(build, markup, b)
	tb.click(`li[data-section=settled] button.fold`)
	tb.until(`document.querySelector(` + js(row(c)) + `)`)
	require.Equal(t, []string{"running", "running", "stopping", "failed", "cancelled", "exit code: 0"}, tb.texts(`li[data-job-id] [data-cell=status]`))
	require.Equal(t, []string{"ongoing", "ongoing", "warning", "error", "warning", "done"},
		eval[[]string](tb, `Array.from(document.querySelectorAll('li[data-job-id] [data-state]')).map(function(e){return e.getAttribute('data-state');})`))
	require.Equal(t, "<b>x</b>", tb.text(row(markup)+" [data-cell=label]"))
	require.Zero(t, tb.count(`#jobs b`), "a label is text, never markup")
	for _, id := range []string{build, markup, b} {
		label := tb.text(row(id) + " [data-cell=label]")
		require.Equal(t, "Show live output of "+label, tb.attr(row(id)+" button.toggle", "aria-label"))
	}
	require.Equal(t, 1, tb.count(row(c)+" button.toggle"), "c has a record with output")
	require.Zero(t, tb.count(row(d)+" button.toggle"))
	require.Zero(t, tb.count(row(ee)+" button.toggle"))
	tb.shot("u04-every-status")
	tb.noProblems()
}

func TestWebU05_LiveRowsFirstThenSettledNewestFirst(t *testing.T) {
	e := newEnv(t, opts{})
	pa, a := e.start(t, e.a, "bash", "settled-a", nil, T+10)
	pc, c := e.start(t, e.a, "bash", "settled-c", nil, T+80)
	pe, ee := e.start(t, e.a, "bash", "settled-e", nil, T+95)
	pd, d := e.start(t, e.a, "bash", "settled-d", nil, T+10)
	_, l1 := e.start(t, e.a, "bash", "live-1", nil, T+5)
	_, l2 := e.start(t, e.a, "bash", "live-2", nil, T+3)
	e.settle(t, pa, a, job.Outcome{Status: job.Completed}, T+100)
	e.settle(t, pc, c, job.Outcome{Status: job.Completed}, T+100)
	e.settle(t, pe, ee, job.Outcome{Status: job.Completed}, T+50)
	e.settle(t, pd, d, job.Outcome{Status: job.Completed}, T+200)
	tb := e.open(t, "session=s1")
	tb.live(l1, l2)
	tb.click(`li[data-section=settled] button.fold`)
	tb.until(`document.querySelectorAll('li[data-job-id]').length === 6`)
	require.Equal(t, []string{"live-2", "live-1", "settled-d", "settled-a", "settled-c", "settled-e"}, tb.texts(`li[data-job-id] [data-cell=label]`))
	require.Equal(t, "0s", tb.text(row(ee)+" [data-cell=duration]"))
}

func TestWebU06_DurationsAndTheTickClock(t *testing.T) {
	e := newEnv(t, opts{})
	_, live := e.start(t, e.a, "bash", "live", nil, T+15000)
	cases := []struct {
		from, to int64
		want     string
	}{{T, T + 12000, "12s"}, {T - 3800000, T, "1h 3m"}, {T - 100000, T - 28000, "1m 12s"}, {T, T + 125000, "2m 5s"}, {T, T + 7380000, "2h 3m"}}
	var ids []string
	for _, c := range cases {
		p, id := e.start(t, e.a, "bash", "settled", nil, c.from)
		e.settle(t, p, id, job.Outcome{Status: job.Completed}, c.to)
		ids = append(ids, id)
	}
	tb := e.open(t, "session=s1&clock=manual")
	tb.live(live)
	tb.setNow(T + 20000)
	tb.click(`li[data-section=settled] button.fold`)
	tb.until(`document.querySelectorAll('li[data-job-id]').length === 6`)
	require.Equal(t, "5s", tb.text(row(live)+" [data-cell=duration]"))
	require.Equal(t, "Running for 5s", tb.attr(row(live)+" [data-cell=duration]", "title"))
	for i, c := range cases {
		require.Equal(t, c.want, tb.text(row(ids[i])+" [data-cell=duration]"), c)
	}
	require.Equal(t, "Took 12s", tb.attr(row(ids[0])+" [data-cell=duration]", "title"))
	tb.advance(1000)
	require.Equal(t, "6s", tb.text(row(live)+" [data-cell=duration]"))
	for i, c := range cases {
		require.Equal(t, c.want, tb.text(row(ids[i])+" [data-cell=duration]"), "settled rows are frozen")
	}
	// Only settled rows (one without finishedAt): 0s, and no tick is pending.
	eval[any](tb, `window.troupeTest.inject('rows', {session: 's1', jobs: [{id: 'bash-99', kind: 'bash', label: 'odd', status: 'completed', startedAt: `+strconv.FormatInt(T, 10)+`}]}), 0`)
	tb.until(`document.querySelector(` + js(row("bash-99")) + `)`)
	require.Equal(t, "0s", tb.text(row("bash-99")+" [data-cell=duration]"))
	require.NotContains(t, eval[[]string](tb, `window.troupeTest.timers()`), "tick")
}

func TestWebU07_TheCountAndTheEmptyState(t *testing.T) {
	e := newEnv(t, opts{})
	tb := e.open(t, "session=s1&clock=manual")
	tb.live()
	tb.until(`document.querySelector('[data-count]').textContent === '0 background jobs'`)
	require.Equal(t, "No background jobs", tb.text("[data-empty]"))
	tb.shot("u07-empty")
	p1, j1 := e.start(t, e.a, "bash", "one", nil, T)
	tb.until(`document.querySelector('[data-count]').textContent === '1 background job running'`)
	p2, j2 := e.start(t, e.a, "bash", "two", nil, T+1)
	_, _, err := e.sys.Jobs().Kill(bg, j2, registry.AsAgent(e.a), registry.KillOptions{})
	require.NoError(t, err)
	tb.until(`document.querySelector(` + js(row(j2)) + `) && document.querySelector(` + js(row(j2)) + `).getAttribute('data-status') === 'stopping'`)
	require.Equal(t, "2 background jobs running", tb.text("[data-count]"))
	e.settle(t, p2, j2, job.Outcome{Status: job.Killed}, T+2)
	e.settle(t, p1, j1, job.Outcome{Status: job.Completed}, T+3)
	tb.until(`document.querySelector('[data-count]').textContent === '2 background jobs'`)
	eval[any](tb, `window.troupeTest.inject('rows', {session: 's1', jobs: [{id: 'bash-1', kind: 'bash', label: 'one', status: 'completed', startedAt: 1, finishedAt: 2}]}), 0`)
	require.Equal(t, "1 background job", tb.text("[data-count]"))
}

func TestWebU08_TheSettledSectionFoldsAndClears(t *testing.T) {
	e := newEnv(t, opts{})
	_, run := e.start(t, e.a, "bash", "running work", nil, T)
	pw, work := e.start(t, e.a, "bash", "settled work", nil, T+1)
	e.settle(t, pw, work, job.Outcome{Status: job.Completed}, T+2)
	tb := e.open(t, "session=s1")
	tb.live(run)
	tb.until(`document.querySelector('li[data-section=settled]')`)
	require.Equal(t, []string{"live", run, "settled"}, eval[[]string](tb,
		`Array.from(document.querySelectorAll('#jobs > li')).map(function(e){return e.getAttribute('data-section') || e.getAttribute('data-job-id');})`))
	require.Equal(t, "Running", tb.text(`li[data-section=live]`))
	fold := `li[data-section=settled] button.fold`
	require.Equal(t, "Finished 1", tb.text(fold))
	require.Equal(t, "false", tb.attr(fold, "aria-expanded"))
	require.Zero(t, tb.count(row(work)))
	tb.click(fold)
	require.Equal(t, 1, tb.count(row(work)))
	require.Equal(t, "true", tb.attr(fold, "aria-expanded"))
	tb.click(`li[data-section=settled] button.clear`)
	require.Zero(t, tb.count(row(work)))
	require.Zero(t, tb.count(`li[data-section=settled]`))
	require.Equal(t, "1 background job running", tb.text("[data-count]"))
	p3, j3 := e.start(t, e.a, "bash", "later work", nil, T+3)
	e.settle(t, p3, j3, job.Outcome{Status: job.Completed}, T+4)
	tb.until(`document.querySelector(` + js(row(j3)) + `)`)
	require.Equal(t, "Finished 1", tb.text(fold))
	require.Equal(t, "true", tb.attr(fold, "aria-expanded"), "the user's choice wins")
	require.Zero(t, tb.count(row(work)))

	a2, _ := e.agent(t, "s2")
	p4, j4 := e.start(t, a2, "bash", "only settled", nil, T+5)
	e.settle(t, p4, j4, job.Outcome{Status: job.Completed}, T+6)
	tb2 := e.open(t, "session=s2")
	tb2.live(j4)
	require.Equal(t, "true", tb2.attr(fold, "aria-expanded"), "with only settled rows the section opens on load")
}

func TestWebU10_AnOwnersTeardownRemovesItsRowsAndTheFollow(t *testing.T) {
	e := newEnv(t, opts{})
	rec := job.NewRecord()
	p, id := e.start(t, e.a, "bash", "sleep 60", rec, T)
	p.OnCancel = &job.Outcome{Status: job.Killed, Detail: "signal: SIGTERM"}
	tb := e.open(t, "session=s1")
	tb.live(id)
	tb.click(row(id) + " button.toggle")
	untilGo(t, "one follow", func() bool { return e.h.Streams().Follows == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, e.a.Dispose(ctx))
	tb.until(`!document.querySelector(` + js(row(id)) + `)`)
	require.Zero(t, tb.count(`[data-panel-for]`))
	deadline := time.Now().Add(2 * time.Second)
	untilGo(t, "0 follows, 1 roster", func() bool { return e.h.Streams() == web.StreamCounts{Rosters: 1} })
	require.True(t, time.Now().Before(deadline), "within 2 s")
}

// lister is a child lister the test changes.
type lister struct{ children atomic.Pointer[[]web.Child] }

func (l *lister) Children(context.Context, string) ([]web.Child, error) {
	return slices.Clone(*l.children.Load()), nil
}

func TestWebU11_SubagentJobsAndContinuableChildren(t *testing.T) {
	l := &lister{}
	l.children.Store(&[]web.Child{{ID: "c-1", Label: "review", Status: "running", Epoch: 3, Queued: 1},
		{ID: "c-2", Status: "ready"}, {ID: "c-3", Status: "ready", Diagnostic: "corrupt"}})
	e := newEnv(t, opts{children: l})
	_, sub := e.start(t, e.a, "subagent", "explore the repo", nil, T)
	require.Equal(t, "subagent-1", sub)
	tb := e.open(t, "session=s1")
	tb.live(sub)
	require.Equal(t, "Stop task explore the repo", tb.attr(row(sub)+" button[data-kill-state]", "aria-label"))
	require.Equal(t, "1 background job running", tb.text("[data-count]"))
	tb.until(`document.querySelectorAll('ul[aria-label=Subagents] li[data-child-id]').length === 3`)
	cells := eval[[][]string](tb, `Array.from(document.querySelectorAll('ul[aria-label=Subagents] li[data-child-id]')).map(function(li){
		return ['mode','label','activity'].map(function(k){return li.querySelector('[data-cell='+k+']').textContent;});})`)
	require.Equal(t, [][]string{{"continuable", "review", "running"}, {"continuable", "c-2", "not running"}, {"continuable", "c-3", "record damaged"}}, cells)
	require.Zero(t, tb.count(`li[data-child-id] button`), "activity rows have no stop button and no toggle")
	require.Equal(t, "epoch 3", tb.text(`li[data-child-id=c-1] [data-cell=epoch]`))
	require.Equal(t, "1 queued", tb.text(`li[data-child-id=c-1] [data-cell=queue]`))
	tb.until(`document.querySelector('ul[aria-label="Supervision tree"] li')`)
	tb.shot("u11-children-and-tree")
	l.children.Store(&[]web.Child{{ID: "c-1", Label: "review", Status: "running", Epoch: 3, Queued: 1},
		{ID: "c-2", Status: "idle", Epoch: 1}, {ID: "c-3", Status: "ready", Diagnostic: "corrupt"}})
	start := time.Now()
	tb.until(`document.querySelector('li[data-child-id=c-2] [data-cell=activity]').textContent === 'idle'`)
	require.Less(t, time.Since(start), 2*time.Second)
}
