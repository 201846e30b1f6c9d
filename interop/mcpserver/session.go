package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
)

// The resources of INTEROP.md section 2.5.
const (
	RosterURI   = "troupe://jobs"
	jobURIBase  = RosterURI + "/"
	JobTemplate = RosterURI + "/{job_id}"

	// MetaNotice and MetaSummary are the _meta keys of a completion notice.
	MetaNotice  = "troupe/notice"
	MetaSummary = "troupe/summary"
)

// teardownTimeout bounds one session's owner teardown (its jobs' kills are
// verified; a shell job's ladder is 2 s grace plus the SIGKILL wait).
const teardownTimeout = 30 * time.Second

// incarnateTimeout bounds the creation and registration of an incarnation.
const incarnateTimeout = 10 * time.Second

// session is one MCP session: its own SDK server (tools and resources bound to
// it, so a notification reaches no other session) and, from its first request
// other than server/discover or ping, one agent incarnation.
type session struct {
	srv    *Server
	id     string // the troupe session id of its incarnation
	httpID string // the Mcp-Session-Id ("" on stdio)
	sdk    *mcp.Server
	limit  int // incarnation limit (HTTP: MaxSessions; stdio: none)

	incarnateOnce sync.Once
	agent         *owner.Agent
	agentErr      error
	live          atomic.Bool // the incarnation exists and is not torn down yet

	bindOnce sync.Once
	ss       chan *mcp.ServerSession // holds the bound SDK session (capacity 1)

	// The notice pump: the owner actor hands notices to in without blocking;
	// pump queues them and sender sends them to the client.
	in       chan owner.Message
	changed  chan struct{} // capacity 1: a roster change is pending
	stop     chan struct{}
	pumpDone chan struct{}

	teardownOnce sync.Once
	tornDown     chan struct{}
}

func newSession(srv *Server, id, httpID string, limit int) *session {
	sess := &session{
		srv: srv, id: id, httpID: httpID, limit: limit,
		ss:       make(chan *mcp.ServerSession, 1),
		in:       make(chan owner.Message),
		changed:  make(chan struct{}, 1),
		stop:     make(chan struct{}),
		pumpDone: make(chan struct{}),
		tornDown: make(chan struct{}),
	}
	opts := &mcp.ServerOptions{
		Instructions: srv.cfg.Instructions,
		Logger:       nil,
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{},
			Resources: &mcp.ResourceCapabilities{Subscribe: true},
		},
		SubscribeHandler:   sess.subscribe,
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	}
	if httpID != "" {
		opts.GetSessionID = func() string { return httpID }
	}
	sess.sdk = mcp.NewServer(&mcp.Implementation{Name: "troupe-mcp", Version: Version}, opts)
	for _, t := range srv.mount.All() {
		sess.addTool(t)
	}
	if srv.start != nil {
		sess.addTool(srv.start.tool())
	}
	sess.sdk.AddResource(&mcp.Resource{URI: RosterURI, Name: "jobs", MIMEType: "text/plain",
		Description: "This session's background jobs, as job_list renders them."}, sess.readRoster)
	sess.sdk.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: JobTemplate, Name: "job", MIMEType: "application/json",
		Description: "One background job's public state; reading it never consumes output."}, sess.readJob)
	sess.sdk.AddReceivingMiddleware(sess.middleware)
	return sess
}

// middleware binds the SDK session on its first message and creates the
// incarnation at the first request other than server/discover or ping.
func (sess *session) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
			if err := sess.bind(ss); err != nil {
				return nil, err
			}
		}
		switch {
		case method == "server/discover", method == "ping", strings.HasPrefix(method, "notifications/"):
		default:
			if _, err := sess.incarnate(); err != nil {
				return nil, err
			}
		}
		res, err := next(ctx, method, req)
		if ir, ok := res.(*mcp.InitializeResult); ok && err == nil && method == "initialize" {
			sess.srv.log.Info("mcpserver: session initialized", "session", sess.id, "protocol", ir.ProtocolVersion)
		}
		return res, err
	}
}

// bind records the SDK session once and watches it: when it closes, the session
// is torn down. An HTTP session is admitted to the server's table here.
func (sess *session) bind(ss *mcp.ServerSession) (err error) {
	sess.bindOnce.Do(func() {
		sess.ss <- ss
		if sess.httpID == "" {
			return // stdio: admitted and watched by ServeStdio
		}
		if err = sess.srv.admit(sess); err != nil {
			go ss.Close()
			return
		}
		go func() {
			_ = ss.Wait()
			sess.teardown()
		}()
	})
	return err
}

