// Package acp is the ACP subagent provider: it delegates a subagent run to any
// external program that speaks the Agent Client Protocol (JSON-RPC 2.0, one JSON
// object per line over the agent's stdin and stdout), on
// github.com/coder/acp-go-sdk (imported as acpsdk). troupe is the ACP client; the
// child keeps its own model, tools and history in its own process, and troupe sees
// its final answer, its stop reason and its stderr. docs/INTEROP.md section 1 is the
// contract.
//
// A one-shot run is one process, started through producers/process.StartPiped (own
// process group, the job marker, verified tree kill): initialize {protocolVersion:
// 1, no fs, no terminal} → authenticate (Config.AuthMethod) → session/new {cwd,
// mcpServers: []} → session/prompt with the request's text. The answer is every
// agent_message_chunk text of the prompt, in order, bounded by MaxOutputBytes;
// every other update is dropped. Stop reasons map end_turn → completed,
// max_tokens → max-tokens, refusal → refusal, cancelled → aborted, anything else →
// error with "acp stop reason: <value>".
//
// Capabilities: none is claimed (no output schema, depth limit, tool filter or
// persona crosses ACP), so the runtime refuses such requests before anything
// spawns. Continuable children (Config.Continuable) are offered only for agents
// advertising loadSession (probed once per provider): one process per residency
// epoch, session/new for the first turn, session/load of the recorded session
// ({"acpSessionId", "cwd"}, the turn's provider state) after a cold resume or a
// restart; the continuation manager's runner must be subagent.Route(rt, embedder).
//
// Permission requests are answered without asking anyone: the first reject option
// by default (Permission "reject"), the first allow option with "allow", or
// Config.Decide's choice; "cancelled" only while troupe cancels the turn.
// fs/*, terminal/*, elicitation and extension requests get JSON-RPC -32601.
//
// Cancellation never cancels the SDK's session/prompt call (that would lose the
// cancelled response): the turn's end sends session/cancel, waits CancelGrace for
// the response, and past it stops the process. The stop ladder closes stdin, waits
// EOFGrace, SIGTERMs the group and every marked process, waits Grace, SIGKILLs and
// waits until the tree is gone and reaped; Dispose returns only after that.
//
// The agent's environment is this process's minus every name matching
// (?i)KEY|PASSWORD|SECRET|TOKEN and an inherited TROUPE_JOB, plus Config.Env, plus
// the run's own marker.
package acp
