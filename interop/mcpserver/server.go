// Package mcpserver serves troupe's job tools to any Model Context Protocol client
// (INTEROP.md section 2): job_output, job_list and job_kill with SPEC §3's exact texts,
// an optional background-shell start tool (job_start), the resources
// troupe://jobs and troupe://jobs/{job_id}, and completion notices as
// notifications/resources/updated. It is a surface, above the facade, like
// cmd/demo; it is built on github.com/modelcontextprotocol/go-sdk.
//
// The embedder's contract:
//  1. New(sys, cfg) mounts the job tools in the server's own child Scope of
//     sys.Scope(). The system's agent registry must be mounted.
//  2. ServeStdio serves one MCP session over a pair of streams; Handler serves
//     streamable HTTP (stateful, path-agnostic: mount it at /mcp) behind a bearer
//     token; Listen opens a loopback listener for it.
//  3. Every MCP session is one fresh agent incarnation composed under the server's
//     Scope and registered in the agent registry. The jobs it starts are owned by
//     that incarnation; when the session ends (EOF, DELETE, idle timeout, Close)
//     the incarnation is disposed: its jobs are cancelled, awaited and removed,
//     and no notice is sent for them.
//  4. Close(ctx) refuses new sessions (HTTP 503), ends every session and waits
//     for their teardown, then disposes the server's Scope.
package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/tools/jobtools"
)

// Defaults of INTEROP.md section 2.4 and 2.8.
const (
	DefaultWaitTimeoutMs    = 30000
	DefaultMaxWaitTimeoutMs = 50000
	DefaultMaxSessions      = 16
	DefaultIdleTimeout      = 10 * time.Minute
	DefaultOutputLimitBytes = 64 << 10
	// MinTokenBytes is the shortest bearer token Handler accepts.
	MinTokenBytes = 32
	// MaxCommandBytes bounds job_start's command.
	MaxCommandBytes = 16 << 10
	// Version is the server's implementation version in the MCP handshake.
	Version = "0.1.0"
)

// CodeSessionLimit is logged when an HTTP session is refused at MaxSessions.
const CodeSessionLimit messages.Code = "mcp/session-limit"

// Shell configures job_start. Its presence in Config enables the tool.
type Shell struct {
	// Dir is the working directory of every job; "" means the server's own.
	Dir string
	// Env is the environment of every job; nil means the server's own.
	Env []string
	// OutputLimitBytes is each job's outputLimitBytes (SPEC §3.6); 0 means 64 KiB.
	OutputLimitBytes int64
}

// Config configures a Server. The zero value serves the three job tools.
type Config struct {
	// Jobs is the tool-jobs config. Unset wait limits default to waitTimeoutMs
	// 30000 (or maxWaitTimeoutMs, if that is lower) and maxWaitTimeoutMs 50000,
	// so a wait ends before common clients' 60 s request timeout.
	Jobs jobtools.Config
	// Shell, if set, enables job_start.
	Shell *Shell
	// SessionID fixes the stdio session's troupe session id; "" mints mcp-<16 hex>.
	SessionID string
	// Token is the HTTP bearer token (at least MinTokenBytes); Handler needs it.
	Token string
	// MaxSessions bounds live HTTP sessions; 0 means 16.
	MaxSessions int
	// IdleTimeout ends an HTTP session that receives no request for this long;
	// 0 means 10 min.
	IdleTimeout time.Duration
	// Instructions are the MCP instructions; "" sends none.
	Instructions string
	// Logger receives the server's warnings; nil means slog.Default().
	Logger *slog.Logger
}

func invalid(format string, args ...any) error {
	return messages.Errorf(messages.CodeInvalidConfig, format, args...)
}

// Validate checks the values that can be wrong.
func (c Config) Validate() error {
	switch {
	case c.MaxSessions < 0:
		return invalid("mcpserver: invalid maxSessions: expected a positive integer, got %d", c.MaxSessions)
	case c.IdleTimeout < 0:
		return invalid("mcpserver: invalid idleTimeout: expected a non-negative duration, got %s", c.IdleTimeout)
	case c.Shell != nil && c.Shell.OutputLimitBytes < 0:
		return invalid("mcpserver: invalid shell outputLimitBytes: expected a positive integer, got %d", c.Shell.OutputLimitBytes)
	case c.Token != "" && len(c.Token) < MinTokenBytes:
		return invalid("mcpserver: the token must have at least %d bytes, got %d", MinTokenBytes, len(c.Token))
	}
	_, err := c.jobs().Resolve()
	return err
}

// jobs fills in the MCP defaults of the wait limits.
func (c Config) jobs() jobtools.Config {
	j := c.Jobs
	if j.MaxWaitTimeoutMs == nil {
		v := int64(DefaultMaxWaitTimeoutMs)
		j.MaxWaitTimeoutMs = &v
	}
	if j.WaitTimeoutMs == nil {
		v := min(int64(DefaultWaitTimeoutMs), *j.MaxWaitTimeoutMs)
		j.WaitTimeoutMs = &v
	}
	return j
}

