package jobtools

import (
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/tools"
)

// Delivery is how completion notices reach an idle owner (SPEC §3.8).
type Delivery string

const (
	Wakeup Delivery = "wakeup" // an idle owner is woken with a followup, within the wake budget
	Quiet  Delivery = "quiet"  // notices are always injected into the next step
)

// Defaults of SPEC §3.1.
const (
	DefaultWaitTimeoutMs       = 30000
	DefaultMaxWaitTimeoutMs    = 600000
	DefaultMaxConsecutiveWakes = 3
	maxSafeInteger             = 1<<53 - 1
)

// Config is the tool-jobs config (SPEC §3.1). Every field is presence-tracked: nil
// means the default, a present value is validated (SPEC §1.3 rule 18). The zero
// value is valid and yields the defaults.
type Config struct {
	WaitTimeoutMs       *int64    `json:"waitTimeoutMs,omitempty"`
	MaxWaitTimeoutMs    *int64    `json:"maxWaitTimeoutMs,omitempty"`
	CompletionDelivery  *Delivery `json:"completionDelivery,omitempty"`
	MaxConsecutiveWakes *int64    `json:"maxConsecutiveWakes,omitempty"`
}

// DefaultConfig returns the zero config: every key at its default.
func DefaultConfig() Config { return Config{} }

// Resolved is a validated config with the defaults filled in.
type Resolved struct {
	WaitTimeoutMs       int64
	MaxWaitTimeoutMs    int64
	CompletionDelivery  Delivery
	MaxConsecutiveWakes int
}

func invalid(format string, args ...any) error {
	return messages.Errorf(messages.CodeInvalidConfig, format, args...)
}

// Validate checks every present value and the load-time rules; it is the schema
// check and the apply check in one.
func (c Config) Validate() error {
	_, err := c.Resolve()
	return err
}

// Resolve validates c and fills in the defaults.
func (c Config) Resolve() (Resolved, error) {
	r := Resolved{
		WaitTimeoutMs:       DefaultWaitTimeoutMs,
		MaxWaitTimeoutMs:    DefaultMaxWaitTimeoutMs,
		CompletionDelivery:  Wakeup,
		MaxConsecutiveWakes: DefaultMaxConsecutiveWakes,
	}
	if v := c.WaitTimeoutMs; v != nil {
		if *v < 1 {
			return r, invalid("tool-jobs: invalid waitTimeoutMs: expected a number >= 1, got %d", *v)
		}
		r.WaitTimeoutMs = *v
	}
	if v := c.MaxWaitTimeoutMs; v != nil {
		if *v < 1 {
			return r, invalid("tool-jobs: invalid maxWaitTimeoutMs: expected a number >= 1, got %d", *v)
		}
		r.MaxWaitTimeoutMs = *v
	}
	if v := c.CompletionDelivery; v != nil {
		if *v != Wakeup && *v != Quiet {
			return r, invalid("tool-jobs: invalid completionDelivery: expected %q or %q, got %q", Quiet, Wakeup, string(*v))
		}
		r.CompletionDelivery = *v
	}
	if v := c.MaxConsecutiveWakes; v != nil {
		if *v < 1 {
			return r, invalid("tool-jobs: invalid maxConsecutiveWakes: expected a number >= 1, got %d", *v)
		}
		if *v > maxSafeInteger {
			return r, invalid("tool-jobs: maxConsecutiveWakes (%d) must be a whole number of turns", *v)
		}
		r.MaxConsecutiveWakes = int(*v)
	}
	if r.WaitTimeoutMs > r.MaxWaitTimeoutMs {
		return r, invalid("tool-jobs: waitTimeoutMs (%d) exceeds maxWaitTimeoutMs (%d)", r.WaitTimeoutMs, r.MaxWaitTimeoutMs)
	}
	return r, nil
}

// ParseConfig decodes a JSON config strictly (unknown keys and wrong types fail) —
// the schema check for configs read from files — then validates it. Non-integer
// numbers fail: `2.5` turns is not a whole number of turns.
func ParseConfig(data []byte) (Config, error) {
	var raw struct {
		WaitTimeoutMs       *float64  `json:"waitTimeoutMs"`
		MaxWaitTimeoutMs    *float64  `json:"maxWaitTimeoutMs"`
		CompletionDelivery  *Delivery `json:"completionDelivery"`
		MaxConsecutiveWakes *float64  `json:"maxConsecutiveWakes"`
	}
	if err := tools.DecodeStrict(data, &raw); err != nil {
		return Config{}, invalid("tool-jobs: invalid config: %s", err.Error())
	}
	var c Config
	toInt := func(name string, f *float64) (*int64, error) {
		if f == nil {
			return nil, nil
		}
		if *f != float64(int64(*f)) {
			if name == "maxConsecutiveWakes" {
				return nil, invalid("tool-jobs: maxConsecutiveWakes (%v) must be a whole number of turns", *f)
			}
			return nil, invalid("tool-jobs: invalid %s: expected a whole number, got %v", name, *f)
		}
		n := int64(*f)
		return &n, nil
	}
	var err error
	if c.WaitTimeoutMs, err = toInt("waitTimeoutMs", raw.WaitTimeoutMs); err != nil {
		return Config{}, err
	}
	if c.MaxWaitTimeoutMs, err = toInt("maxWaitTimeoutMs", raw.MaxWaitTimeoutMs); err != nil {
		return Config{}, err
	}
	if c.MaxConsecutiveWakes, err = toInt("maxConsecutiveWakes", raw.MaxConsecutiveWakes); err != nil {
		return Config{}, err
	}
	c.CompletionDelivery = raw.CompletionDelivery
	return c, c.Validate()
}
