// Package agenttools has the model tools of continuable subagents (SPEC §6.4, §6.6,
// §6.9): send_message, interrupt_agent, list_agents and report, over a
// continuation manager. Every call acts as the calling agent instance (tools.Call's
// Agent): that instance, not any sender field, is the authority.
package agenttools

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/tools"
)

// Tool names.
const (
	NameSend      = "send_message"
	NameInterrupt = "interrupt_agent"
	NameList      = "list_agents"
	NameReport    = "report"
	NoSubagents   = "(no subagents)"
)

// ReportDelivery is how a report reaches the parent: next-step (steered into its
// next step, waking it when idle; the default) or quiet (injected).
type ReportDelivery string

const (
	NextStep ReportDelivery = "next-step"
	Quiet    ReportDelivery = "quiet"
)

// Tools binds the tools to a manager.
type Tools struct {
	m              *activation.Manager
	reportDelivery ReportDelivery
}

// New returns the tools; delivery "" means next-step.
func New(m *activation.Manager, delivery ReportDelivery) (*Tools, error) {
	switch delivery {
	case "":
		delivery = NextStep
	case NextStep, Quiet:
	default:
		return nil, errors.New(`agenttools: reportDelivery must be "next-step" or "quiet"`)
	}
	return &Tools{m: m, reportDelivery: delivery}, nil
}

// All returns the four tools.
func (t *Tools) All() []tools.Tool {
	return []tools.Tool{t.Send(), t.Interrupt(), t.List(), t.Report()}
}

// SendValue is send_message's value.
type SendValue struct {
	MessageID string `json:"messageId"`
}

// Send is send_message(subagent_id, message).
func (t *Tools) Send() tools.Tool {
	return tools.Tool{Name: NameSend,
		Description: "Send a message to a subagent you started; it is queued as that subagent's next turn (waking it, or resuming it if it finished).",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"subagent_id":{"type":"string","description":"The id of a subagent you started."},"message":{"type":"string","description":"What to tell it."}},"required":["subagent_id","message"],"additionalProperties":false}`),
		Execute: func(ctx context.Context, call tools.Call) tools.Result {
			var args struct {
				SubagentID string `json:"subagent_id"`
				Message    string `json:"message"`
			}
			if err := tools.DecodeArgs(call.Args, &args); err != nil {
				return tools.ErrorResult(err)
			}
			if call.Caller.Agent() == nil {
				return tools.ErrorResult(errors.New("send_message requires a calling agent (exec.agent was undefined)"))
			}
			id, err := t.m.Followup(ctx, call.Caller.Agent(), args.SubagentID, args.Message,
				session.Source{Kind: "coordinator", Form: "relay", SenderSessionID: call.Caller.Agent().Session()})
			if err != nil {
				return tools.ErrorResult(err)
			}
			return tools.TextResult("message queued as the next turn for subagent "+args.SubagentID, SendValue{MessageID: id})
		}}
}

// InterruptValue is interrupt_agent's value.
type InterruptValue struct {
	Accepted bool `json:"accepted"`
}

// Interrupt is interrupt_agent(agent_id), with the caller as ancestor authority.
func (t *Tools) Interrupt() tools.Tool {
	return tools.Tool{Name: NameInterrupt,
		Description: "Stop the current turn of a subagent below you; its queued messages are kept and run when you next send it something.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"agent_id":{"type":"string","description":"The id of a subagent below you."}},"required":["agent_id"],"additionalProperties":false}`),
		Execute: func(ctx context.Context, call tools.Call) tools.Result {
			var args struct {
				AgentID string `json:"agent_id"`
			}
			if err := tools.DecodeArgs(call.Args, &args); err != nil {
				return tools.ErrorResult(err)
			}
			if call.Caller.Agent() == nil {
				return tools.ErrorResult(errors.New("interrupt_agent requires a calling agent (exec.agent was undefined)"))
			}
			if err := t.m.Interrupt(ctx, args.AgentID, activation.Authority{Ancestor: call.Caller.Agent()}); err != nil {
				return tools.ErrorResult(err)
			}
			return tools.TextResult("interrupt requested for agent "+args.AgentID, InterruptValue{Accepted: true})
		}}
}

// List is list_agents(scope?: children|descendants).
func (t *Tools) List() tools.Tool {
	return tools.Tool{Name: NameList,
		Description: "List the continuable subagents you started (scope children, the default) or everything below you (scope descendants), with their status: running, idle or ready.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"scope":{"type":"string","enum":["children","descendants"]}},"additionalProperties":false}`),
		Execute: func(ctx context.Context, call tools.Call) tools.Result {
			var args struct {
				Scope string `json:"scope"`
			}
			if err := tools.DecodeArgs(call.Args, &args); err != nil {
				return tools.ErrorResult(err)
			}
			if args.Scope != "" && args.Scope != "children" && args.Scope != "descendants" {
				return tools.ErrorResult(errors.New(`invalid scope: expected "children" or "descendants", got ` + strconv.Quote(args.Scope)))
			}
			if call.Caller.Agent() == nil {
				return tools.ErrorResult(errors.New("list_agents requires a calling agent (exec.agent was undefined)"))
			}
			descendants := args.Scope == "descendants"
			items, err := t.m.List(ctx, call.Caller.Agent(), descendants)
			if err != nil {
				return tools.ErrorResult(err)
			}
			return tools.TextResult(ListText(items, descendants), items)
		}}
}

// ListText renders list_agents (SPEC §6.9).
func ListText(items []activation.Listed, descendants bool) string {
	if len(items) == 0 {
		return NoSubagents
	}
	lines := make([]string, len(items))
	for i, l := range items {
		if l.Diagnostic != "" {
			lines[i] = l.ID + " [diagnostic: " + l.Diagnostic + "]"
			continue
		}
		where := ""
		if descendants {
			where = " parent=" + l.Parent + " depth=" + strconv.Itoa(l.Depth)
		}
		// A child's label is the delegating model's description: one row per agent
		// needs it one line, valid and bounded, as a job label (job.CleanLabel).
		lines[i] = l.ID + " [" + l.Status + "]" + where + " \u2014 " + job.CleanLabel(l.Label)
	}
	return strings.Join(lines, "\n")
}

// ReportValue is report's value.
type ReportValue struct {
	MessageID string `json:"messageId"`
}

// Report is report(content): a continuable child tells the agent that started it.
func (t *Tools) Report() tools.Tool {
	return tools.Tool{Name: NameReport,
		Description: "Report progress or a result to the agent that started you, without ending your turn.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"content":{"type":"string","description":"What to report."}},"required":["content"],"additionalProperties":false}`),
		Execute: func(ctx context.Context, call tools.Call) tools.Result {
			var args struct {
				Content string `json:"content"`
			}
			if err := tools.DecodeArgs(call.Args, &args); err != nil {
				return tools.ErrorResult(err)
			}
			if call.Caller.Agent() == nil {
				return tools.ErrorResult(errors.New("report requires a calling agent (exec.agent was undefined)"))
			}
			id, err := t.m.Report(ctx, call.Caller.Agent(), args.Content, t.reportDelivery == Quiet)
			if err != nil {
				return tools.ErrorResult(err)
			}
			return tools.TextResult("report accepted by the agent that started you as message "+id, ReportValue{MessageID: id})
		}}
}