// Server is the MCP job server over one troupe System.
type Server struct {
	sys   *troupe.System
	cfg   Config
	log   *slog.Logger
	scope *scope.Scope
	mount *jobtools.Mount
	start *startTool // nil without Config.Shell

	calls atomic.Uint64 // call ids, unique per server (the mount keys limits by them)

	// sessions is the table of live sessions, for Close and the HTTP session limit:
	// surface bookkeeping with no actor state behind it (jobs and incarnations are
	// the registry's), so a leaf mutex.
	mu         sync.Mutex
	closing    bool
	sessions   map[*session]struct{}
	byID       map[string]*session // incarnated sessions, by troupe session id
	incarnated int                 // sessions holding an incarnation (the HTTP limit counts these)
	wg         sync.WaitGroup
	closeOnce  sync.Once
	closeErr   error
}

// New validates cfg and mounts the job tools in a child Scope of sys.Scope().
func New(sys *troupe.System, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !sys.Jobs().AgentsMounted(context.Background()) {
		return nil, invalid("mcpserver: the agent registry is not mounted")
	}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	sc, err := sys.Scope().Child("mcpserver")
	if err != nil {
		return nil, err
	}
	mount, err := jobtools.MountIn(context.Background(), sys.Jobs(), sc, cfg.jobs())
	if err != nil {
		_ = sc.Dispose(context.Background())
		return nil, err
	}
	s := &Server{sys: sys, cfg: cfg, log: log, scope: sc, mount: mount,
		sessions: map[*session]struct{}{}, byID: map[string]*session{}}
	if _, err := sys.Jobs().OnJobsChanged(context.Background(), sc, s.jobsChanged); err != nil {
		_ = sc.Dispose(context.Background())
		return nil, err
	}
	if cfg.Shell != nil {
		s.start = &startTool{srv: s, shell: *cfg.Shell}
	}
	return s, nil
}

// Scope returns the server's Scope: every session's incarnation is composed under it.
func (s *Server) Scope() *scope.Scope { return s.scope }

func (s *Server) nextCallID() string { return "mcp-call-" + strconv.FormatUint(s.calls.Add(1), 10) }

// newSessionID mints a troupe session id, mcp-<16 hex>.
func newSessionID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "mcp-" + hex.EncodeToString(b[:])
}

// admit adds sess to the table, unless the server is closing.
func (s *Server) admit(sess *session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return errClosing
	}
	s.sessions[sess] = struct{}{}
	s.wg.Add(1)
	return nil
}

// jobsChanged is the onJobsChanged listener: it runs on the registry actor, so it
// only looks the session up and signals its pump without blocking.
func (s *Server) jobsChanged(who registry.Owner) {
	if who.Session == "" {
		return
	}
	s.mu.Lock()
	sess := s.byID[who.Session]
	s.mu.Unlock()
	if sess != nil {
		sess.rosterChanged()
	}
}

// named records or forgets an incarnated session by its troupe id.
func (s *Server) named(sess *session, live bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if live {
		s.byID[sess.id] = sess
	} else if s.byID[sess.id] == sess {
		delete(s.byID, sess.id)
	}
}

// reserveIncarnation counts one more incarnated session, within limit (0: none).
func (s *Server) reserveIncarnation(limit int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return errClosing
	}
	if limit > 0 && s.incarnated >= limit {
		return sessionLimit(limit)
	}
	s.incarnated++
	return nil
}

func (s *Server) releaseIncarnation() {
	s.mu.Lock()
	s.incarnated--
	s.mu.Unlock()
}

// atLimit reports whether a new HTTP session would exceed MaxSessions, or the
// server is closing.
func (s *Server) atLimit() (closing, full bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing, s.incarnated >= s.cfg.MaxSessions
}

// Sessions returns the troupe session ids of the live incarnations, sorted.
func (s *Server) Sessions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for sess := range s.sessions {
		if sess.live.Load() {
			ids = append(ids, sess.id)
		}
	}
	slices.Sort(ids)
	return ids
}

// leave removes sess from the table once its teardown is done.
func (s *Server) leave(sess *session) {
	s.mu.Lock()
	_, ok := s.sessions[sess]
	delete(s.sessions, sess)
	s.mu.Unlock()
	if ok {
		s.wg.Done()
	}
}

var errClosing = errors.New("mcpserver: the server is closing")

func sessionLimit(limit int) error {
	return messages.Errorf(CodeSessionLimit, "mcpserver: session limit reached (limit: %d)", limit)
}

// Close refuses new sessions, ends every session and waits for its teardown (its
// jobs cancelled, awaited and removed), then disposes the server's Scope. It is
// idempotent; ctx bounds the waiting only.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		live := make([]*session, 0, len(s.sessions))
		for sess := range s.sessions {
			live = append(live, sess)
		}
		s.mu.Unlock()
		for _, sess := range live {
			go sess.end() // a connection's close may wait on its reader; ctx bounds the wait below
		}
		done := make(chan struct{})
		go func() { s.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			s.closeErr = fmt.Errorf("mcpserver: close: %w", context.Cause(ctx))
			return
		}
		s.closeErr = s.scope.Dispose(ctx)
	})
	return s.closeErr
}
