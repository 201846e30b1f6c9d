package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/controller"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/troupetest"
	"github.com/troupe-rt/troupe/web"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// budget bounds every wait of these tests.
const budget = 10 * time.Second

// inbox is a delivery surface that records what reaches an agent.
type inbox struct{ msgs chan owner.Message }

func newInbox() *inbox                          { return &inbox{msgs: make(chan owner.Message, 64)} }
func (i *inbox) Inject(m owner.Message) error   { i.msgs <- m; return nil }
func (i *inbox) Steer(m owner.Message) error    { i.msgs <- m; return nil }
func (i *inbox) Followup(m owner.Message) error { i.msgs <- m; return nil }

// next waits for the next message delivered to the agent.
func (i *inbox) next(t *testing.T) owner.Message {
	t.Helper()
	select {
	case m := <-i.msgs:
		return m
	case <-time.After(budget):
		t.Fatal("no message reached the agent")
	}
	return owner.Message{}
}

// logBuf records every log record in full (message and attributes).
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// env is a system with the job tools mounted globally, the agent registry, the
// job controller, agent A of session s1 with a recording surface, and the task list
// served by httptest.
type env struct {
	sys   *troupe.System
	ctl   *controller.Controller
	h     *web.Handler
	srv   *httptest.Server
	a     *owner.Agent
	in    *inbox
	mount *jobtools.Mount
	logs  *logBuf
}

type envOpts struct {
	flush    time.Duration
	sessions []web.Session
	children web.ChildLister
	hosts    []string
	clock    func() time.Time
	maxJobs  *int64
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	return newEnvTB(t, o)
}

func newEnvTB(t testing.TB, o envOpts) *env {
	t.Helper()
	sys, _ := troupetest.NewSystem(t, func(c *troupe.Config) {
		if o.clock != nil {
			c.Clock = o.clock
		}
		c.MaxConcurrentJobsPerOwner = o.maxJobs
	})
	e := &env{sys: sys, logs: &logBuf{}}
	var err error
	e.mount, err = jobtools.MountIn(context.Background(), sys.Jobs(), sys.Scope(), jobtools.DefaultConfig())
	require.NoError(t, err)
	_, err = sys.Jobs().MountAgents(bg, sys.Scope())
	require.NoError(t, err)
	if o.flush == 0 {
		o.flush = 20 * time.Millisecond
	}
	e.ctl, err = sys.StartController(controller.Config{ObserveFlush: o.flush})
	require.NoError(t, err)
	e.in = newInbox()
	e.a, err = sys.NewAgent(nil, "s1", owner.Options{Surface: e.in})
	require.NoError(t, err)
	require.NoError(t, sys.Jobs().RegisterAgent(bg, e.a))
	sessions := o.sessions
	if sessions == nil {
		sessions = []web.Session{{ID: "s1"}, {ID: "s2"}, {ID: ""}}
	}
	e.h, err = web.New(sys, e.ctl, web.Config{
		Sessions:     func() []web.Session { return sessions },
		Children:     o.children,
		AllowedHosts: o.hosts,
		Logger:       slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, err)
	e.srv = httptest.NewServer(e.h)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		defer cancel()
		require.NoError(t, e.h.Close(ctx))
		e.srv.Close()
	})
	return e
}

// agent spawns and registers another session's agent with a recording surface.
func (e *env) agent(t *testing.T, session string) (*owner.Agent, *inbox) {
	t.Helper()
	in := newInbox()
	a, err := e.sys.NewAgent(nil, session, owner.Options{Surface: in})
	require.NoError(t, err)
	require.NoError(t, e.sys.Jobs().RegisterAgent(bg, a))
	return a, in
}

// url is the server URL of path under the start grant.
func (e *env) url(rest string) string { return e.srv.URL + e.h.LaunchPath() + rest }

// do sends a request and returns the answer with its body read.
func do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	return do(t, req)
}

// kill posts api/kill with body under path prefix (a grant's path).
func (e *env) killAt(t *testing.T, path, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+path+"api/kill", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	return do(t, req)
}

func (e *env) kill(t *testing.T, session, id string) (*http.Response, string) {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"sessionId": session, "jobId": id})
	return e.killAt(t, e.h.LaunchPath(), string(b))
}

// ev is one server-sent event (or a comment line, or a lone retry field).
type ev struct {
	Event, ID, Data, Retry, Comment string
}

// stream is an open live channel read with bufio.
type stream struct {
	t      *testing.T
	resp   *http.Response
	cancel context.CancelFunc
	events chan ev
	done   chan struct{}
}

