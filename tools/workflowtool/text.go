package workflowtool

import (
	"encoding/json"
	"strings"
)

// DefaultToolName is the tool's model-facing name unless Config.ToolName says
// otherwise.
const DefaultToolName = "workflow"

// DefaultMaxResultChars bounds the rendered return value (UTF-16 units).
const DefaultMaxResultChars = 50000

// Texts the model reads (WORKFLOW.md 5.3–5.6), verbatim.
const (
	TextAborted            = "tool call aborted before dispatch"
	TextNoAgent            = "workflow tool requires a calling agent (exec.agent was undefined)"
	TextInvalidScript      = "invalid script: expected a string"
	TextInvalidMeta        = "invalid meta: expected a JSON object"
	TextInvalidArgs        = "invalid args: expected a JSON object"
	TextBackgroundDisabled = "run_in_background is disabled for this tool instance (enableRunInBackground: false)"
	// TextNoJobs is SPEC rule 23's verbatim prefix followed by troupe's hint.
	TextNoJobs = "background jobs unavailable: give the workflow tool troupe's job registry (workflowtool.Deps.Jobs = System.Jobs()) and mount the job tools in the agent's scope (jobtools.MountIn)"
	// ReasonParentAborted is the cancel reason when the tool call's ctx ends.
	ReasonParentAborted = "parent step aborted"
	startedBackground   = "started background workflow job "
)

func promptText(name string) string {
	return "Use the " + name + " tool ONLY when the user explicitly asks for a workflow or for large multi-agent orchestration: you write a JavaScript script (the tool description documents the exact format) that fans work out across many subagents with phases and structured results. For one or two delegations, prefer plain subagent calls."
}

var descriptionLines = []string{
	"Run a JavaScript workflow script that orchestrates subagents at scale. Use this for work that fans out across many independent pieces — an audit over many files, a migration, multi-angle research, adversarial verification of findings — where you write the orchestration as a script instead of delegating turn by turn.",
	"",
	"The workflow's identity rides the `meta` parameter as JSON: required `name` (short kebab-case) and `description` strings, optional `whenToUse` string and `phases` array (`{title, detail?, provider?, model?}`). The `script` parameter is the plain JavaScript body ONLY (NOT TypeScript, and NO `export const meta` statement — meta is a parameter, not code), running with top-level await; end with `return <value>` — the value must be JSON-serializable and is this tool's result.",
	"",
	"Script-body hooks:",
	"- `agent(prompt, opts?): Promise<any>` — run one subagent to completion. Without `opts.schema` it resolves to the child's final text; with `opts.schema` (an object-rooted JSON Schema using ONLY type/properties/required/additionalProperties/items/enum/const/oneOf — no pattern/format/numeric bounds) it resolves to the validated object. Resolves `null` when the child fails (filter with `.filter(Boolean)`). Other opts: `label` (display), `phase` (progress group), and independent `provider`/`model` LLM target overrides (either may be provided alone). Anything else (`effort`/`isolation`/`agentType`) is rejected loudly.",
	"- `pipeline(items, ...stages): Promise<any[]>` — run each item through the stages independently with NO barrier between stages (prefer this for multi-stage work). Each stage receives `(prev, item, index)`. An ordinary stage throw drops that ITEM to `null` and skips its remaining stages.",
	"- `parallel(thunks): Promise<any[]>` — run zero-argument functions concurrently and await ALL of them (a barrier; use only when a stage genuinely needs every prior result together). A throwing thunk resolves to `null`.",
	"- `phase(title)` — start a progress phase; `log(message)` — narrate progress; `args` — the tool call's `args` input, verbatim.",
	"",
	"Misused hooks (bad arguments, unknown options, unsupported schemas, tripped caps) throw errors that ALWAYS kill the script — they never dissolve into a per-item `null`.",
	"",
	"Constraints: concurrency and total-agent caps apply; no filesystem, network, timers, or Node.js APIs are provided — the agents do the work, the script only coordinates them. The run executes in the foreground: this call returns when the whole script finishes.",
}

const backgroundSentence = " Set run_in_background: true to run it as a background job instead; you are notified when it finishes and collect its result with job_output."

func description(background bool) string {
	d := strings.Join(descriptionLines, "\n")
	if background {
		d += backgroundSentence
	}
	return d
}

const (
	schemaHead       = `{"type":"object","properties":{"script":{"type":"string","description":"The plain-JS workflow script body (top-level await allowed; NO ` + "`export const meta`" + ` statement; end with ` + "`return <json-value>`" + `)."},"meta":{"type":"object","description":"The workflow identity block (plain JSON — never code).","properties":{"name":{"type":"string","description":"Short kebab-case workflow name."},"description":{"type":"string","description":"One-line description of what the workflow does."},"whenToUse":{"type":"string","description":"Optional guidance on when this workflow applies."},"phases":{"type":"array","description":"Optional phase declarations matched by phase() calls.","items":{"type":"object","properties":{"title":{"type":"string","description":"The phase title phase() calls match by exact string."},"detail":{"type":"string","description":"Optional one-line description of the phase."},"provider":{"type":"string","description":"Optional provider override this phase is expected to use."},"model":{"type":"string","description":"Optional model override this phase is expected to use."}},"required":["title"],"additionalProperties":true}}},"required":["name","description"],"additionalProperties":true},"args":{"type":"object","description":"Optional JSON input exposed to the script as the ` + "`args`" + ` global (wrap a bare list as a field, e.g. {\"files\": [...]}).","additionalProperties":true}`
	schemaBackground = `,"run_in_background":{"type":"boolean","description":"Run the workflow in the background as a job and keep working; collect its result with job_output."}`
	schemaTail       = `},"required":["script","meta"],"additionalProperties":false}`
)

func parameters(background bool) json.RawMessage {
	s := schemaHead
	if background {
		s += schemaBackground
	}
	return json.RawMessage(s + schemaTail)
}
