// Package subagent is the seam for delegating to any agent backend (SPEC §5): named
// providers with declared capabilities, checked before anything starts and refused
// loudly; a Run handle whose result always settles and which always disposes; and
// the embedder's seam for running an agent, the TurnRunner.
//
// The caller's contract:
//  1. Register providers in a Scope (Runtime.RegisterProvider); a duplicate name is
//     refused with DUPLICATE_PROVIDER; disposing the scope removes the provider.
//  2. Runtime.Start(ctx, name, request) checks, in order: the provider exists
//     (NO_PROVIDER), it has every capability the request uses, in the fixed order
//     outputSchema, depthLimit, toolFilter, persona (UNSUPPORTED_CAPABILITY),
//     maxDepth is a non-negative safe integer, the output schema is an object
//     schema; then the provider starts the run.
//  3. Await Run.Result: it fails only on an infrastructure fault; a child that failed
//     still resolves, with its StopReason. Always call Run.Dispose (idempotent).
//  4. A provider that can also start continuable children implements Continuable
//     (its PrepareContinuable is the capability); the continuation manager uses it.
//
// troupe runs no LLM. A provider for an external product (an ACP agent, Codex,
// Claude Code) implements Provider: Start launches the product's session (a process
// through producers/process, or a connection), maps its final assistant message to
// Result.Output and its end to a StopReason, writes provider notes to Diagnostic,
// and makes Dispose stop the session and wait for it. Its Capabilities must claim
// only what it enforces itself.
package subagent
