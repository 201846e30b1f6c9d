package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/producers/process"
	"github.com/troupe-rt/troupe/web"
)

func TestWebU09_RowsAppearLiveWithoutReload(t *testing.T) {
	e := newEnv(t, opts{})
	tb := e.open(t, "session=s1")
	tb.live()
	tb.until(`document.querySelector('[data-empty]') && !document.querySelector('[data-empty]').hidden`)
	require.Equal(t, "No background jobs", tb.text("[data-empty]"))
	require.Equal(t, "0 background jobs", tb.text("[data-count]"))

	spec := process.Shell("sleep 45", process.Config{})
	spec.Owner = e.a
	id, err := e.sys.Jobs().Start(bg, spec)
	require.NoError(t, err)
	tb.until(`document.querySelector(` + js(row(id)+` [data-cell=label]`) + `)`)
	require.Equal(t, "sleep 45", tb.text(row(id)+" [data-cell=label]"))
	require.Equal(t, "running", tb.text(row(id)+" [data-cell=status]"))
	require.Equal(t, "1 background job running", tb.text("[data-count]"))
	tb.shot("u09-running-shell-job")

	_, _, err = e.sys.Jobs().Kill(bg, id, registry.AsAgent(e.a), registry.KillOptions{Reason: "e2e"})
	require.NoError(t, err)
	tb.until(`document.querySelector(` + js(row(id)+` [data-cell=status]`) + `).textContent === 'signal: SIGTERM; e2e'`)
	require.Equal(t, "1 background job", tb.text("[data-count]"))
	tb.noProblems()
}

func TestWebU12_TheFirstPressArms(t *testing.T) {
	e := newEnv(t, opts{})
	_, run := e.start(t, e.a, "bash", "pnpm run build", nil, T)
	pb, b := e.start(t, e.a, "bash", "b", nil, T+1)
	pd, done := e.start(t, e.a, "bash", "done", nil, T+2)
	_, _, err := e.sys.Jobs().Kill(bg, b, registry.AsAgent(e.a), registry.KillOptions{})
	require.NoError(t, err)
	e.settle(t, pd, done, job.Outcome{Status: job.Completed, Detail: "exit code: 0"}, T+3)
	_ = pb
	tb := e.open(t, "session=s1&clock=manual")
	tb.live(run, b)
	tb.click(`li[data-section=settled] button.fold`)
	tb.until(`document.querySelector(` + js(row(done)) + `)`)
	require.Equal(t, 1, tb.count(`button[data-kill-state]`), "only the running row has a stop button")
	stop := row(run) + ` button[data-kill-state]`
	require.Equal(t, "idle", tb.attr(stop, "data-kill-state"))
	require.Equal(t, "Stop task pnpm run build", tb.attr(stop, "aria-label"))
	require.Equal(t, "Stop task pnpm run build", tb.attr(stop, "title"))
	require.Equal(t, "", tb.text(stop))
	expanded := tb.attr(row(run)+" button.toggle", "aria-expanded")
	tb.shot("u12-idle")

	tb.click(stop)
	require.Equal(t, "armed", tb.attr(stop, "data-kill-state"))
	require.Equal(t, "Click again to confirm", tb.attr(stop, "aria-label"))
	require.Equal(t, "Click again to confirm", tb.attr(stop, "title"))
	require.Equal(t, "Confirm stop", tb.text(stop))
	_, kills, _ := e.mw.counts()
	require.Zero(t, kills)
	require.Equal(t, expanded, tb.attr(row(run)+" button.toggle", "aria-expanded"), "pressing stop never toggles the row")
	require.Equal(t, "running", tb.attr(row(run), "data-status"))
	tb.shot("u12-armed")
}

func TestWebU13_TheConfirmingPressKillsAndTheModelIsTold(t *testing.T) {
	e := newEnv(t, opts{flush: time.Second})
	p, id := e.start(t, e.a, "bash", "sleep 60", nil, T)
	require.Equal(t, "bash-1", id)
	tb := e.open(t, "session=s1&clock=manual")
	tb.live(id)
	stop := row(id) + ` button[data-kill-state]`
	tb.click(stop)
	tb.advance(1000)
	tb.click(stop)
	untilGo(t, "the kill answer", func() bool { _, _, a := e.mw.counts(); return a == 1 })
	require.Equal(t, []string{`{"sessionId":"s1","jobId":"bash-1"}`}, e.mw.killBodies())
	require.Equal(t, "pending", tb.attr(stop, "data-kill-state"))
	require.Equal(t, "", tb.attr(stop, "disabled"))
	tb.shot("u13-pending")
	tb.until(`document.querySelector(` + js(row(id)) + `).getAttribute('data-status') === 'stopping'`)
	require.Zero(t, tb.count(stop), "the stopping frame removes the button")
	require.Equal(t, "cancelled by the user", p.NextCancel(t))
	p.Settle(job.Outcome{Status: job.Killed, Detail: "signal: SIGTERM"})
	tb.until(`document.querySelector(` + js(row(id)+` [data-cell=status]`) + `).textContent === 'signal: SIGTERM; cancelled by the user'`)
	_, kills, _ := e.mw.counts()
	require.Equal(t, 1, kills, "exactly one api/kill")
	select {
	case m := <-e.in.msgs:
		require.Equal(t, "background job bash-1 (bash: sleep 60) finished [status: killed, signal: SIGTERM; cancelled by the user]. Read its output with job_output.", m.Text)
	case <-time.After(wait):
		t.Fatal("the model was not told")
	}
	tb.shot("u13-cancelled-by-the-user")
}

