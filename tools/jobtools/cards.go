package jobtools

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/troupe-rt/troupe/tools"
)

// Card is the UI card a host shows a person for a call of a job tool, while it runs
// (SPEC §3.5, DSH's presentCall). Its JSON form is SPEC's object:
// `{"card":"generic","title":…,"kind":…,"rawInput":…}`, without rawInput for
// job_list.
type Card struct {
	Card     string `json:"card"`               // always "generic"
	Title    string `json:"title"`              // what the call does, with the job id
	Kind     string `json:"kind"`               // "read" (job_output, job_list) or "execute" (job_kill)
	RawInput string `json:"rawInput,omitempty"` // the job id the call names
}

// MaxCardIDBytes bounds the job id a card shows (in its title and rawInput). Ids the
// registry issues are far shorter; a longer job_id argument is cut at a UTF-8
// boundary and ends in "…".
const MaxCardIDBytes = 128

// PresentCall returns the card of a call of job_output, job_list or job_kill, from
// the call's name and its JSON arguments; ok is false for any other tool. It reads
// no registry state and never fails:
//   - job_output: {generic, "Read output from background job <id>", read, <id>}
//   - job_list:   {generic, "List background jobs", read}
//   - job_kill:   {generic, "Kill background job <id>", execute, <id>}
//
// <id> is the call's job_id argument, valid UTF-8 (invalid bytes and control
// characters become U+FFFD) and at most MaxCardIDBytes. A call whose arguments name
// no job id (absent, empty, not a string, malformed JSON) gets the title without
// " <id>" and no rawInput; the call itself then fails with its own error.
func PresentCall(call tools.Call) (card Card, ok bool) {
	switch call.Name {
	case NameOutput:
		return idCard("Read output from background job", "read", call.Args), true
	case NameList:
		return Card{Card: "generic", Title: "List background jobs", Kind: "read"}, true
	case NameKill:
		return idCard("Kill background job", "execute", call.Args), true
	}
	return Card{}, false
}

func idCard(title, kind string, args json.RawMessage) Card {
	var a struct {
		JobID string `json:"job_id"`
	}
	_ = json.Unmarshal(args, &a) // a malformed call shows no id
	id := cardID(a.JobID)
	if id == "" {
		return Card{Card: "generic", Title: title, Kind: kind}
	}
	return Card{Card: "generic", Title: title + " " + id, Kind: kind, RawInput: id}
}

// cardID makes s one line of valid UTF-8 of at most MaxCardIDBytes.
func cardID(s string) string {
	var b strings.Builder
	for _, r := range s { // an invalid byte ranges as utf8.RuneError
		if unicode.IsControl(r) {
			r = utf8.RuneError
		}
		b.WriteRune(r)
		if b.Len() > MaxCardIDBytes {
			break // enough to know it is too long
		}
	}
	out := b.String()
	if len(out) <= MaxCardIDBytes {
		return out
	}
	cut := MaxCardIDBytes - len("…")
	for !utf8.RuneStart(out[cut]) {
		cut--
	}
	return out[:cut] + "…"
}
