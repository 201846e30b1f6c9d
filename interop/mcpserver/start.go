package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/troupe-rt/troupe/producers/process"
	"github.com/troupe-rt/troupe/tools"
)

// Tool name, description and schema of job_start (INTEROP.md section 2.4).
const (
	NameStart = "job_start"
	DescStart = "Start a shell command as a background job owned by this session and return its job id. Read it with job_output and stop it with job_kill."
	// maxLabelBytes bounds a job_start label (its command's first line).
	maxLabelBytes = 200
)

var schemaStart = json.RawMessage(`{"type":"object","properties":{"command":{"type":"string","description":"Shell command, run with /bin/sh -c."},"timeout_ms":{"type":"number","description":"Kill the job after this many milliseconds."}},"required":["command"],"additionalProperties":false}`)

// StartValue is job_start's structured value.
type StartValue struct {
	Kind  string `json:"kind"` // always "background"
	JobID string `json:"jobId"`
}

type startTool struct {
	srv   *Server
	shell Shell
}

func (st *startTool) tool() tools.Tool {
	return tools.Tool{Name: NameStart, Description: DescStart, Parameters: schemaStart, Execute: st.execute}
}

func (st *startTool) execute(ctx context.Context, call tools.Call) tools.Result {
	var args struct {
		Command   json.RawMessage `json:"command"`
		TimeoutMs json.RawMessage `json:"timeout_ms"`
	}
	if err := tools.DecodeArgs(call.Args, &args); err != nil {
		return tools.ErrorResult(err)
	}
	var command string
	if len(args.Command) == 0 || json.Unmarshal(args.Command, &command) != nil || command == "" {
		return tools.ErrorResult(fmt.Errorf("invalid command: expected a non-empty string"))
	}
	if len(command) > MaxCommandBytes {
		return tools.ErrorResult(fmt.Errorf("invalid command: %d bytes exceeds the limit of %d", len(command), MaxCommandBytes))
	}
	var timeout time.Duration
	if len(args.TimeoutMs) > 0 {
		var ms float64
		if json.Unmarshal(args.TimeoutMs, &ms) != nil || !(ms > 0) || math.IsInf(ms, 0) || ms > float64(math.MaxInt64/int64(time.Millisecond)) {
			return tools.ErrorResult(fmt.Errorf("invalid timeout_ms: expected a positive number of milliseconds, got %s", args.TimeoutMs))
		}
		timeout = time.Duration(ms * float64(time.Millisecond))
	}
	limit := st.shell.OutputLimitBytes
	if limit == 0 {
		limit = DefaultOutputLimitBytes
	}
	spec := process.Shell(command, process.Config{Dir: st.shell.Dir, Env: st.shell.Env, Timeout: timeout})
	spec.Label = Label(command)
	spec.Owner = call.Caller.Agent()
	spec.OutputLimitBytes = &limit
	id, err := st.srv.sys.Jobs().Start(ctx, spec)
	if err != nil {
		return tools.ErrorResult(err)
	}
	return tools.TextResult("started background shell job "+id, StartValue{Kind: "background", JobID: id})
}

// Label is a job_start job's label: the command, or, for a command with a newline
// or longer than 200 bytes, its first line cut to 200 bytes on a UTF-8 boundary
// plus "…". Invalid UTF-8 becomes U+FFFD.
func Label(command string) string {
	command = strings.ToValidUTF8(command, "\uFFFD")
	first, _, multi := strings.Cut(command, "\n")
	if !multi && len(first) <= maxLabelBytes {
		return first
	}
	if len(first) > maxLabelBytes {
		cut := maxLabelBytes
		for cut > 0 && !utf8.RuneStart(first[cut]) {
			cut--
		}
		first = first[:cut]
	}
	return first + "…"
}