func TestWebU15_TheConfirmWindowDisarmsAfter3000ms(t *testing.T) {
	e := newEnv(t, opts{})
	_, id := e.start(t, e.a, "bash", "pnpm run build", nil, T)
	tb := e.open(t, "session=s1&clock=manual")
	tb.live(id)
	stop := row(id) + ` button[data-kill-state]`
	tb.click(stop)
	tb.advance(2999)
	require.Equal(t, "armed", tb.attr(stop, "data-kill-state"))
	tb.advance(1)
	require.Equal(t, "idle", tb.attr(stop, "data-kill-state"))
	require.Equal(t, "Stop task pnpm run build", tb.attr(stop, "aria-label"))
	_, kills, _ := e.mw.counts()
	require.Zero(t, kills)
}

func TestWebU17_AFailedKillShowsItsHintFor4000ms(t *testing.T) {
	for _, mode := range []int32{killFail, killDrop} {
		e := newEnv(t, opts{})
		e.mw.killMode.Store(mode)
		_, id := e.start(t, e.a, "bash", "pnpm run build", nil, T)
		tb := e.open(t, "session=s1&clock=manual")
		tb.live(id)
		stop := row(id) + ` button[data-kill-state]`
		tb.click(stop)
		tb.click(stop)
		tb.until(`document.querySelector(` + js(stop) + `).getAttribute('data-kill-state') === 'failed'`)
		require.Equal(t, "Stop failed", tb.attr(stop, "aria-label"))
		require.Equal(t, "Stop failed", tb.attr(stop, "title"))
		require.Equal(t, "<none>", tb.attr(stop, "disabled"))
		require.Equal(t, "", tb.text(stop))
		if mode == killFail {
			tb.shot("u17-stop-failed")
		}
		tb.advance(3999)
		require.Equal(t, "failed", tb.attr(stop, "data-kill-state"))
		tb.advance(1)
		require.Equal(t, "idle", tb.attr(stop, "data-kill-state"))
		require.Equal(t, "Stop task pnpm run build", tb.attr(stop, "aria-label"))
		snap, err := e.sys.Jobs().Get(bg, id, registry.AsAgent(e.a))
		require.NoError(t, err)
		require.Equal(t, job.Running, snap.Status)
	}
}

func TestWebU19_ArmingASecondRowDisarmsTheFirst(t *testing.T) {
	e := newEnv(t, opts{flush: time.Second})
	p1, build := e.start(t, e.a, "bash", "pnpm run build", nil, T)
	p2, watch := e.start(t, e.a, "bash", "pnpm run watch", nil, T+1)
	tb := e.open(t, "session=s1&clock=manual")
	tb.live(build, watch)
	s1, s2 := row(build)+` button[data-kill-state]`, row(watch)+` button[data-kill-state]`
	tb.click(s1)
	tb.click(s2)
	require.Equal(t, "armed", tb.attr(s2, "data-kill-state"))
	require.Equal(t, "idle", tb.attr(s1, "data-kill-state"))
	tb.click(s2)
	untilGo(t, "the kill answer", func() bool { _, _, a := e.mw.counts(); return a == 1 })
	require.Equal(t, []string{`{"sessionId":"s1","jobId":"` + watch + `"}`}, e.mw.killBodies())
	require.Equal(t, "cancelled by the user", p2.NextCancel(t))
	require.Empty(t, p1.Cancels())
	require.Equal(t, "running", tb.attr(row(build), "data-status"))
	require.Equal(t, "idle", tb.attr(s1, "data-kill-state"))
}

func TestWebU21_ARowThatSettlesClearsItsArmedPhase(t *testing.T) {
	e := newEnv(t, opts{})
	p, id := e.start(t, e.a, "bash", "pnpm run build", nil, T)
	tb := e.open(t, "session=s1&clock=manual")
	tb.live(id)
	stop := row(id) + ` button[data-kill-state]`
	tb.click(stop)
	require.Equal(t, "armed", tb.attr(stop, "data-kill-state"))
	p.Settle(job.Outcome{Status: job.Completed, Detail: "exit code: 0"})
	tb.until(`document.querySelector(` + js(row(id)+` [data-cell=status]`) + `) && document.querySelector(` + js(row(id)+` [data-cell=status]`) + `).textContent === 'exit code: 0'`)
	require.Zero(t, tb.count(`[data-kill-state]`))
	tb.advance(3000)
	require.Zero(t, tb.count(`[data-kill-state]`))
	require.Equal(t, "exit code: 0", tb.text(row(id)+" [data-cell=status]"))
	_, kills, _ := e.mw.counts()
	require.Zero(t, kills)
}

