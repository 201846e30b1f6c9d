// Package tools is a small model-tool runtime: a Tool has a name, a description and
// a JSON Schema for its arguments (usable as an OpenAI or Anthropic function
// definition), and Execute returns content blocks, a typed value and IsError. A
// Pipeline runs a tool through pre-, around- and post-execute policy hooks and a
// final step, the seam where SPEC §3.6's truncation rules are defined.
//
// The caller's contract:
//  1. Build a Pipeline; add policy hooks (Pre, Around, Post) and final steps.
//  2. Run(ctx, tool, call): pre hooks may short-circuit (deny or replace); around
//     hooks wrap Execute; post hooks may replace the result; final steps always run,
//     whatever produced the result — a panic anywhere becomes an errored result.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/troupe-rt/troupe/actors/owner"
)

// Block is one content block of a tool result.
type Block struct {
	Type string `json:"type"` // "text", "reasoning", ...
	Text string `json:"text"`
}

// Result is what a tool call returns to the model.
type Result struct {
	Content []Block
	Value   any // the typed value (the canonical result), nil for errors
	IsError bool
}

// TextResult is a successful single-text-block result with its value.
func TextResult(text string, value any) Result {
	return Result{Content: []Block{{Type: "text", Text: text}}, Value: value}
}

// ErrorResult renders err as `Error: <message>`, errored.
func ErrorResult(err error) Result {
	return Result{Content: []Block{{Type: "text", Text: "Error: " + err.Error()}}, IsError: true}
}

// SingleText returns the text of a result made of exactly one text block.
func (r Result) SingleText() (string, bool) {
	if len(r.Content) != 1 || r.Content[0].Type != "text" {
		return "", false
	}
	return r.Content[0].Text, true
}

// Call is one invocation of a tool by an agent.
type Call struct {
	ID     string
	Name   string
	Args   json.RawMessage
	Caller Caller // who calls: one identity, so a session and an agent cannot disagree
}

// Caller is the identity a tool call acts with: an agent instance (its session is
// the agent's own) or nobody (the zero value, "no agent"). Build one with AsAgent;
// a session string is no identity (the registry checks that the agent is its
// session's registered instance, docs/THREAT-MODEL.md).
type Caller struct {
	agent   *owner.Agent
	session string
}

// AsAgent is the identity of agent instance a (nil: nobody).
func AsAgent(a *owner.Agent) Caller {
	if a == nil {
		return Caller{}
	}
	return Caller{agent: a, session: a.Session()}
}

// Session is the caller's session id ("" for no agent).
func (c Caller) Session() string { return c.session }

// Agent is the calling agent instance, nil when the caller has none.
func (c Caller) Agent() *owner.Agent { return c.agent }

// Tool is a model-facing tool.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage // JSON Schema of the arguments
	Execute     func(ctx context.Context, call Call) Result
}

// FunctionDefinition is the tool as an OpenAI/Anthropic-style function definition.
func (t Tool) FunctionDefinition() map[string]any {
	return map[string]any{"name": t.Name, "description": t.Description, "parameters": t.Parameters}
}

// MaxArgsBytes bounds a call's argument JSON.
const MaxArgsBytes = 64 << 10

// DecodeArgs decodes a call's arguments strictly into dst: an object with only known
// fields of the right types, at most MaxArgsBytes; empty arguments mean {}.
func DecodeArgs(raw json.RawMessage, dst any) error {
	if len(raw) > MaxArgsBytes {
		return fmt.Errorf("invalid arguments: %d bytes exceeds the limit of %d", len(raw), MaxArgsBytes)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := DecodeStrict(raw, dst); err != nil {
		return fmt.Errorf("invalid arguments: %s", err.Error())
	}
	return nil
}

// DecodeStrict decodes one JSON value into dst, refusing unknown fields and
// trailing data.
func DecodeStrict(data []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return err
	}
	// Not dec.More: it reports false before a stray `}` or `]`, so `{}}` would pass.
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}
