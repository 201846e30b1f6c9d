// Package e2e drives the task list in a real headless Chromium (Debian's
// chromium, or $TROUPE_CHROME) through chromedp, against httptest servers over a
// real troupe system. The tests skip when no browser is found, unless CI=true,
// TROUPE_WEB_E2E_REQUIRED=1 or TROUPE_REQUIRE_BROWSER=1, which make a missing
// browser a failure. Page-side time comes from the page's manual clock
// (#clock=manual, window.troupeTest), never from sleeps.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/controller"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/troupetest"
	"github.com/troupe-rt/troupe/web"
)

// T is the base time of the clock-driven cases (WEB.md §7).
const T = int64(1700000000000)

// wait bounds every wait on the page or the system.
const wait = 10 * time.Second

var browser struct {
	ctx    context.Context
	cancel func()
	err    error
	path   string
}

// mainRun starts the browser around the tests and stops it before goleak checks.
type mainRun struct{ m *testing.M }

func (r mainRun) Run() int {
	path := os.Getenv("TROUPE_CHROME")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := os.Stat(path); err != nil {
		browser.err = fmt.Errorf("no browser at %s (set TROUPE_CHROME, or apt-get install chromium)", path)
		return r.m.Run()
	}
	browser.path = path
	dir, err := os.MkdirTemp("", "troupe-web-e2e-profile-")
	if err != nil {
		browser.err = err
		return r.m.Run()
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoFirstRun,
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(1280, 860),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	browser.ctx = ctx
	browser.cancel = func() { cancelCtx(); cancelAlloc(); _ = os.RemoveAll(dir) }
	if err := chromedp.Do(ctx); err != nil {
		browser.err = fmt.Errorf("starting %s: %w", path, err)
	}
	code := r.m.Run()
	browser.cancel()
	return code
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(mainRun{m}) }

// needBrowser skips (or, under CI, fails) a test when there is no browser.
func needBrowser(t *testing.T) {
	t.Helper()
	if browser.err == nil {
		return
	}
	if os.Getenv("CI") == "true" || os.Getenv("TROUPE_WEB_E2E_REQUIRED") == "1" || os.Getenv("TROUPE_REQUIRE_BROWSER") == "1" {
		t.Fatalf("the e2e tests need a browser: %v", browser.err)
	}
	t.Skipf("skipping the browser tests: %v", browser.err)
}

// mw is the e2e tests' middleware: it counts requests, records kill bodies and
// Last-Event-ID headers, fails or drops kills, and cuts live channels.
type mw struct {
	next atomic.Pointer[http.Handler]
	mu   sync.Mutex
	seen struct {
		events, kills int
		lastIDs       []string
		killBodies    []string
		killAnswers   int
		cuts          map[int]context.CancelFunc
		n             int
	}
	killMode atomic.Int32 // 0 pass, 1 answer 503, 2 drop the connection
}

const (
	killPass = iota
	killFail
	killDrop
)

func (m *mw) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := *m.next.Load()
	switch {
	case strings.HasSuffix(r.URL.Path, "/events"):
		ctx, cancel := context.WithCancel(r.Context())
		m.mu.Lock()
		m.seen.events++
		m.seen.lastIDs = append(m.seen.lastIDs, r.Header.Get("Last-Event-ID"))
		m.seen.n++
		id := m.seen.n
		m.seen.cuts[id] = cancel
		m.mu.Unlock()
		defer func() {
			m.mu.Lock()
			delete(m.seen.cuts, id)
			m.mu.Unlock()
			cancel()
		}()
		h.ServeHTTP(w, r.WithContext(ctx))
	case strings.HasSuffix(r.URL.Path, "/api/kill"):
		b, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		m.seen.kills++
		m.seen.killBodies = append(m.seen.killBodies, string(b))
		m.mu.Unlock()
		switch m.killMode.Load() {
		case killFail:
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"code":"test/unavailable","message":"injected"}`)
		case killDrop:
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					_ = c.Close()
				}
			}
		default:
			r.Body = io.NopCloser(strings.NewReader(string(b)))
			h.ServeHTTP(w, r)
		}
		m.mu.Lock()
		m.seen.killAnswers++
		m.mu.Unlock()
	default:
		h.ServeHTTP(w, r)
	}
}

func (m *mw) counts() (events, kills, answers int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen.events, m.seen.kills, m.seen.killAnswers
}

func (m *mw) killBodies() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.seen.killBodies...)
}

func (m *mw) lastIDs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.seen.lastIDs...)
}

// cut cancels every live channel request in flight.
func (m *mw) cut() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, c := range m.seen.cuts {
		c()
		n++
	}
	return n
}

// inbox is a delivery surface recording what reaches an agent.
type inbox struct{ msgs chan owner.Message }

func (i *inbox) Inject(m owner.Message) error   { i.msgs <- m; return nil }
func (i *inbox) Steer(m owner.Message) error    { i.msgs <- m; return nil }
func (i *inbox) Followup(m owner.Message) error { i.msgs <- m; return nil }

// env is a system (job tools mounted globally, agent registry, controller), agent
// A of s1, the handler behind the middleware, and an httptest server.
type env struct {
	sys   *troupe.System
	ctl   *controller.Controller
	h     *web.Handler
	mw    *mw
	srv   *httptest.Server
	a     *owner.Agent
	in    *inbox
	now   atomic.Int64
	prods []*troupetest.Producer
	owner map[string]*owner.Agent // job id → owning agent (absent: unowned)
}

type opts struct {
	flush    time.Duration
	children web.ChildLister
	sessions []web.Session
}

func newEnv(t *testing.T, o opts) *env {
	t.Helper()
	needBrowser(t)
	e := &env{mw: &mw{}, owner: map[string]*owner.Agent{}}
	e.mw.seen.cuts = map[int]context.CancelFunc{}
	e.now.Store(T)
	sys, _ := troupetest.NewSystem(t, func(c *troupe.Config) {
		c.Clock = func() time.Time { return time.UnixMilli(e.now.Load()) }
	})
	e.sys = sys
	_, err := jobtools.MountIn(t.Context(), sys.Jobs(), sys.Scope(), jobtools.DefaultConfig())
	require.NoError(t, err)
	_, err = sys.Jobs().MountAgents(bg, sys.Scope())
	require.NoError(t, err)
	if o.flush == 0 {
		o.flush = 50 * time.Millisecond
	}
	e.ctl, err = sys.StartController(controller.Config{ObserveFlush: o.flush})
	require.NoError(t, err)
	e.a, e.in = e.agent(t, "s1")
	sessions := o.sessions
	if sessions == nil {
		sessions = []web.Session{{ID: "s1", Label: "main"}, {ID: "s2"}, {ID: ""}}
	}
	e.h, err = web.New(sys, e.ctl, web.Config{Sessions: func() []web.Session { return sessions }, Children: o.children,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	var hh http.Handler = e.h
	e.mw.next.Store(&hh)
	e.srv = httptest.NewServer(e.mw)
	t.Cleanup(func() {
		for _, p := range e.prods {
			if p.Runs() > 0 {
				p.Settle(job.Outcome{Status: job.Killed, Detail: "test ended"})
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = e.h.Close(ctx)
		e.srv.CloseClientConnections()
		e.srv.Close()
	})
	return e
}

func (e *env) agent(t *testing.T, session string) (*owner.Agent, *inbox) {
	t.Helper()
	in := &inbox{msgs: make(chan owner.Message, 64)}
	a, err := e.sys.NewAgent(nil, session, owner.Options{Surface: in})
	require.NoError(t, err)
	require.NoError(t, e.sys.Jobs().RegisterAgent(bg, a))
	return a, in
}

// start starts a test producer's job owned by a (nil: unowned) at clock time at.
func (e *env) start(t *testing.T, a *owner.Agent, kind, label string, rec *job.Record, at int64) (*troupetest.Producer, string) {
	t.Helper()
	p := troupetest.NewProducer()
	p.Kind, p.Label, p.Record = kind, label, rec
	e.prods = append(e.prods, p)
	e.now.Store(at)
	id, err := e.sys.Jobs().Start(bg, p.Spec(a))
	require.NoError(t, err)
	if a != nil {
		e.owner[id] = a
	}
	return p, id
}

// settle settles p at clock time at and waits until the registry has it.
func (e *env) settle(t *testing.T, p *troupetest.Producer, id string, o job.Outcome, at int64) {
	t.Helper()
	e.now.Store(at)
	p.Settle(o)
	troupetest.Settled(t, e.sys, id, registry.AsAgent(e.owner[id]))
}

// tab is one browser tab on the page.
type tab struct {
	t        *testing.T
	ctx      context.Context
	e        *env
	mu       sync.Mutex
	problems []string
}

// problemsScript records CSP violations and uncaught errors (it is injected
// through DevTools, so the page's CSP does not apply to it).
const problemsScript = `window.__problems = [];
document.addEventListener('securitypolicyviolation', function (e) { window.__problems.push('csp: ' + e.violatedDirective + ' ' + e.blockedURI); });
window.addEventListener('error', function (e) { window.__problems.push('error: ' + e.message); });`

// open opens a tab on the launch URL with the fragment (without '#').
func (e *env) open(t *testing.T, fragment string) *tab {
	t.Helper()
	return e.openURL(t, e.srv.URL+e.h.LaunchPath()+"#"+fragment)
}

func (e *env) openURL(t *testing.T, url string) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser.ctx)
	t.Cleanup(cancel)
	tb := &tab{t: t, ctx: ctx, e: e}
	require.NoError(t, chromedp.Do(ctx))
	require.NoError(t, chromedp.Listen(ctx, func(ev any) {
		switch v := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if v.Type == runtime.ConsoleAPICalledTypeError {
				tb.addProblem(fmt.Sprintf("console.error: %v", argsOf(v.Args)))
			}
		case *runtime.EventExceptionThrown:
			tb.addProblem("exception: " + v.ExceptionDetails.Text)
		}
	}))
	_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: problemsScript})
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(url)))
	return tb
}

func argsOf(args []*runtime.RemoteObject) []string {
	out := []string{}
	for _, a := range args {
		out = append(out, string(a.Value)+a.Description)
	}
	return out
}

func (tb *tab) addProblem(s string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.problems = append(tb.problems, s)
}

// noProblems requires that the page logged no console error, exception or CSP
// violation.
func (tb *tab) noProblems() {
	tb.t.Helper()
	page := eval[[]string](tb, `window.__problems || []`)
	tb.mu.Lock()
	defer tb.mu.Unlock()
	require.Empty(tb.t, append(page, tb.problems...))
}

// eval evaluates a JavaScript expression in the tab and decodes its value.
func eval[T any](tb *tab, js string) T {
	tb.t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](js))
	require.NoError(tb.t, err, js)
	return v
}

// until polls the page until the expression is truthy.
func (tb *tab) until(js string) {
	tb.t.Helper()
	_, err := chromedp.Run(tb.ctx, chromedp.Poll[bool]("!!("+js+")",
		chromedp.WithPollingTimeout(wait), chromedp.WithPollingInterval(20*time.Millisecond)))
	require.NoError(tb.t, err, "waiting for %s", js)
}

// untilGo waits until a Go-side condition holds (polling, bounded).
func untilGo(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func (tb *tab) click(sel string) {
	tb.t.Helper()
	require.NoError(tb.t, chromedp.Do(tb.ctx, chromedp.Click(chromedp.CSS(sel))), sel)
}

func (tb *tab) keys(k string) {
	tb.t.Helper()
	require.NoError(tb.t, chromedp.Do(tb.ctx, chromedp.KeyEvent(k)))
}

// js quotes s as a JavaScript string literal.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// row is the selector of a job row.
func row(id string) string { return `li[data-job-id=` + js(id) + `]` }

func (tb *tab) text(sel string) string {
	tb.t.Helper()
	return eval[string](tb, `(function(){var e=document.querySelector(`+js(sel)+`);return e?e.textContent:'<missing>';})()`)
}

func (tb *tab) attr(sel, name string) string {
	tb.t.Helper()
	return eval[string](tb, `(function(){var e=document.querySelector(`+js(sel)+`);if(!e)return '<missing>';var v=e.getAttribute(`+js(name)+`);return v===null?'<none>':v;})()`)
}

func (tb *tab) texts(sel string) []string {
	tb.t.Helper()
	return eval[[]string](tb, `Array.from(document.querySelectorAll(`+js(sel)+`)).map(function(e){return e.textContent;})`)
}

func (tb *tab) count(sel string) int {
	tb.t.Helper()
	return eval[int](tb, `document.querySelectorAll(`+js(sel)+`).length`)
}

// advance moves the page's manual clock.
func (tb *tab) advance(ms int) { eval[any](tb, fmt.Sprintf(`window.troupeTest.advance(%d), 0`, ms)) }

func (tb *tab) setNow(ms int64) { eval[any](tb, fmt.Sprintf(`window.troupeTest.setNow(%d), 0`, ms)) }

// live waits until the page is live and shows the rows with these ids.
func (tb *tab) live(ids ...string) {
	tb.t.Helper()
	tb.until(`document.querySelector('[data-conn]').getAttribute('data-conn') === 'live'`)
	for _, id := range ids {
		tb.until(`document.querySelector(` + js(row(id)) + `)`)
	}
}

// shot saves a PNG screenshot of the tab into $TROUPE_ARTIFACTS (or a temp dir).
func (tb *tab) shot(name string) {
	tb.t.Helper()
	dir := os.Getenv("TROUPE_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "troupe-web-e2e")
	}
	require.NoError(tb.t, os.MkdirAll(dir, 0o755))
	b, err := chromedp.Run(tb.ctx, chromedp.CaptureScreenshot())
	require.NoError(tb.t, err)
	require.NoError(tb.t, os.WriteFile(filepath.Join(dir, name+".png"), b, 0o644))
}
