package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/web"
)

func TestWebU31_FollowingStartsAndStopsWithThePanel(t *testing.T) {
	e := newEnv(t, opts{})
	rec := job.NewRecord()
	_, build := e.start(t, e.a, "bash", "pnpm run build", rec, T)
	_, watch := e.start(t, e.a, "bash", "pnpm run watch", job.NewRecord(), T+1)
	tb := e.open(t, "session=s1&clock=manual")
	tb.live(build, watch)
	toggle := row(build) + " button.toggle"
	tb.click(toggle)
	require.Equal(t, "Hide live output of pnpm run build", tb.attr(toggle, "aria-label"))
	require.Equal(t, "true", tb.attr(toggle, "aria-expanded"))
	untilGo(t, "one follow", func() bool { return e.h.Streams().Follows == 1 })
	panel := `[data-panel-for=` + js(build) + `]`
	require.Equal(t, "true", tb.attr(panel, "data-streaming"))
	require.Equal(t, "", tb.text(panel+" pre"))
	rec.Append("compiling…\n", job.AppendOptions{Channel: "stdout"})
	start := time.Now()
	tb.until(`document.querySelector(` + js(panel+" pre") + `).textContent.indexOf('compiling…') >= 0`)
	require.Less(t, time.Since(start), 2*time.Second)
	tb.shot("u31-following")
	before, _, _ := e.mw.counts()
	tb.click(row(watch) + " button.toggle")
	tb.until(`!document.querySelector(` + js(panel) + `)`)
	require.Equal(t, 1, tb.count(`[data-panel-for=`+js(watch)+`]`))
	untilGo(t, "the follow moved to the new stream", func() bool {
		n, _, _ := e.mw.counts()
		return n > before && e.h.Streams() == web.StreamCounts{Rosters: 1, Follows: 1}
	})
	tb.click(row(watch) + " button.toggle")
	untilGo(t, "no follow", func() bool { return e.h.Streams().Follows == 0 })

	// A record that evicted its head: the gap line above the text.
	big := job.NewRecord()
	for i := range 300 {
		big.Append(fmt.Sprintf("%04d %s\n", i, strings.Repeat("x", 1018)), job.AppendOptions{Channel: "stdout"})
	}
	_, lossy := e.start(t, e.a, "bash", "make -j8", big, T+2)
	tb.until(`document.querySelector(` + js(row(lossy)+" button.toggle") + `)`)
	tb.click(row(lossy) + " button.toggle")
	lp := `[data-panel-for=` + js(lossy) + `]`
	tb.until(`document.querySelector(` + js(lp+" pre") + `) && document.querySelector(` + js(lp+" pre") + `).textContent.indexOf('0299 ') >= 0`)
	require.Equal(t, "… earlier output dropped …", tb.text(lp+" [data-notice=gap]"))
	require.False(t, eval[bool](tb, `document.querySelector(`+js(lp+" [data-notice=gap]")+`).hidden`))
	require.True(t, eval[bool](tb, `!!(document.querySelector(`+js(lp+" [data-notice=gap]")+`).compareDocumentPosition(document.querySelector(`+js(lp+" pre")+`)) & Node.DOCUMENT_POSITION_FOLLOWING)`), "the gap line is above the text")
	tb.shot("u31-gap")

	// A panel left open on a job that settles without a byte: (no output). (The
	// settled section is folded while live rows exist: it is opened to see it.)
	p3, quiet := e.start(t, e.a, "bash", "true", job.NewRecord(), T+3)
	tb.until(`document.querySelector(` + js(row(quiet)+" button.toggle") + `)`)
	tb.click(row(quiet) + " button.toggle")
	qp := `[data-panel-for=` + js(quiet) + `]`
	tb.until(`document.querySelector(` + js(qp) + `)`)
	untilGo(t, "the follow", func() bool { return e.h.Streams().Follows == 1 })
	p3.Settle(job.Outcome{Status: job.Completed, Detail: "exit code: 0"})
	tb.until(`document.querySelector('li[data-section=settled] button.fold')`)
	tb.click(`li[data-section=settled] button.fold`)
	tb.until(`document.querySelector(` + js(qp) + `) && document.querySelector(` + js(qp) + `).getAttribute('data-streaming') === 'false'`)
	require.Equal(t, "(no output)", tb.text(qp+" pre"))

	// An injected follow problem.
	tb.click(row(build) + " button.toggle")
	tb.until(`document.querySelector(` + js(panel+" pre") + `) && document.querySelector(` + js(panel+" pre") + `).textContent.indexOf('compiling…') >= 0`)
	eval[any](tb, `window.troupeTest.inject('problem', {scope: 'follow', jobId: `+js(build)+`, code: 'web/test', message: 'connection lost'}), 0`)
	require.Equal(t, "live output stream interrupted: connection lost", tb.text(panel+" [data-notice=error]"))
	require.Equal(t, "false", tb.attr(panel, "data-streaming"))
	tb.noProblems()
}