// open opens the live channel at url (a full URL) with the given headers.
func open(t *testing.T, url string, hdr map[string]string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	s := &stream{t: t, resp: resp, cancel: cancel, events: make(chan ev, 4096), done: make(chan struct{})}
	go s.read()
	t.Cleanup(s.close)
	return s
}

func (s *stream) read() {
	defer close(s.done)
	defer close(s.events)
	r := bufio.NewReaderSize(s.resp.Body, 1<<20)
	var cur ev
	have := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if have {
				s.events <- cur
			}
			cur, have = ev{}, false
		case strings.HasPrefix(line, ":"):
			s.events <- ev{Comment: strings.TrimSpace(line[1:])}
		default:
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimPrefix(v, " ")
			have = true
			switch k {
			case "event":
				cur.Event = v
			case "id":
				cur.ID = v
			case "data":
				cur.Data = v
			case "retry":
				cur.Retry = v
			}
		}
	}
}

// close drops the connection and waits for the reader.
func (s *stream) close() {
	s.cancel()
	s.resp.Body.Close()
	<-s.done
}

// raw returns the next event of any kind but keepalives and tree frames.
func (s *stream) raw() ev {
	s.t.Helper()
	timeout := time.After(budget)
	for {
		select {
		case e, ok := <-s.events:
			if !ok {
				s.t.Fatal("the stream ended")
			}
			if e.Comment != "" || e.Event == "tree" {
				continue
			}
			return e
		case <-timeout:
			s.t.Fatal("no event arrived")
		}
	}
}

// next returns the next event and requires its name.
func (s *stream) next(name string) ev {
	s.t.Helper()
	e := s.raw()
	require.Equal(s.t, name, e.Event, "event %+v", e)
	return e
}

// skipTo returns the next event named name, skipping others.
func (s *stream) skipTo(name string) ev {
	s.t.Helper()
	for {
		if e := s.raw(); e.Event == name {
			return e
		}
	}
}

// ended waits until the server ends the response.
func (s *stream) ended() []ev {
	s.t.Helper()
	var out []ev
	timeout := time.After(budget)
	for {
		select {
		case e, ok := <-s.events:
			if !ok {
				return out
			}
			out = append(out, e)
		case <-timeout:
			s.t.Fatal("the stream did not end")
		}
	}
}

// rowsJSON is a rows frame as the tests read it.
type rowsJSON struct {
	Session  string           `json:"session"`
	Jobs     []map[string]any `json:"jobs"`
	Children []map[string]any `json:"children"`
}

func rowsOf(t *testing.T, e ev) rowsJSON {
	t.Helper()
	require.Equal(t, "rows", e.Event)
	var r rowsJSON
	require.NoError(t, json.Unmarshal([]byte(e.Data), &r))
	return r
}

// rowsUntil reads rows frames until ok holds for one and returns it.
func (s *stream) rowsUntil(ok func(rowsJSON) bool) rowsJSON {
	s.t.Helper()
	for {
		r := rowsOf(s.t, s.skipTo("rows"))
		if ok(r) {
			return r
		}
	}
}

func ids(r rowsJSON) []string {
	out := []string{}
	for _, j := range r.Jobs {
		out = append(out, j["id"].(string))
	}
	return out
}

func status(r rowsJSON, id string) string {
	for _, j := range r.Jobs {
		if j["id"] == id {
			return j["status"].(string)
		}
	}
	return ""
}

func decode(t *testing.T, data string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(data), &m))
	return m
}

var toolCalls atomic.Uint64

// callTool runs the model tool name as agent a through the mount's pipeline and
// returns its text.
func callTool(ctx context.Context, e *env, a *owner.Agent, name, args string) string {
	var tool tools.Tool
	for _, tl := range e.mount.All() {
		if tl.Name == name {
			tool = tl
		}
	}
	call := tools.Call{ID: fmt.Sprintf("call-%d", toolCalls.Add(1)), Name: name, Args: json.RawMessage(args), Caller: tools.AsAgent(a)}
	res := e.mount.Pipeline().Run(ctx, tool, call)
	s, _ := res.SingleText()
	return s
}

// prod is a test producer whose job, if still live when the test ends, settles
// killed (so the system's shutdown does not wait on it).
func (e *env) prod(t *testing.T) *troupetest.Producer {
	p := troupetest.NewProducer()
	t.Cleanup(func() {
		if p.Runs() > 0 {
			p.Settle(job.Outcome{Status: job.Killed, Detail: "test ended"})
		}
	})
	return p
}
