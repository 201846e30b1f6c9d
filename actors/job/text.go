package job

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// The bounds of job text (issue 12 scope 4). Everything a job shows a model or a
// person — kind, label, detail, kill reason, output — is valid UTF-8 and bounded;
// the registry applies these functions once, where the text enters (Start, Kill,
// settlement, ReadOutput), so every tool result, notice, job_list row and human
// frame built from a snapshot is clean by construction.
const (
	// MaxKindBytes bounds a kind: a kind is an identifier that must match KindPattern,
	// so at most 32 bytes. A kind that does not is refused (job/invalid-spec); kinds
	// are never cut, since they are the id prefix.
	MaxKindBytes = 32
	// KindPattern is the kind grammar: a lowercase ASCII letter, then up to 31
	// lowercase ASCII letters, digits or '-'. SPEC's bash, pty-send, subagent and
	// workflow pass; '/', spaces, newlines, upper case and non-ASCII do not.
	KindPattern = "^[a-z][a-z0-9-]{0,31}$"

	// MaxLabelBytes bounds a label. A label is one line: each line break (\r\n,
	// \n, \r, \v, \f, U+0085, U+2028, U+2029) becomes "↵", every other control
	// character but tab becomes U+FFFD, and so does every invalid UTF-8 sequence.
	// A label longer than MaxLabelBytes after that is cut, not refused: it keeps
	// its head up to a rune boundary and ends with CutMarker, MaxLabelBytes bytes
	// at most (a long shell command still runs; job_list shows its start).
	MaxLabelBytes = 1024
	// MaxReasonBytes bounds a kill reason. Invalid UTF-8 becomes U+FFFD (lines are
	// kept); a longer reason is cut like a label: head, then CutMarker. The kill
	// still lands, and the producer's Cancel receives the cut reason.
	MaxReasonBytes = 1024
	// MaxDetailBytes bounds a producer's detail (Outcome.Detail). Invalid UTF-8
	// becomes U+FFFD (lines are kept); a longer detail is cut like a label. A killed
	// job's detail is the cut detail, "; " and the cut reason, so
	// MaxDetailBytes+2+MaxReasonBytes at most.
	MaxDetailBytes = 4096

	// CutMarker ends a label, reason or detail that was cut.
	CutMarker = "…"
)

// ValidKind reports whether kind matches KindPattern.
func ValidKind(kind string) bool {
	if kind == "" || len(kind) > MaxKindBytes || kind[0] < 'a' || kind[0] > 'z' {
		return false
	}
	for i := 1; i < len(kind); i++ {
		c := kind[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// CleanLabel returns label as one line of valid UTF-8 of at most MaxLabelBytes
// (see MaxLabelBytes). A label that is already clean is returned unchanged.
func CleanLabel(label string) string { return clip(label, MaxLabelBytes, oneLine) }

// CleanReason returns a kill reason as valid UTF-8 of at most MaxReasonBytes.
func CleanReason(reason string) string { return clip(reason, MaxReasonBytes, ValidText) }

// CleanDetail returns a producer detail as valid UTF-8 of at most MaxDetailBytes.
func CleanDetail(detail string) string { return clip(detail, MaxDetailBytes, ValidText) }

// ValidText returns s with every invalid UTF-8 sequence replaced by U+FFFD (a run
// of invalid bytes becomes one U+FFFD). Valid text is returned unchanged, without
// copying. Output is not cut here: a stream is bounded by its producer's buffer and
// the tools bound what they return by outputLimitBytes (SPEC §3.6).
func ValidText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// clip cleans s and bounds it to max bytes: a longer text keeps its head, up to a
// rune boundary, and ends with CutMarker. A huge s is cut before it is cleaned, so
// the work is O(max), not O(len(s)).
func clip(s string, max int, clean func(string) string) string {
	cut := len(s) > max
	if cut {
		// The raw head; backing up over at most UTFMax-1 continuation bytes keeps a
		// rune that straddles max whole (clean would turn its half into U+FFFD).
		n := max
		for i := 0; i < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(s[n]); i++ {
			n--
		}
		s = s[:n]
	}
	s = clean(s)
	if !cut && len(s) <= max {
		return s
	}
	return headOf(s, max-len(CutMarker)) + CutMarker
}

// headOf keeps at most n bytes of valid s, on a rune boundary.
func headOf(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// oneLine is CleanLabel's cleaning, before the cut.
func oneLine(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || isControl(r) || r == '\u2028' || r == '\u2029' {
			clean = false
			break
		}
	}
	if clean {
		return s // valid: a literal U+FFFD decodes as RuneError and takes the slow path
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			// A run of invalid bytes becomes one U+FFFD, as ValidText does.
			b.WriteRune(utf8.RuneError)
			for i += size; i < len(s); {
				if r, size = utf8.DecodeRuneInString(s[i:]); r != utf8.RuneError || size > 1 {
					break
				}
				i += size
			}
			continue
		case r == '\r' && i+1 < len(s) && s[i+1] == '\n':
			b.WriteString("↵")
			size = 2
		case r == '\n' || r == '\r' || r == '\v' || r == '\f' || r == '\u0085' || r == '\u2028' || r == '\u2029':
			b.WriteString("↵")
		case r != '\t' && isControl(r):
			b.WriteRune(utf8.RuneError)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// isControl reports a C0 control, DEL or a C1 control, tab excluded.
func isControl(r rune) bool {
	return r != '\t' && (r < 0x20 || r >= 0x7f && r < 0xa0)
}

// QuoteBounded renders s for an error message: its first max bytes (a rune
// boundary; "…" after a cut) as a JSON string, so invalid UTF-8 shows as U+FFFD and
// control characters as escapes (JSON.stringify's form, no HTML escaping).
func QuoteBounded(s string, max int) string {
	s = clip(s, max, ValidText)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// SplitPartial splits s before a trailing incomplete UTF-8 sequence: partial is a
// proper prefix of a valid encoding (at most UTFMax-1 bytes) that a later write may
// complete, whole the rest. A stream that holds partial back until it is completed
// or the stream ends never shows a rune split across two reads as two U+FFFD.
func SplitPartial(s string) (whole, partial string) {
	for i := len(s) - 1; i >= 0 && i >= len(s)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRuneInString(s[i:]) {
				return s[:i], s[i:]
			}
			break
		}
	}
	return s, ""
}

// MaxIDBytes bounds a job id echoed in an error: a real id is at most
// MaxKindBytes+1+16 bytes ("<kind>-" and a safe integer), so only a caller's bogus
// id is ever cut (like a label: head, then CutMarker).
const MaxIDBytes = 64

// CleanID returns a caller-supplied job id fit for an error message and its
// details: unchanged when it is valid UTF-8 of at most MaxIDBytes, else cleaned
// and cut.
func CleanID(id string) string { return clip(id, MaxIDBytes, ValidText) }

// ErrorText is the message of a producer's error (Run, Cancel, ReadOutput) as a
// caller sees it: valid UTF-8, cut at MaxDetailBytes like a detail.
func ErrorText(err error) string { return CleanDetail(err.Error()) }