func TestWebU35_AReconnectKeepsThePanelAndResumesFromTheCursor(t *testing.T) {
	e := newEnv(t, opts{})
	rec := job.NewRecord()
	_, id := e.start(t, e.a, "bash", "tail -f log", rec, T)
	require.Equal(t, "bash-1", id)
	rec.Append("one\n", job.AppendOptions{Channel: "stdout"})
	tb := e.open(t, "session=s1&clock=manual")
	tb.live(id)
	tb.click(row(id) + " button.toggle")
	panel := `[data-panel-for=` + js(id) + `] pre`
	tb.until(`document.querySelector(` + js(panel) + `) && document.querySelector(` + js(panel) + `).textContent === 'one\n'`)
	require.Equal(t, 1, e.mw.cut())
	rec.Append("two\n", job.AppendOptions{Channel: "stdout"})
	_, id2 := e.start(t, e.a, "bash", "second", nil, T+1)
	tb.until(`document.querySelector('[data-conn]').textContent === 'Reconnecting…'`)
	tb.shot("u35-reconnecting")
	tb.until(`document.querySelector('[data-conn]').textContent === 'Live'`)
	tb.until(`document.querySelector(` + js(row(id2)) + `)`)
	tb.until(`document.querySelector(` + js(panel) + `).textContent === 'one\ntwo\n'`)
	require.Contains(t, e.mw.lastIDs(), "bash-1@4", "the browser resumed with Last-Event-ID")
}

func TestWebU37_CloseDisconnectsThePageForGood(t *testing.T) {
	e := newEnv(t, opts{})
	_, id := e.start(t, e.a, "bash", "sleep 60", nil, T)
	tb := e.open(t, "session=s1&clock=manual")
	tb.live(id)
	require.Equal(t, 1, tb.count(`button[data-kill-state]`))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, e.h.Close(ctx))
	tb.until(`document.querySelector('[data-conn]').textContent === 'Disconnected'`)
	require.Equal(t, "disconnected", tb.attr("[data-conn]", "data-conn"))
	require.Equal(t, "closed", eval[string](tb, `window.troupeTest.streamState()`))
	require.Equal(t, 1, tb.count(row(id)), "rows stay, dimmed")
	require.Zero(t, tb.count(`button[data-kill-state]`))
	tb.shot("u37-disconnected")
	events, _, _ := e.mw.counts()
	// The browser would retry after retry: 1000 ms; watch for twice that.
	quiet := time.After(2 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-quiet:
			done = true
		case <-tick.C:
			n, _, _ := e.mw.counts()
			require.Equal(t, events, n, "no further events request")
		}
	}

	// A restart: a new handler, a new token; the old launch URL is 404.
	h2, err := web.New(e.sys, e.ctl, web.Config{Sessions: func() []web.Session { return []web.Session{{ID: "s1"}} }})
	require.NoError(t, err)
	require.NotEqual(t, e.h.LaunchPath(), h2.LaunchPath())
	var hh http.Handler = h2
	e.mw.next.Store(&hh)
	resp, err := http.Get(e.srv.URL + e.h.LaunchPath())
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.NoError(t, h2.Close(ctx))
}

