package acp

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"golang.org/x/sys/unix"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/messages"
)

// Permission policies (docs/INTEROP.md section 1.6).
const (
	PermissionReject = "reject"
	PermissionAllow  = "allow"
)

// Defaults of Config (docs/INTEROP.md section 1.3).
const (
	DefaultName              = "acp"
	DefaultStartTimeout      = 30 * time.Second
	DefaultCancelGrace       = 5 * time.Second
	DefaultEOFGrace          = 2 * time.Second
	DefaultGrace             = 2 * time.Second
	DefaultPermissionTimeout = 30 * time.Second
	DefaultMaxOutputBytes    = 1 << 20
	DefaultStderrTailBytes   = 8 << 10
)

// PermissionRequest is the agent's session/request_permission.
type PermissionRequest = acpsdk.RequestPermissionRequest

// Config configures the ACP provider. A zero value means the default; a negative
// duration or size fails Validate with config/invalid.
type Config struct {
	// Name is the provider name in the runtime ("" → "acp").
	Name string
	// Command and Args are the agent executable and its arguments, run without a shell.
	Command string
	Args    []string
	// Cwd is the absolute directory of both the process and the ACP session. Without
	// it, Parent.Cwd is used (a one-shot run fails when that is empty too).
	Cwd string
	// Env is added to the scrubbed environment (see the package doc).
	Env map[string]string
	// Permission is PermissionReject (the default) or PermissionAllow.
	Permission string
	// Decide, when set, replaces Permission: it returns one of the request's
	// options[].optionId. No answer, a timeout (PermissionTimeout), a panic or an
	// unknown id falls back to the reject rule.
	Decide func(ctx context.Context, req PermissionRequest) (optionID string, ok bool)
	// AuthMethod is an advertised authMethods[].id, sent in authenticate before
	// session/new or session/load.
	AuthMethod string
	// Continuable offers PrepareContinuable (only for agents advertising loadSession).
	Continuable bool
	// StartTimeout bounds spawn → initialize → (authenticate) → session/new.
	StartTimeout time.Duration
	// CancelGrace is how long the session/prompt response is awaited after session/cancel.
	CancelGrace time.Duration
	// EOFGrace and Grace are the waits from closing stdin to SIGTERM and from
	// SIGTERM to SIGKILL.
	EOFGrace time.Duration
	Grace    time.Duration
	// PermissionTimeout bounds Decide.
	PermissionTimeout time.Duration
	// MaxOutputBytes caps the collected answer text.
	MaxOutputBytes int
	// StderrTailBytes is how much stderr is kept for diagnostics.
	StderrTailBytes int
	// Observe, when set, hears the provider's events (it may be called from several
	// goroutines, and must not block). Tests wait on these, never on sleeps.
	Observe func(Event)
	// Logger receives the permission answers, stray messages and stderr (nil: slog.Default()).
	Logger *slog.Logger
}

// Event kinds.
const (
	EventSpawned       = "spawned"
	EventInitialized   = "initialized"
	EventAuthenticated = "authenticated"
	EventSession       = "session"
	EventLoaded        = "loaded"
	EventUpdate        = "update"
	EventPermission    = "permission"
	EventCancelSent    = "cancel-sent"
	EventPromptEnd     = "prompt-end" // the session/prompt call returned (Update: its stopReason, "" on an error)
	EventStopped       = "stopped"
)

// Event is what Observe hears.
type Event struct {
	Kind string
	// PID and Marker (spawned, and every later event of the process).
	PID    int
	Marker string
	// Capabilities (initialized): the agent's answer.
	Capabilities acpsdk.AgentCapabilities
	// SessionID (session, loaded, update, permission, cancel-sent).
	SessionID string
	// Update is the sessionUpdate kind (update).
	Update string
	// Options, Answer ("selected" or "cancelled") and OptionID (permission).
	Options  []acpsdk.PermissionOption
	Answer   string
	OptionID string
	// Outcome (stopped): the process tree's outcome.
	Outcome job.Outcome
}

// Validate checks the values that can be wrong (docs/INTEROP.md section 1.10).
func (c Config) Validate() error {
	if c.Command == "" {
		return messages.Errorf(messages.CodeInvalidConfig, "acp: command must be non-empty")
	}
	if c.Cwd != "" {
		if err := checkDir(c.Cwd); err != nil {
			return err
		}
	}
	switch c.Permission {
	case "", PermissionReject, PermissionAllow:
	default:
		return messages.Errorf(messages.CodeInvalidConfig, "acp: permission must be %q or %q, got %q", PermissionReject, PermissionAllow, c.Permission)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"startTimeout", c.StartTimeout}, {"cancelGrace", c.CancelGrace}, {"eofGrace", c.EOFGrace},
		{"grace", c.Grace}, {"permissionTimeout", c.PermissionTimeout}} {
		if d.v < 0 {
			return messages.Errorf(messages.CodeInvalidConfig, "acp: invalid %s: expected a non-negative duration, got %s", d.name, d.v)
		}
	}
	if c.MaxOutputBytes < 0 {
		return messages.Errorf(messages.CodeInvalidConfig, "acp: invalid maxOutputBytes: expected a non-negative integer, got %d", c.MaxOutputBytes)
	}
	if c.StderrTailBytes < 0 {
		return messages.Errorf(messages.CodeInvalidConfig, "acp: invalid stderrTailBytes: expected a non-negative integer, got %d", c.StderrTailBytes)
	}
	return nil
}

// checkDir: an absolute, existing directory the server can enter.
func checkDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return messages.Errorf(messages.CodeInvalidConfig, "acp: cwd must be an absolute path: %s", dir)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || unix.Access(dir, unix.X_OK) != nil {
		return messages.Errorf(messages.CodeInvalidConfig, "acp: cwd is not an accessible directory: %s", dir)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.Permission == "" {
		c.Permission = PermissionReject
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.StartTimeout, DefaultStartTimeout)
	def(&c.CancelGrace, DefaultCancelGrace)
	def(&c.EOFGrace, DefaultEOFGrace)
	def(&c.Grace, DefaultGrace)
	def(&c.PermissionTimeout, DefaultPermissionTimeout)
	if c.MaxOutputBytes == 0 {
		c.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if c.StderrTailBytes == 0 {
		c.StderrTailBytes = DefaultStderrTailBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}