// incarnate creates, once, the session's agent incarnation: composed under the
// server's Scope, registered, with the notice pump as its surface.
func (sess *session) incarnate() (*owner.Agent, error) {
	sess.incarnateOnce.Do(func() {
		if err := sess.srv.reserveIncarnation(sess.limit); err != nil {
			sess.agentErr = err
			return
		}
		// Not the request's ctx: a cancelled first request must not cut the
		// incarnation short for the whole session.
		ctx, cancel := context.WithTimeout(context.Background(), incarnateTimeout)
		defer cancel()
		a, err := sess.srv.sys.NewAgent(sess.srv.scope, sess.id, owner.Options{Surface: surface{sess}, Logger: sess.srv.log})
		if err == nil {
			if err = sess.srv.sys.Jobs().RegisterAgent(ctx, a); err != nil {
				_ = a.Dispose(context.Background())
			}
		}
		if err != nil {
			sess.srv.releaseIncarnation()
			sess.agentErr = err
			return
		}
		sess.agent = a
		sess.live.Store(true)
		sess.srv.named(sess, true)
		go sess.pump()
	})
	return sess.agent, sess.agentErr
}

// end closes the session's connection; its teardown follows.
func (sess *session) end() {
	select {
	case ss := <-sess.ss:
		sess.ss <- ss
		_ = ss.Close()
	default:
		sess.teardown() // never bound: nothing to close
	}
}

// teardown disposes the incarnation (SPEC §2.11 owner teardown: its jobs are
// cancelled with "owner disposed", awaited and removed; teardown claims them, so
// no notice is sent), stops the notice pump and leaves the server's table. It is
// idempotent; every caller waits for the same teardown.
func (sess *session) teardown() {
	sess.teardownOnce.Do(func() {
		defer close(sess.tornDown)
		// Settle the incarnation question first: a later incarnate finds it done.
		sess.incarnateOnce.Do(func() { sess.agentErr = errEnded })
		if sess.agent != nil {
			ctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
			if err := sess.agent.Dispose(ctx); err != nil {
				sess.srv.log.Warn("mcpserver: session teardown failed", "session", sess.id, "err", err)
			}
			cancel()
			sess.srv.named(sess, false)
			close(sess.stop)
			<-sess.pumpDone
			sess.srv.releaseIncarnation()
			sess.live.Store(false)
		}
		sess.srv.leave(sess)
	})
	<-sess.tornDown
}

var errEnded = errors.New("mcpserver: the session has ended")

// surface is the owner.Surface of a session's incarnation: all three verbs send
// the notice to the pump, which never blocks the owner actor for long.
type surface struct{ sess *session }

func (f surface) Inject(m owner.Message) error   { return f.sess.notify(m) }
func (f surface) Steer(m owner.Message) error    { return f.sess.notify(m) }
func (f surface) Followup(m owner.Message) error { return f.sess.notify(m) }

func (sess *session) notify(m owner.Message) error {
	select {
	case sess.in <- m:
		return nil
	case <-sess.stop:
		return errEnded
	}
}

// rosterCoalesce is how long a burst of roster changes is gathered into one update.
const rosterCoalesce = 100 * time.Millisecond

// rosterChanged signals a change of the session's jobs; it never blocks.
func (sess *session) rosterChanged() {
	select {
	case sess.changed <- struct{}{}:
	default: // one is pending already
	}
}

// pump queues notices (without bound on the owner's side: it always receives)
// and roster changes (coalesced over rosterCoalesce), and hands them, in order,
// to the sender. A nil message is a roster change.
func (sess *session) pump() {
	defer close(sess.pumpDone)
	out := make(chan *owner.Message)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for m := range out {
			if m == nil {
				sess.sendRoster()
			} else {
				sess.send(*m)
			}
		}
	}()
	defer func() { close(out); <-sent }()
	var queue []*owner.Message
	var burst <-chan time.Time
	for {
		var next chan *owner.Message
		var head *owner.Message
		if len(queue) > 0 {
			next, head = out, queue[0]
		}
		select {
		case m := <-sess.in:
			queue = append(queue, &m)
		case <-sess.changed:
			if burst == nil {
				burst = time.After(rosterCoalesce)
			}
		case <-burst:
			burst = nil
			queue = append(queue, nil)
		case next <- head:
			queue = queue[1:]
		case <-sess.stop:
			return
		}
	}
}