// attacker is a page of another origin that knows the token (the worst case) and
// tries every cross-origin way in: fetch POST, a no-cors fetch, a form post, an
// EventSource and a frame.
const attacker = `<!doctype html><html><body><div id=out></div>
<iframe id=f></iframe>
<form id=form method=POST enctype=text/plain target=sink><input name='{"sessionId":"s1","jobId":"bash-1","x":"' value='"}'></form>
<iframe name=sink></iframe>
<script>
var base = location.hash.slice(1);
var out = [];
function note(s) { out.push(s); document.getElementById('out').textContent = out.join('|'); }
fetch(base + 'api/kill', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{"sessionId":"s1","jobId":"bash-1"}'})
  .then(function (r) { note('cors:' + r.status); }, function () { note('cors:blocked'); });
fetch(base + 'api/kill', {method: 'POST', mode: 'no-cors', body: '{"sessionId":"s1","jobId":"bash-1"}'})
  .then(function () { note('nocors:sent'); }, function () { note('nocors:blocked'); });
var es = new EventSource(base + 'events?session=s1');
es.onmessage = function () { note('es:read'); };
es.addEventListener('rows', function () { note('es:rows'); });
es.onerror = function () { note('es:error'); es.close(); };
document.getElementById('form').action = base + 'api/kill';
document.getElementById('form').submit();
document.getElementById('f').src = base;
</script></body></html>`

func TestWebSecurityCrossOriginPagesGetNothing(t *testing.T) {
	e := newEnv(t, opts{})
	p, id := e.start(t, e.a, "bash", "sleep 60", nil, T)
	require.Equal(t, "bash-1", id)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(attacker))
	}))
	defer evil.Close()
	// Another origin: the attacker's server is addressed as localhost, the task list as 127.0.0.1.
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)
	tb := e.openURL(t, evilURL+"/#"+e.srv.URL+e.h.LaunchPath())
	tb.until(`document.getElementById('out').textContent.indexOf('es:error') >= 0 && document.getElementById('out').textContent.indexOf('cors:') >= 0 && document.getElementById('out').textContent.indexOf('nocors:') >= 0`)
	out := tb.text("#out")
	require.NotContains(t, out, "es:rows", "another origin cannot read the stream")
	require.NotContains(t, out, "cors:200")
	snap, err := e.sys.Jobs().Get(bg, id, registry.AsAgent(e.a))
	require.NoError(t, err)
	require.Equal(t, job.Running, snap.Status)
	require.Empty(t, p.Cancels(), "no cross-origin kill reached the producer")
	// The frame was refused (X-Frame-Options / frame-ancestors): its document is not the page.
	require.Equal(t, 0, e.h.Streams().Rosters, "the framed page opened no stream")
}

func TestWebSecurityModelTextIsNeverMarkup(t *testing.T) {
	e := newEnv(t, opts{})
	rec := job.NewRecord()
	rec.Append(`<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>`+"\n", job.AppendOptions{Channel: "stderr"})
	_, id := e.start(t, e.a, "bash", `<img src=x onerror="window.__pwned=1">`, rec, T)
	tb := e.open(t, "session=s1")
	tb.live(id)
	tb.click(row(id) + " button.toggle")
	tb.until(`document.querySelector('[data-panel-for] pre') && document.querySelector('[data-panel-for] pre').textContent.indexOf('<script>') >= 0`)
	require.Equal(t, `<img src=x onerror="window.__pwned=1">`, tb.text(row(id)+" [data-cell=label]"))
	require.Zero(t, tb.count(`#main img, #main script`))
	require.Equal(t, 1, tb.count(`[data-panel-for] pre [data-channel=stderr]`))
	require.True(t, eval[bool](tb, `window.__pwned === undefined`))
	tb.noProblems()
}

func TestWebSecurityAWrongTokenIsAPlain404(t *testing.T) {
	e := newEnv(t, opts{})
	lp := e.h.LaunchPath()
	bad := lp[:5] + string(rune('A'+('z'-rune(lp[5]))%26)) + lp[6:]
	if bad == lp {
		bad = lp[:5] + "_" + lp[6:]
	}
	tb := e.openURL(t, e.srv.URL+bad)
	tb.until(`document.body && document.body.textContent.indexOf('404 page not found') >= 0`)
	events, kills, _ := e.mw.counts()
	require.Zero(t, events+kills)
	require.Equal(t, web.StreamCounts{}, e.h.Streams())
}
