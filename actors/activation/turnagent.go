package activation

import (
	"context"

	"github.com/troupe-rt/troupe/actors/owner"
)

// agentKey is the context key of a turn's agent; unexported, so only this package
// can put an agent into a context.
type agentKey struct{}

// TurnAgent returns the agent instance of the continuable child whose turn ctx
// belongs to — the ctx troupe hands its TurnRunner, and any context derived from
// it — or nil for any other context. It is the child's credential: pass it as the
// caller of the tools the turn runs (tools.AsAgent), so the child starts its own
// children, reports, lists and interrupts as itself. troupe hands a resident
// child's agent to nobody else: no lookup by id returns it (docs/THREAT-MODEL.md).
func TurnAgent(ctx context.Context) *owner.Agent {
	a, _ := ctx.Value(agentKey{}).(*owner.Agent)
	return a
}

func withTurnAgent(ctx context.Context, a *owner.Agent) context.Context {
	return context.WithValue(ctx, agentKey{}, a)
}
