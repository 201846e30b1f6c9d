package jobtools

import (
	"strings"
	"unicode/utf8"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/messages"
)

// Texts of SPEC §3 (verbatim).
const (
	NoNewOutput     = "(no new output)"
	NoJobs          = "(no background jobs)"
	OutputTruncated = "[output truncated]"
	ResultTruncated = "[result truncated]"
	NoticeTruncated = "[notice truncated]"
	NoticeAction    = "\nDone; job_output."
)

// PublicJob is the public projection of a snapshot (SPEC §3.2): it never carries
// ownerSession, reported or outputLimitBytes.
type PublicJob struct {
	ID         string  `json:"id"`
	Kind       string  `json:"kind"`
	Label      string  `json:"label"`
	Status     string  `json:"status"`
	Detail     *string `json:"detail,omitempty"`
	StartedAt  int64   `json:"startedAt"`
	FinishedAt *int64  `json:"finishedAt,omitempty"`
}

// Public projects a snapshot.
func Public(s *messages.JobSnapshot) PublicJob {
	return PublicJob{ID: s.Id, Kind: s.Kind, Label: s.Label, Status: s.Status.Name(),
		Detail: s.Detail, StartedAt: s.StartedAt, FinishedAt: s.FinishedAt}
}

// StatusLine renders `[status: <status>]` or `[status: <status>, <detail>]`.
func StatusLine(s *messages.JobSnapshot) string { return statusLine(s.Status.Name(), s.Detail) }

// StatusLine renders the job's status line.
func (j PublicJob) StatusLine() string { return statusLine(j.Status, j.Detail) }

func statusLine(status string, detail *string) string {
	if detail != nil {
		return "[status: " + status + ", " + *detail + "]"
	}
	return "[status: " + status + "]"
}

// OutputText renders a job_output result: body (or `(no new output)`), a `\n`
// unless the body already ends with one, then the status line.
func OutputText(text string, s *messages.JobSnapshot) string {
	return renderOutput(text, StatusLine(s))
}

func renderOutput(text, statusLine string) string {
	body := text
	if body == "" {
		body = NoNewOutput
	}
	if !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	return body + statusLine
}

// ListText renders job_list: one `<id> [<kind>] <status> — <label>` line per job.
func ListText(jobs []*messages.JobSnapshot) string {
	if len(jobs) == 0 {
		return NoJobs
	}
	lines := make([]string, len(jobs))
	for i, s := range jobs {
		lines[i] = s.Id + " [" + s.Kind + "] " + s.Status.Name() + " \u2014 " + s.Label
	}
	return strings.Join(lines, "\n")
}

// KillText renders job_kill's result.
func KillText(r messages.KillResult, s *messages.JobSnapshot) string {
	if r == messages.KillResult_KILL_RESULT_ALREADY_FINISHED {
		return "job " + s.Id + " had already finished " + StatusLine(s)
	}
	return "requested cancellation of job " + s.Id
}

// NoticeText is the unbounded completion notice (SPEC §3.7). It is built in one
// allocation (it is on every notice's path, on the registry's goroutine): the same
// bytes as "background job " + id + noticeDetail + ". Read its output with job_output.".
func NoticeText(s *messages.JobSnapshot) string {
	if s.Detail != nil {
		return "background job " + s.Id + " (" + s.Kind + ": " + s.Label + ") finished [status: " +
			s.Status.Name() + ", " + *s.Detail + "]. Read its output with job_output."
	}
	return "background job " + s.Id + " (" + s.Kind + ": " + s.Label + ") finished [status: " +
		s.Status.Name() + "]. Read its output with job_output."
}

func noticeDetail(s *messages.JobSnapshot) string {
	return " (" + s.Kind + ": " + s.Label + ") finished " + StatusLine(s)
}

// Summary is `<kind> <label> <statusLine>` capped at 120 UTF-16 code units: a longer
// one keeps 119 units (118 if the 119th would split a surrogate pair) and `…`.
func Summary(s *messages.JobSnapshot) string {
	// One concatenation (one allocation): kind + " " + label + " " + StatusLine.
	if s.Detail != nil {
		return owner.BoundSummary(s.Kind + " " + s.Label + " [status: " + s.Status.Name() + ", " + *s.Detail + "]")
	}
	return owner.BoundSummary(s.Kind + " " + s.Label + " [status: " + s.Status.Name() + "]")
}

// BoundNotice bounds the notice text to limit bytes (limit ≤ 0: unbounded), by the
// first case of SPEC §3.7 that fits.
func BoundNotice(s *messages.JobSnapshot, limit int) string {
	full := NoticeText(s)
	if limit <= 0 || len(full) <= limit {
		return full
	}
	prefix := "background job " + s.Id
	omitted := "\n" + NoticeTruncated
	fixed := prefix + omitted + NoticeAction
	switch {
	case len(fixed) == limit:
		return fixed
	case len(fixed) < limit:
		return prefix + head(noticeDetail(s), limit-len(fixed)) + omitted + NoticeAction
	case len(prefix)+len(NoticeAction) <= limit:
		return prefix + NoticeAction
	case len(NoticeAction) >= limit:
		return tail(NoticeAction, limit)
	}
	return head(prefix, limit-len(NoticeAction)) + NoticeAction
}

// head keeps at most n bytes from the start of s, on a rune boundary.
func head(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// tail keeps at most n bytes from the end of s, on a rune boundary.
func tail(s string, n int) string {
	if n >= len(s) {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// TruncateOutput bounds a canonical job_output text `content + "\n" + statusLine`
// (SPEC §3.6 rule 1): it keeps the tail of content, then `\n[output truncated]`
// (left out if content already ends with it), then the status suffix.
func TruncateOutput(content, statusLine string, limit int) string {
	full := content + "\n" + statusLine
	if limit <= 0 || len(full) <= limit {
		return full
	}
	fixed := "\n" + statusLine
	if !strings.HasSuffix(content, OutputTruncated) {
		fixed = "\n" + OutputTruncated + fixed
	}
	if len(fixed) >= limit {
		return tail(fixed, limit)
	}
	return tail(content, limit-len(fixed)) + fixed
}

// TruncateResult bounds any other single-text result (SPEC §3.6 rule 2): its tail,
// then `\n[result truncated]` unless it already ends with the marker.
func TruncateResult(text string, limit int) string {
	if limit <= 0 || len(text) <= limit {
		return text
	}
	fixed := ""
	if !strings.HasSuffix(text, ResultTruncated) {
		fixed = "\n" + ResultTruncated
	}
	if len(fixed) >= limit {
		return tail(fixed, limit)
	}
	return tail(text, limit-len(fixed)) + fixed
}
