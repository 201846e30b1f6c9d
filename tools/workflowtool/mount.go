package workflowtool

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/workflow"
)

// Config is the tool's config (WORKFLOW.md 5.1). Fields are presence-tracked:
// nil means the default.
type Config struct {
	// ToolName is the model-facing name; nil means "workflow". Non-empty.
	ToolName *string
	// MaxResultChars bounds the rendered return value in UTF-16 units; nil means
	// 50000. At least 1.
	MaxResultChars *int64
	// EnableRunInBackground offers run_in_background (troupe's extension, WORKFLOW.md 5.6);
	// nil means false.
	EnableRunInBackground *bool
}

// Resolved is a validated config with the defaults filled in.
type Resolved struct {
	ToolName              string
	MaxResultChars        int
	EnableRunInBackground bool
}

const maxSafeInteger = 1<<53 - 1

func invalid(msg string) error {
	return messages.Errorf(messages.CodeInvalidConfig, "tool-workflow: %s", msg)
}

// Resolve validates c (code config/invalid) and fills in the defaults.
func (c Config) Resolve() (Resolved, error) {
	r := Resolved{ToolName: DefaultToolName, MaxResultChars: DefaultMaxResultChars}
	if v := c.ToolName; v != nil {
		if *v == "" {
			return r, invalid("invalid toolName: expected a non-empty string")
		}
		r.ToolName = *v
	}
	if v := c.MaxResultChars; v != nil {
		if *v < 1 || *v > maxSafeInteger {
			return r, invalid("invalid maxResultChars: expected a positive safe integer")
		}
		r.MaxResultChars = int(*v)
	}
	if v := c.EnableRunInBackground; v != nil {
		r.EnableRunInBackground = *v
	}
	return r, nil
}

// Validate checks every present value.
func (c Config) Validate() error { _, err := c.Resolve(); return err }

// Deps are what the tool runs on (WORKFLOW.md 5.1).
type Deps struct {
	// Engine runs the scripts; required.
	Engine *workflow.Engine
	// Jobs makes every run a job of kind workflow owned by the calling agent
	// (WORKFLOW.md 5.5); nil: runs are not jobs and background calls fail.
	Jobs *registry.Client
	// Records receives each run's durable records (WORKFLOW.md 5.7); nil: none.
	Records RecordSink
	// ParentOf describes the calling agent for its children's requests (depth,
	// history); nil (or an empty Session) means the call's session at depth 0.
	ParentOf func(call tools.Call) subagent.Parent
	// Logger receives the tool's warnings; nil: slog.Default().
	Logger *slog.Logger
}

// Mount is the workflow tool mounted in a scope. Disposing the mount (or its
// scope) withdraws the tool: Tools returns nothing and later calls are refused;
// runs already started go on until they settle and are disposed by their call or
// job.
type Mount struct {
	cfg      Resolved
	deps     Deps
	logger   *slog.Logger
	effect   *scope.Effect
	disposed atomic.Bool
}

// TextDisposed is a call's error after the mount was disposed.
const TextDisposed = "the workflow tool is no longer mounted"

// MountIn validates cfg and deps and mounts the tool in sc.
func MountIn(sc *scope.Scope, cfg Config, deps Deps) (*Mount, error) {
	r, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	if deps.Engine == nil {
		return nil, invalid("a workflow engine is required (workflowtool.Deps.Engine)")
	}
	if sc == nil {
		return nil, invalid("a scope is required")
	}
	m := &Mount{cfg: r, deps: deps, logger: deps.Logger}
	if m.logger == nil {
		m.logger = slog.Default()
	}
	m.effect, err = sc.Add("workflowtool.mount()", func(context.Context) error {
		m.disposed.Store(true)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Config returns the resolved config.
func (m *Mount) Config() Resolved { return m.cfg }

// Tool returns the tool's definition (WORKFLOW.md 5.2), whether or not the mount is live.
func (m *Mount) Tool() tools.Tool {
	return tools.Tool{Name: m.cfg.ToolName, Description: description(m.cfg.EnableRunInBackground),
		Parameters: parameters(m.cfg.EnableRunInBackground), Execute: m.execute}
}

// Tools returns the tool while the mount is live, nothing after disposal.
func (m *Mount) Tools() []tools.Tool {
	if m.disposed.Load() {
		return nil
	}
	return []tools.Tool{m.Tool()}
}

// PromptSection returns the system-prompt section: `tool:<ToolName>` and WORKFLOW.md 5.2's text.
func (m *Mount) PromptSection() (name, text string) {
	return "tool:" + m.cfg.ToolName, promptText(m.cfg.ToolName)
}

// Dispose withdraws the tool. Idempotent.
func (m *Mount) Dispose(ctx context.Context) error { return m.effect.Run(ctx) }
