package workflowtool

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/troupe-rt/troupe/workflow"
)

// Value is a completed foreground run's value: the whole result, never cut.
type Value struct {
	RunID         string          `json:"runId"`
	AgentsStarted int             `json:"agentsStarted"`
	Result        json.RawMessage `json:"result"`
}

// BackgroundValue is a background start's value.
type BackgroundValue struct {
	Kind  string `json:"kind"` // "background"
	JobID string `json:"jobId"`
}

// RenderSuccess is a completed run's text (WORKFLOW.md 5.4): the headline, then
// the value as JSON.stringify(value, null, 2), cut to maxChars UTF-16 units (one
// fewer when the cut would split a surrogate pair) with a truncation marker.
func RenderSuccess(name string, agentsStarted int, value json.RawMessage, maxChars int) string {
	s := "s"
	if agentsStarted == 1 {
		s = ""
	}
	return "workflow \"" + name + "\" completed (" + strconv.Itoa(agentsStarted) + " agent" + s + ").\nReturn value:\n" +
		cutUTF16(pretty(value), maxChars)
}

func pretty(value json.RawMessage) string {
	if len(bytes.TrimSpace(value)) == 0 {
		return "null"
	}
	var b bytes.Buffer
	if err := json.Indent(&b, value, "", "  "); err != nil {
		// the engine hands out JSON.stringify's text; anything else is shown as is
		return string(value)
	}
	return b.String()
}

// cutUTF16 keeps the first max UTF-16 units of s (backing off a split pair) and
// appends the truncation marker with the number of units omitted.
func cutUTF16(s string, max int) string {
	total, kept, cut := 0, 0, -1
	for i, r := range s {
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if cut < 0 && total+w > max {
			cut, kept = i, total
		}
		total += w
	}
	if cut < 0 {
		return s
	}
	return s[:cut] + "\n… [truncated: " + strconv.Itoa(total-kept) + " more characters]"
}

// RenderFailure is a run that did not complete, as the model reads it (the tool
// prefixes `Error: `).
func RenderFailure(res workflow.Result) string {
	switch res.StopReason {
	case workflow.StopCancelled:
		if res.Error == "" {
			return "workflow run was cancelled"
		}
		return "workflow run was cancelled (" + res.Error + ")"
	case workflow.StopError:
		if res.Error == "" {
			return "workflow run failed: unknown error"
		}
		return "workflow run failed: " + res.Error
	}
	return "workflow run ended abnormally (" + string(res.StopReason) + ")"
}
