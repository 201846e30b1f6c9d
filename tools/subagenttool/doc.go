// Package subagenttool is the model-facing `subagent` tool (SPEC §5.4): it delegates
// a task to a named subagent provider, in the foreground (the call waits for the
// child's answer) or in the background — one-shot as a job of kind `subagent`,
// collected with job_output, or as a continuable child.
//
// The caller's contract:
//  1. Build a Config (Provider is required; the rest defaults as SPEC §5.4 says) and
//     Deps: the subagent Runtime, the job registry for one-shot background calls
//     (with the job tools mounted over the calling agent's scope, jobtools.MountIn),
//     and, for continuable mode, the continuation manager.
//  2. MountIn(scope, cfg, deps) validates the config and checks it against the
//     provider: a numeric maxDepth needs the depthLimit capability, continuable mode
//     a subagent.Continuable provider. The tool is offered (Mount.Tools) only while
//     its provider is registered; a provider registered later that fails the checks
//     is refused.
//  3. Run the tool with a tools.Call whose Caller is the calling agent
//     (tools.AsAgent); a call without an agent fails.
//  4. Foreground: the result is the child's final text, or an errored result
//     naming how the run ended. The run is always disposed before the call returns.
//  5. One-shot background: the call returns `started background subagent job
//     <id>`; job_kill cancels the child (its context's cause is the kill reason);
//     the job settles once the run has been disposed.
package subagenttool