// sendRoster tells roster subscribers that the session's jobs changed.
func (sess *session) sendRoster() {
	if err := sess.sdk.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: RosterURI}); err != nil {
		sess.srv.log.Warn("mcpserver: resource update failed", "uri", RosterURI, "err", err)
	}
}

// send sends one notice as notifications/resources/updated for the job's URI and
// for the roster; the SDK sends each only to subscribers of that URI.
func (sess *session) send(m owner.Message) {
	id, ok := noticeJobID(m.ID)
	if !ok {
		sess.srv.log.Warn("mcpserver: notice without a job id", "id", m.ID)
		return
	}
	for _, uri := range []string{jobURIBase + id, RosterURI} {
		meta := mcp.Meta{MetaNotice: m.Text, MetaSummary: m.Source.Summary}
		if err := sess.sdk.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: uri, Meta: meta}); err != nil {
			sess.srv.log.Warn("mcpserver: resource update failed", "uri", uri, "err", err)
		}
	}
}

// noticeJobID reads the job id out of a notice message id, notice-<job id>-<n>.
func noticeJobID(msgID string) (string, bool) {
	rest, ok := strings.CutPrefix(msgID, "notice-")
	if !ok {
		return "", false
	}
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 {
		return "", false
	}
	return rest[:i], true
}

// call builds the troupe tool call of an MCP request on this session.
func (sess *session) call(ctx context.Context, name string, args json.RawMessage) (tools.Call, error) {
	a, err := sess.incarnate()
	if err != nil {
		return tools.Call{}, err
	}
	return tools.Call{ID: sess.srv.nextCallID(), Name: name, Args: args, Caller: tools.AsAgent(a)}, nil
}

func (sess *session) addTool(t tools.Tool) {
	sess.sdk.AddTool(&mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.Parameters},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			call, err := sess.call(ctx, t.Name, req.Params.Arguments)
			if err != nil {
				return nil, err
			}
			return toolResult(sess.srv.mount.Pipeline().Run(ctx, t, call)), nil
		})
}

// toolResult maps a troupe result: each text block a TextContent, Value the
// structuredContent, IsError isError.
func toolResult(res tools.Result) *mcp.CallToolResult {
	out := &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: res.Value, IsError: res.IsError}
	for _, b := range res.Content {
		out.Content = append(out.Content, &mcp.TextContent{Text: b.Text})
	}
	return out
}

func private(res *mcp.ReadResourceResult) *mcp.ReadResourceResult {
	res.TTLMs, res.CacheScope = 0, "private"
	return res
}

// readRoster is troupe://jobs: the session's job_list text.
func (sess *session) readRoster(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	call, err := sess.call(ctx, jobtools.NameList, nil)
	if err != nil {
		return nil, err
	}
	res := sess.srv.mount.Pipeline().Run(ctx, sess.srv.mount.List(), call)
	var text strings.Builder
	for _, b := range res.Content {
		text.WriteString(b.Text)
	}
	return private(&mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
		URI: RosterURI, MIMEType: "text/plain", Text: text.String()}}}), nil
}

// readJob is troupe://jobs/{job_id}: the public projection, by a non-consuming
// Get that claims nothing. An unknown or foreign id is Resource not found.
func (sess *session) readJob(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	pub, ok := sess.visible(ctx, uri)
	if !ok {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	data, err := json.Marshal(pub)
	if err != nil {
		return nil, err
	}
	return private(&mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
		URI: uri, MIMEType: "application/json", Text: string(data)}}}), nil
}

// visible returns the public projection of the job at uri if this session may see it.
func (sess *session) visible(ctx context.Context, uri string) (jobtools.PublicJob, bool) {
	id, ok := strings.CutPrefix(uri, jobURIBase)
	if !ok || id == "" || strings.Contains(id, "/") {
		return jobtools.PublicJob{}, false
	}
	a, err := sess.incarnate()
	if err != nil {
		return jobtools.PublicJob{}, false
	}
	snap, err := sess.srv.sys.Jobs().Get(ctx, id, registry.AsAgent(a))
	if err != nil {
		return jobtools.PublicJob{}, false
	}
	return jobtools.Public(snap), true
}

// subscribe admits troupe://jobs and the session's visible troupe://jobs/<id>.
func (sess *session) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	if uri == RosterURI {
		return nil
	}
	if _, ok := sess.visible(ctx, uri); ok {
		return nil
	}
	return mcp.ResourceNotFoundError(uri)
}
