package subagenttool

import (
	"bytes"
	"encoding/json"

	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/tools"
)

// BackgroundMode is what a background delegation is (SPEC §5.4 backgroundMode).
type BackgroundMode string

const (
	// OneShot runs a background delegation as a job (kind `subagent`); the
	// default route is foreground.
	OneShot BackgroundMode = "one-shot"
	// Continuable starts a continuable child; the default route is background.
	Continuable BackgroundMode = "continuable"
)

// Defaults of SPEC §5.4.
const (
	DefaultToolName = "subagent"
	DefaultMaxDepth = 3
	maxSafeInteger  = 1<<53 - 1
)

// ProviderManaged is the JSON value of maxDepth that leaves the recursion budget to
// the provider (Config.ProviderManagedDepth).
const ProviderManaged = "provider-managed"

// Config is the tool-subagent config (SPEC §5.4). Optional keys are
// presence-tracked: nil means the default, a present value is validated (SPEC §1.3
// rule 18).
type Config struct {
	// Provider names the subagent provider; required.
	Provider string
	// ToolName is the model-facing name; nil means "subagent".
	ToolName *string
	// EnableRunInBackground offers run_in_background; nil means true.
	EnableRunInBackground *bool
	// BackgroundMode is one-shot (nil) or continuable.
	BackgroundMode *BackgroundMode
	// AgentOptions choose the child's model; MaxTokens, when present, is ≥ 1.
	AgentOptions *subagent.AgentOptions
	// Persona is the child's persona ("" for none); it needs the persona capability.
	Persona string
	// ToolFilter narrows the child's tools; when present it names allow or deny.
	ToolFilter *subagent.ToolFilter
	// MaxDepth caps the child's delegation depth, a non-negative safe integer; nil
	// means 3 unless ProviderManagedDepth is set. A numeric cap needs a provider
	// with the depthLimit capability.
	MaxDepth *int64
	// ProviderManagedDepth is maxDepth: 'provider-managed': no cap is requested and
	// the provider keeps its own recursion budget. It excludes MaxDepth.
	ProviderManagedDepth bool
}

// Resolved is a validated config with the defaults filled in.
type Resolved struct {
	Provider              string
	ToolName              string
	EnableRunInBackground bool
	BackgroundMode        BackgroundMode
	AgentOptions          *subagent.AgentOptions
	Persona               string
	ToolFilter            *subagent.ToolFilter
	MaxDepth              *int64 // nil: provider-managed
}

// Load-time error texts (SPEC §5.4, verbatim).
const (
	TextEmptyToolFilter = "tool-subagent: `toolFilter` is configured but names neither `allow` nor `deny` — remove the key or fill the filter"
)

func invalid(format string, args ...any) error {
	return messages.Errorf(messages.CodeInvalidConfig, format, args...)
}

// Validate checks every present value; it is the schema check and the apply check
// in one. The checks against the provider come at mount (MountIn).
func (c Config) Validate() error {
	_, err := c.Resolve()
	return err
}

// Resolve validates c and fills in the defaults.
func (c Config) Resolve() (Resolved, error) {
	r := Resolved{
		Provider:              c.Provider,
		ToolName:              DefaultToolName,
		EnableRunInBackground: true,
		BackgroundMode:        OneShot,
		AgentOptions:          c.AgentOptions,
		Persona:               c.Persona,
		ToolFilter:            c.ToolFilter,
	}
	if c.Provider == "" {
		return r, invalid("tool-subagent: provider is required")
	}
	if v := c.ToolName; v != nil {
		if *v == "" {
			return r, invalid("tool-subagent: invalid toolName: expected a non-empty string")
		}
		r.ToolName = *v
	}
	if v := c.EnableRunInBackground; v != nil {
		r.EnableRunInBackground = *v
	}
	if v := c.BackgroundMode; v != nil {
		if *v != OneShot && *v != Continuable {
			return r, invalid("tool-subagent: invalid backgroundMode: expected %q or %q, got %q", OneShot, Continuable, string(*v))
		}
		r.BackgroundMode = *v
	}
	if o := c.AgentOptions; o != nil && o.MaxTokens != nil && (*o.MaxTokens < 1 || *o.MaxTokens > maxSafeInteger) {
		return r, invalid("tool-subagent: invalid agentOptions.maxTokens: expected a positive safe integer, got %d", *o.MaxTokens)
	}
	if f := c.ToolFilter; f != nil && f.Allow == nil && f.Deny == nil {
		return r, invalid("%s", TextEmptyToolFilter)
	}
	switch {
	case c.ProviderManagedDepth && c.MaxDepth != nil:
		return r, invalid("tool-subagent: maxDepth is both a number (%d) and %q; set one", *c.MaxDepth, ProviderManaged)
	case c.ProviderManagedDepth:
	case c.MaxDepth != nil:
		if *c.MaxDepth < 0 || *c.MaxDepth > maxSafeInteger {
			return r, &messages.Error{Code: messages.CodeInvalidConfig,
				Message: "tool-subagent: " + subagent.ErrInvalidMaxDepth.Error(), Cause: subagent.ErrInvalidMaxDepth}
		}
		r.MaxDepth = c.MaxDepth
	default:
		d := int64(DefaultMaxDepth)
		r.MaxDepth = &d
	}
	return r, nil
}

// ParseConfig decodes a JSON config strictly (unknown keys and wrong types fail),
// with maxDepth a number or "provider-managed", then validates it.
func ParseConfig(data []byte) (Config, error) {
	var raw struct {
		Provider              string                 `json:"provider"`
		ToolName              *string                `json:"toolName"`
		EnableRunInBackground *bool                  `json:"enableRunInBackground"`
		BackgroundMode        *BackgroundMode        `json:"backgroundMode"`
		AgentOptions          *subagent.AgentOptions `json:"agentOptions"`
		Persona               *string                `json:"persona"`
		ToolFilter            *subagent.ToolFilter   `json:"toolFilter"`
		MaxDepth              json.RawMessage        `json:"maxDepth"`
	}
	if err := tools.DecodeStrict(data, &raw); err != nil {
		return Config{}, invalid("tool-subagent: invalid config: %s", err.Error())
	}
	c := Config{Provider: raw.Provider, ToolName: raw.ToolName, EnableRunInBackground: raw.EnableRunInBackground,
		BackgroundMode: raw.BackgroundMode, AgentOptions: raw.AgentOptions, ToolFilter: raw.ToolFilter}
	if raw.Persona != nil {
		c.Persona = *raw.Persona
	}
	if md := bytes.TrimSpace(raw.MaxDepth); len(md) > 0 && !bytes.Equal(md, []byte("null")) {
		var s string
		if json.Unmarshal(md, &s) == nil {
			if s != ProviderManaged {
				return Config{}, invalid("tool-subagent: invalid maxDepth: expected a number or %q, got %q", ProviderManaged, s)
			}
			c.ProviderManagedDepth = true
		} else {
			var n json.Number
			if err := json.Unmarshal(md, &n); err != nil {
				return Config{}, invalid("tool-subagent: invalid maxDepth: expected a number or %q", ProviderManaged)
			}
			v, err := n.Int64()
			if err != nil {
				return Config{}, &messages.Error{Code: messages.CodeInvalidConfig,
					Message: "tool-subagent: " + subagent.ErrInvalidMaxDepth.Error(), Cause: subagent.ErrInvalidMaxDepth}
			}
			c.MaxDepth = &v
		}
	}
	return c, c.Validate()
}
