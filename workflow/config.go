package workflow

import (
	"fmt"
	"runtime"
	"time"

	"github.com/troupe-rt/troupe/messages"
)

// Config is the engine's configuration (WORKFLOW.md 3.1). Every field is
// presence-tracked: nil means the default.
type Config struct {
	// Provider is the subagent provider every child of a run starts through, unless
	// the request overrides it (default "spawn").
	Provider *string
	// MaxConcurrentAgents bounds the children of one run holding a slot at once; 0
	// (the default) means min(16, max(1, GOMAXPROCS−2)), resolved at each Start.
	MaxConcurrentAgents *int64
	// MaxTotalAgents is the engine ceiling on accepted agent() calls per run (1000).
	MaxTotalAgents *int64
	// MaxItemsPerCall bounds one parallel()/pipeline() call (4096).
	MaxItemsPerCall *int64
	// SyncTimeoutMs is the budget of one slice of JavaScript (5000).
	SyncTimeoutMs *int64
	// DisposeGraceMs bounds cancellation and disposal (5000).
	DisposeGraceMs *int64
}

// DefaultConfig is the all-defaults configuration.
func DefaultConfig() Config { return Config{} }

// Validate checks every present field (code config/invalid).
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    *int64
		min  int64
	}{
		{"MaxConcurrentAgents", c.MaxConcurrentAgents, 0},
		{"MaxTotalAgents", c.MaxTotalAgents, 1},
		{"MaxItemsPerCall", c.MaxItemsPerCall, 1},
		{"SyncTimeoutMs", c.SyncTimeoutMs, 1},
		{"DisposeGraceMs", c.DisposeGraceMs, 0},
	} {
		if f.v != nil && (*f.v < f.min || *f.v > maxSafeInteger) {
			return messages.Errorf(messages.CodeInvalidConfig, "workflow config %s must be an integer ≥ %d (got %d)", f.name, f.min, *f.v)
		}
	}
	return nil
}

const maxSafeInteger = 1<<53 - 1

// limits is a config resolved to values.
type limits struct {
	provider      string
	maxConcurrent int // 0: resolve at Start
	maxTotal      int64
	maxItems      int64
	syncTimeout   time.Duration
	syncTimeoutMs int64
	grace         time.Duration
}

func (c Config) resolve() limits {
	l := limits{provider: "spawn", maxTotal: 1000, maxItems: 4096, syncTimeoutMs: 5000, grace: 5000 * time.Millisecond}
	if c.Provider != nil {
		l.provider = *c.Provider
	}
	if c.MaxConcurrentAgents != nil {
		l.maxConcurrent = int(min(*c.MaxConcurrentAgents, 1<<30))
	}
	if c.MaxTotalAgents != nil {
		l.maxTotal = *c.MaxTotalAgents
	}
	if c.MaxItemsPerCall != nil {
		l.maxItems = *c.MaxItemsPerCall
	}
	if c.SyncTimeoutMs != nil {
		l.syncTimeoutMs = *c.SyncTimeoutMs
	}
	if c.DisposeGraceMs != nil {
		l.grace = time.Duration(*c.DisposeGraceMs) * time.Millisecond
	}
	l.syncTimeout = time.Duration(l.syncTimeoutMs) * time.Millisecond
	return l
}

// concurrency resolves MaxConcurrentAgents 0 (WORKFLOW.md 3.1, DSH's index.ts rule).
func (l limits) concurrency() int {
	if l.maxConcurrent > 0 {
		return l.maxConcurrent
	}
	return min(16, max(1, runtime.GOMAXPROCS(0)-2))
}

func (l limits) String() string {
	return fmt.Sprintf("provider=%s maxConcurrent=%d maxTotal=%d", l.provider, l.maxConcurrent, l.maxTotal)
}