func TestWebU23_KeyboardEnterSpaceAndEscape(t *testing.T) {
	e := newEnv(t, opts{flush: time.Second})
	_, one := e.start(t, e.a, "bash", "pnpm run build", nil, T)
	_, two := e.start(t, e.a, "bash", "pnpm run watch", nil, T+1)
	tb := e.open(t, "session=s1&clock=manual")
	tb.live(one, two)
	stop1, stop2 := row(one)+` button[data-kill-state]`, row(two)+` button[data-kill-state]`

	eval[any](tb, `document.querySelector(`+js(row(two)+" button.toggle")+`).focus(), 0`)
	tb.keys(kb.Tab)
	require.True(t, eval[bool](tb, `document.activeElement === document.querySelector(`+js(stop2)+`)`), "Tab moves from the toggle to the stop button")
	tb.keys(kb.Enter)
	require.Equal(t, "armed", tb.attr(stop2, "data-kill-state"))
	tb.keys(kb.Escape)
	require.Equal(t, "idle", tb.attr(stop2, "data-kill-state"))
	require.True(t, eval[bool](tb, `document.activeElement === document.querySelector(`+js(stop2)+`)`), "focus stays on the button")

	eval[any](tb, `document.querySelector(`+js(row(one)+" button.toggle")+`).focus(), 0`)
	tb.keys(kb.Tab)
	require.True(t, eval[bool](tb, `document.activeElement === document.querySelector(`+js(stop1)+`)`))
	tb.keys(kb.Enter)
	require.Equal(t, "armed", tb.attr(stop1, "data-kill-state"))
	_, kills, _ := e.mw.counts()
	require.Zero(t, kills, "Enter arms, Escape disarms: no request")
	tb.keys(" ")
	untilGo(t, "the kill answer", func() bool { _, _, a := e.mw.counts(); return a == 1 })
	require.Equal(t, []string{`{"sessionId":"s1","jobId":"` + one + `"}`}, e.mw.killBodies())
	require.Equal(t, "pending", tb.attr(stop1, "data-kill-state"))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_ = ctx
}

func TestWebFocusMovesWhenTheStopButtonGoes(t *testing.T) {
	e := newEnv(t, opts{})
	_, one := e.start(t, e.a, "bash", "pnpm run build", nil, T)
	_, two := e.start(t, e.a, "bash", "pnpm run watch", nil, T+1)
	tb := e.open(t, "session=s1&clock=manual")
	tb.live(one, two)
	stop1 := row(one) + ` button[data-kill-state]`
	eval[any](tb, `document.querySelector(`+js(stop1)+`).focus(), 0`)
	_, _, err := e.sys.Jobs().Kill(bg, one, registry.AsAgent(e.a), registry.KillOptions{Reason: "model"})
	require.NoError(t, err)
	tb.until(`document.querySelector(` + js(row(one)) + `).getAttribute('data-status') === 'stopping'`)
	require.True(t, eval[bool](tb, `document.activeElement === document.querySelector(`+js(row(one)+" button.toggle")+`)`),
		"focus moves to the row's toggle when its stop button goes")

	// A removed row: focus moves to the list.
	stop2 := row(two) + ` button[data-kill-state]`
	eval[any](tb, `document.querySelector(`+js(stop2)+`).focus(), 0`)
	eval[any](tb, `window.troupeTest.inject('rows', {session: 's1', jobs: [{id: `+js(one)+`, kind: 'bash', label: 'pnpm run build', status: 'stopping', startedAt: 1}]}), 0`)
	require.True(t, eval[bool](tb, `document.activeElement === document.querySelector('ul[aria-label="Background jobs"]')`),
		"focus moves to the list when the row is removed")
}

func TestWebSwitchingSessionReopensTheChannel(t *testing.T) {
	e := newEnv(t, opts{})
	a2, _ := e.agent(t, "s2")
	_, mine := e.start(t, e.a, "bash", "mine", nil, T)
	_, theirs := e.start(t, a2, "bash", "theirs", nil, T+1)
	tb := e.open(t, "session=s1&clock=manual")
	tb.live(mine)
	require.Equal(t, []string{"main", "s2", "Unowned jobs"}, tb.texts(`select[aria-label=Session] option`))
	stop := row(mine) + ` button[data-kill-state]`
	tb.click(stop)
	require.Equal(t, "armed", tb.attr(stop, "data-kill-state"))
	eval[any](tb, `(function(){var s=document.querySelector('select[aria-label=Session]');s.value='s2';s.dispatchEvent(new Event('change'));})(), 0`)
	tb.until(`document.querySelector(` + js(row(theirs)) + `)`)
	require.Zero(t, tb.count(row(mine)), "another session's job never appears")
	require.Equal(t, "idle", tb.attr(row(theirs)+` button[data-kill-state]`, "data-kill-state"))
	require.Contains(t, eval[string](tb, `location.hash`), "session=s2")
	require.NotContains(t, eval[[]string](tb, `window.troupeTest.timers()`), "confirm", "the switch cleared the armed phase")
	untilGo(t, "one roster", func() bool { return e.h.Streams() == web.StreamCounts{Rosters: 1} })
}
