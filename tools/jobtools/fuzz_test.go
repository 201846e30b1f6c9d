package jobtools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/troupetest"
)

// Fuzz targets of TESTING.md's fuzz suite: tool-argument JSON and UTF-8
// truncation. Seed corpora are committed under testdata/fuzz/<FuzzName>/.

// stubborn is a producer whose model or human kill lands but never settles it, so
// fuzzed kills leave the job live (stopping); only a teardown settles it.
type stubborn struct {
	done chan job.Outcome
	once sync.Once
}

func (p *stubborn) run() (job.Hooks, error) {
	p.done = make(chan job.Outcome, 1)
	return job.Hooks{Done: p.done, Cancel: func(reason string) error {
		if reason == job.ReasonOwnerDisposed || reason == job.ReasonServiceDisposed {
			p.once.Do(func() { p.done <- job.Outcome{Status: job.Killed} })
		}
		return nil
	}, ReadOutput: func() (string, error) { return "tick\n", nil }}, nil
}

// limits of the fuzz world's jobs, by id, and who may see them.
var fuzzJobs = map[string]struct {
	limit int
	owner string // "" unowned
}{
	"bash-1": {0, ""},
	"bash-2": {64, "alice"},
	"bash-3": {40, "alice"},
}

// FuzzDecodeArgs runs job_output, job_kill and job_list with arbitrary argument
// bytes, through the mount's pipeline, against one System built once per fuzz run:
// bash-1 (unowned, live stream, no limit), bash-2 (alice's, settled, limit 64) and
// bash-3 (alice's, live stream, limit 40). A call never panics; arguments that do
// not decode strictly give an errored `Error: invalid arguments: …` result;
// strict decoding accepts only valid JSON; every result is one text block, bounded
// by the limit of the job its arguments name when the caller can see that job.
func FuzzDecodeArgs(f *testing.F) {
	sys, _ := troupetest.NewSystem(f)
	if _, err := sys.Jobs().MountAgents(context.Background(), sys.Scope()); err != nil {
		f.Fatal(err)
	}
	one, two := int64(1), int64(2)
	m, err := MountIn(f.Context(), sys.Jobs(), sys.Scope(), Config{WaitTimeoutMs: &one, MaxWaitTimeoutMs: &two})
	if err != nil {
		f.Fatal(err)
	}
	alice, err := sys.NewAgent(nil, "alice")
	if err != nil {
		f.Fatal(err)
	}
	if err := sys.Jobs().RegisterAgent(context.Background(), alice); err != nil {
		f.Fatal(err)
	}
	start := func(spec job.Spec) {
		if _, err := sys.Jobs().Start(context.Background(), spec); err != nil {
			f.Fatal(err)
		}
	}
	l64, l40 := int64(64), int64(40)
	start(job.Spec{Kind: "bash", Label: "stream", Run: (&stubborn{}).run})
	settled := &stubborn{}
	start(job.Spec{Kind: "bash", Label: "settled", Owner: alice, OutputLimitBytes: &l64, Run: settled.run})
	settled.done <- job.Outcome{Status: job.Completed, Detail: "exit code: 0"}
	troupetest.Settled(f, sys, "bash-2", registry.AsAgent(alice))
	start(job.Spec{Kind: "bash", Label: "limited", Owner: alice, OutputLimitBytes: &l40, Run: (&stubborn{}).run})

	byName := map[string]tools.Tool{}
	for _, tl := range m.All() {
		byName[tl.Name] = tl
	}
	names := []string{NameOutput, NameKill, NameList}
	bob, err := sys.NewAgent(nil, "bob")
	if err != nil {
		f.Fatal(err)
	}
	if err := sys.Jobs().RegisterAgent(context.Background(), bob); err != nil {
		f.Fatal(err)
	}
	sessions := []string{"", "alice", "bob"}
	callers := map[string]tools.Caller{"alice": tools.AsAgent(alice), "bob": tools.AsAgent(bob)}

	for _, seed := range []struct {
		args string
		sel  uint8
	}{
		{`{"job_id":"bash-1"}`, 0},
		{`{"job_id":"bash-2"}`, 3},
		{`{"job_id":"bash-3","wait":true,"timeout_ms":1}`, 3},
		{`{"job_id":"bash-3","wait":true,"timeout_ms":-5}`, 3},
		{`{"job_id":"bash-3","reason":"superseded"}`, 4},
		{`{"job_id":""}`, 1},
		{`{"job_id":"bash-99"}`, 0},
		{`{"job_id":"bash-2"}`, 6},
		{`{}`, 2},
		{``, 2},
		{`{"extra":1}`, 2},
		{`{"job_id":1}`, 0},
		{`{"job_id":"bash-2","x":1}`, 3},
		{`[1,2]`, 0},
		{`null`, 1},
		{`{"job_id":"bash-1"}{}`, 0},
		{`{"job_id":"bash-1"}}`, 0},
		{"{\"job_id\":\"\xff\"}", 0},
	} {
		f.Add([]byte(seed.args), seed.sel)
	}

	f.Fuzz(func(t *testing.T, args []byte, sel uint8) {
		name := names[int(sel)%len(names)]
		session := sessions[int(sel)/len(names)%len(sessions)]
		call := tools.Call{ID: "fuzz", Name: name, Args: args, Caller: callers[session]}
		res := m.Pipeline().Run(context.Background(), byName[name], call)

		text, ok := res.SingleText()
		if !ok {
			t.Fatalf("result is not one text block: %#v", res.Content)
		}
		// Every result, errored ones included, is valid UTF-8 and bounded by what
		// the call can echo: a quoted argument (≤ 4 bytes a byte) and fixed words.
		if !utf8.ValidString(text) {
			t.Fatalf("result is not valid UTF-8: %q", text)
		}
		if bound := 4*len(args) + 512; len(text) > bound {
			t.Fatalf("result is %d bytes (bound %d): %q", len(text), bound, text)
		}
		if res.IsError && !strings.HasPrefix(text, "Error: ") && !strings.HasSuffix(text, ResultTruncated) {
			t.Fatalf("errored result %q is neither `Error: …` nor truncated", text)
		}

		// The limit of the job the arguments name, when the caller can see it.
		var named struct {
			JobID string `json:"job_id"`
		}
		_ = json.Unmarshal(args, &named)
		limit := 0
		if j, ok := fuzzJobs[named.JobID]; ok && (j.owner == "" || j.owner == session) && name != NameList {
			limit = j.limit
		}
		if limit > 0 && len(text) > limit {
			t.Fatalf("%s for %s: %d bytes exceed the limit %d: %q", name, named.JobID, len(text), limit, text)
		}

		var derr error
		switch name {
		case NameOutput:
			var a struct {
				JobID     *string  `json:"job_id"`
				Wait      *bool    `json:"wait"`
				TimeoutMs *float64 `json:"timeout_ms"`
			}
			derr = tools.DecodeArgs(args, &a)
		case NameKill:
			var a struct {
				JobID  *string `json:"job_id"`
				Reason *string `json:"reason"`
			}
			derr = tools.DecodeArgs(args, &a)
		default:
			var a struct{}
			derr = tools.DecodeArgs(args, &a)
		}
		if derr != nil {
			if !res.IsError {
				t.Fatalf("arguments %q do not decode (%v) but the call succeeded: %q", args, derr, text)
			}
			if limit == 0 && text != "Error: "+derr.Error() {
				t.Fatalf("got %q, want %q", text, "Error: "+derr.Error())
			}
			return
		}
		if trimmed := bytes.TrimSpace(args); len(trimmed) > 0 && !json.Valid(trimmed) {
			t.Fatalf("strict decoding accepted invalid JSON %q", args)
		}
		if !res.IsError {
			if !utf8.ValidString(text) {
				t.Fatalf("successful result is not valid UTF-8: %q", text)
			}
			if name == NameOutput && !strings.HasSuffix(text, "]") {
				t.Fatalf("job_output result does not end with its status line: %q", text)
			}
		}
	})
}

// FuzzTruncate checks SPEC §3.6's and §3.7's bounding functions: the result fits
// the limit, stays valid UTF-8 when its input was, keeps the tail (output, result)
// or the head (notice) of what it cuts, and carries its marker whenever the limit
// leaves room for it.
func FuzzTruncate(f *testing.F) {
	// Small inputs: the fuzzer minimizes every new interesting input, and big
	// ones stall it. 130 x's are enough to pass the 120-unit summary cap.
	f.Add(strings.Repeat("界", 40), "[status: running]", "subagent-1", "subagent", "research", "exit code: 0", uint8(2), uint16(48))
	f.Add("requested cancellation of job bash-1", "[status: stopping]", "bash-1", "bash", "pnpm test", "", uint8(0), uint16(8))
	f.Add(strings.Repeat("x", 40)+"[output truncated]", "[status: completed, exit code: 0]", "pty-send-100", "pty-send", strings.Repeat("y", 60), strings.Repeat("d", 30), uint8(2), uint16(64))
	f.Add("tail", "[status: failed]", "subagent-2", "subagent", strings.Repeat("x", 130), strings.Repeat("d", 60), uint8(4), uint16(80))
	f.Add("😀😀😀", "[status: killed, signal: SIGTERM; cancelled by the user]", "bash-7", "bash", strings.Repeat("😀", 40), "", uint8(3), uint16(32))
	f.Add("", "", "", "", "", "", uint8(0), uint16(0))
	f.Add("a\xffb", "\xc3", "id\x80", "k", "l\xe4", "d", uint8(1), uint16(61))

	f.Fuzz(func(t *testing.T, content, status, id, kind, label, detail string, st uint8, limit16 uint16) {
		limit := int(limit16)
		valid := func(ss ...string) bool {
			for _, s := range ss {
				if !utf8.ValidString(s) {
					return false
				}
			}
			return true
		}

		// §3.6 rule 1.
		full := content + "\n" + status
		out := TruncateOutput(content, status, limit)
		switch {
		case limit == 0 || len(full) <= limit:
			if out != full {
				t.Fatalf("TruncateOutput cut a text that fits: %q", out)
			}
		default:
			checkCut(t, "TruncateOutput", out, limit, valid(content, status), true)
			marked := "\n" + OutputTruncated + "\n" + status
			if limit >= len(marked) {
				if !strings.Contains(out, OutputTruncated) || !strings.HasSuffix(out, "\n"+status) {
					t.Fatalf("TruncateOutput(limit %d) lost the marker or the status: %q", limit, out)
				}
				// What precedes the status: a tail of the content ending in its own
				// marker (reused), or a tail of the content, then `\n` and the marker.
				rest := strings.TrimSuffix(strings.TrimSuffix(out, "\n"+status), OutputTruncated)
				reused := strings.HasSuffix(content, rest+OutputTruncated)
				added := strings.HasSuffix(rest, "\n") && strings.HasSuffix(content, strings.TrimSuffix(rest, "\n"))
				if !reused && !added {
					t.Fatalf("TruncateOutput kept %q, not a tail of the content", rest)
				}
			}
		}

		// §3.6 rule 2.
		out = TruncateResult(content, limit)
		switch {
		case limit == 0 || len(content) <= limit:
			if out != content {
				t.Fatalf("TruncateResult cut a text that fits: %q", out)
			}
		default:
			checkCut(t, "TruncateResult", out, limit, valid(content), true)
			if limit >= len("\n"+ResultTruncated) && !strings.HasSuffix(out, ResultTruncated) {
				t.Fatalf("TruncateResult(limit %d) lost the marker: %q", limit, out)
			}
			if limit >= len("\n"+ResultTruncated) && !strings.HasSuffix(content, ResultTruncated) {
				kept := strings.TrimSuffix(out, "\n"+ResultTruncated)
				if !strings.HasSuffix(content, kept) {
					t.Fatalf("TruncateResult kept %q, not a tail of the text", kept)
				}
			}
		}

		// §3.7 notice bounding.
		s := &messages.JobSnapshot{Id: id, Kind: kind, Label: label, Status: messages.JobStatus(1 + st%5)}
		if detail != "" {
			s.Detail = &detail
		}
		notice := NoticeText(s)
		out = BoundNotice(s, limit)
		prefix := "background job " + id
		fixed := prefix + "\n" + NoticeTruncated + NoticeAction
		switch {
		case limit == 0 || len(notice) <= limit:
			if out != notice {
				t.Fatalf("BoundNotice cut a notice that fits: %q", out)
			}
		default:
			tight := len(fixed) <= limit || len(prefix)+len(NoticeAction) > limit // prefix+action may fall short
			checkCut(t, "BoundNotice", out, limit, valid(id, kind, label, detail), tight)
			switch {
			case len(fixed) <= limit:
				if !strings.HasPrefix(out, prefix) || !strings.HasSuffix(out, "\n"+NoticeTruncated+NoticeAction) {
					t.Fatalf("BoundNotice(limit %d) = %q: want prefix, detail head, marker, action", limit, out)
				}
				head := strings.TrimSuffix(strings.TrimPrefix(out, prefix), "\n"+NoticeTruncated+NoticeAction)
				if !strings.HasPrefix(strings.TrimPrefix(notice, prefix), head) {
					t.Fatalf("BoundNotice kept %q, not the head of the detail", head)
				}
			case len(prefix)+len(NoticeAction) <= limit:
				if out != prefix+NoticeAction {
					t.Fatalf("BoundNotice(limit %d) = %q, want %q", limit, out, prefix+NoticeAction)
				}
			case len(NoticeAction) >= limit:
				if !strings.HasSuffix(NoticeAction, out) {
					t.Fatalf("BoundNotice(limit %d) = %q, not a tail of the action", limit, out)
				}
			default:
				if !strings.HasSuffix(out, NoticeAction) || !strings.HasPrefix(prefix, strings.TrimSuffix(out, NoticeAction)) {
					t.Fatalf("BoundNotice(limit %d) = %q, want a head of the prefix and the action", limit, out)
				}
			}
		}

		// What the registry lets through: with the kind valid and the label and
		// detail cleaned as Start and settlement clean them, every rendering is valid
		// UTF-8, a job_list row is one bounded line, and the notice is bounded.
		if job.ValidKind(kind) && label != "" {
			clean := &messages.JobSnapshot{Id: kind + "-1", Kind: kind, Label: job.CleanLabel(label), Status: s.Status}
			if detail != "" {
				d := job.CleanDetail(detail)
				clean.Detail = &d
			}
			row := ListText([]*messages.JobSnapshot{clean})
			if !utf8.ValidString(row) || strings.ContainsAny(row, "\n\r\v\f\u0085\u2028\u2029") {
				t.Fatalf("job_list row of a clean snapshot is not one valid line: %q", row)
			}
			if max := 2*job.MaxKindBytes + job.MaxLabelBytes + 64; len(row) > max {
				t.Fatalf("job_list row is %d bytes (bound %d)", len(row), max)
			}
			for _, r := range []string{NoticeText(clean), BoundNotice(clean, limit), Summary(clean), StatusLine(clean),
				TruncateOutput(job.ValidText(content), StatusLine(clean), limit)} {
				if !utf8.ValidString(r) {
					t.Fatalf("rendering of a clean snapshot is not valid UTF-8: %q", r)
				}
				if max := 2*job.MaxKindBytes + job.MaxLabelBytes + job.MaxDetailBytes + len(content)*3 + 128; len(r) > max {
					t.Fatalf("rendering is %d bytes (bound %d)", len(r), max)
				}
			}
		}

		// §3.7 summary: at most 120 UTF-16 units.
		sum := Summary(s)
		whole := kind + " " + label + " " + StatusLine(s)
		n := len(utf16.Encode([]rune(sum)))
		if n > 120 {
			t.Fatalf("Summary is %d UTF-16 units: %q", n, sum)
		}
		if len(utf16.Encode([]rune(whole))) <= 120 {
			if sum != whole {
				t.Fatalf("Summary cut a summary that fits: %q", sum)
			}
		} else {
			if !strings.HasSuffix(sum, "…") || n < 119 {
				t.Fatalf("Summary of a long text is %q (%d units)", sum, n)
			}
			if valid(whole) && !strings.HasPrefix(whole, strings.TrimSuffix(sum, "…")) {
				t.Fatalf("Summary %q is not a head of %q", sum, whole)
			}
			if !utf8.ValidString(sum) {
				t.Fatalf("Summary is not valid UTF-8: %q", sum)
			}
		}
	})
}

// checkCut checks a cut text: within the limit, valid UTF-8 when the input was,
// and, when tight, less than a rune's worth of bytes short of the limit.
func checkCut(t *testing.T, what, out string, limit int, validIn, tight bool) {
	t.Helper()
	if len(out) > limit {
		t.Fatalf("%s: %d bytes exceed the limit %d: %q", what, len(out), limit, out)
	}
	if validIn {
		if !utf8.ValidString(out) {
			t.Fatalf("%s: invalid UTF-8 out of valid input: %q", what, out)
		}
		if tight && len(out) < limit-(utf8.UTFMax-1) {
			t.Fatalf("%s: %d bytes, needlessly short of the limit %d: %q", what, len(out), limit, out)
		}
	}
}

// noticeSink records the texts of the notices an agent receives. It is written on
// the owner actor and read after a Stats round trip to that actor.
type noticeSink struct {
	mu    sync.Mutex
	texts []string
}

func (n *noticeSink) add(m owner.Message) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.texts = append(n.texts, m.Text, m.Source.Summary)
	return nil
}
func (n *noticeSink) Inject(m owner.Message) error   { return n.add(m) }
func (n *noticeSink) Steer(m owner.Message) error    { return n.add(m) }
func (n *noticeSink) Followup(m owner.Message) error { return n.add(m) }

// FuzzHostileJob feeds arbitrary kind, label, kill reason, detail and output bytes
// through the registry and the tools: a job of that kind and label, owned by a
// fresh incarnation, streams the output, is killed with the reason (the model's
// job_kill or the API's non-claiming kill) and settles with the detail. A bad kind
// or an empty label is a job/invalid-spec refusal with a valid, bounded message;
// otherwise the snapshot, job_output, job_list, job_kill and the notice are valid
// UTF-8 and bounded, the label is one line, and job_list has one row per job.
func FuzzHostileJob(f *testing.F) {
	sys, _ := troupetest.NewSystem(f)
	if _, err := sys.Jobs().MountAgents(context.Background(), sys.Scope()); err != nil {
		f.Fatal(err)
	}
	m, err := MountIn(f.Context(), sys.Jobs(), sys.Scope(), DefaultConfig())
	if err != nil {
		f.Fatal(err)
	}
	byName := map[string]tools.Tool{}
	for _, tl := range m.All() {
		byName[tl.Name] = tl
	}
	f.Add("bash", "pnpm test", "superseded", "signal: SIGTERM", "line one\n", uint8(0))
	f.Add("../../etc x\n", "l", "r", "d", "o", uint8(1))
	f.Add("pty-send", "a\nb\r\nc\x1b[0m\xff", "why \xfe", "exit \xc3", "out \xff\xe7\x95", uint8(1))
	f.Add("subagent", strings.Repeat("x", 2*job.MaxLabelBytes), strings.Repeat("r", 2*job.MaxReasonBytes),
		strings.Repeat("d", 2*job.MaxDetailBytes), strings.Repeat("界", 100), uint8(2))
	f.Add("Bash", "", "", "", "", uint8(3))

	var calls atomic.Uint64
	f.Fuzz(func(t *testing.T, kind, label, reason, detail, out string, sel uint8) {
		sink := &noticeSink{}
		a, err := sys.NewAgent(nil, "fz", owner.Options{Surface: sink})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := a.Dispose(context.Background()); err != nil {
				t.Fatal(err)
			}
		}()
		if err := sys.Jobs().RegisterAgent(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		done := make(chan job.Outcome, 1)
		var cancelled atomic.Value
		once := sync.Once{}
		spec := job.Spec{Kind: kind, Label: label, Owner: a, Run: func() (job.Hooks, error) {
			read := false
			return job.Hooks{Done: done, Cancel: func(r string) error {
				cancelled.Store(r)
				once.Do(func() { done <- job.Outcome{Status: job.Killed, Detail: detail} })
				return nil
			}, ReadOutput: func() (string, error) {
				if read {
					return "", nil
				}
				read = true
				return out, nil
			}}, nil
		}}
		id, err := sys.Jobs().Start(context.Background(), spec)
		if !job.ValidKind(kind) || label == "" {
			if !errors.Is(err, messages.ErrInvalidSpec) {
				t.Fatalf("kind %q label %q: want job/invalid-spec, got %v", kind, label, err)
			}
			if msg := err.Error(); !utf8.ValidString(msg) || len(msg) > 256 || strings.Contains(msg, "\n") {
				t.Fatalf("the refusal is not one valid bounded line: %q", msg)
			}
			return
		}
		if err != nil {
			t.Fatalf("kind %q label %q: %v", kind, label, err)
		}
		call := func(name string, args any) string {
			b, _ := json.Marshal(args)
			res := m.Pipeline().Run(context.Background(), byName[name],
				tools.Call{ID: fmt.Sprintf("hostile-%d", calls.Add(1)), Name: name, Args: b, Caller: tools.AsAgent(a)})
			text, ok := res.SingleText()
			if !ok {
				t.Fatalf("%s: not one text block", name)
			}
			return text
		}
		check := func(what, s string, bound int) {
			t.Helper()
			if !utf8.ValidString(s) {
				t.Fatalf("%s is not valid UTF-8: %q", what, s)
			}
			if len(s) > bound {
				t.Fatalf("%s is %d bytes (bound %d)", what, len(s), bound)
			}
		}
		maxDetail := job.MaxDetailBytes + 2 + job.MaxReasonBytes
		maxOut := 3*len(out) + maxDetail + 64
		check("live job_output", call(NameOutput, map[string]string{"job_id": id}), maxOut)
		if sel%2 == 0 {
			check("job_kill", call(NameKill, map[string]string{"job_id": id, "reason": reason}), maxDetail+128)
		} else if _, _, err := sys.Jobs().Kill(context.Background(), id, registry.AsAgent(a), registry.KillOptions{Reason: reason, NoClaim: true}); err != nil {
			t.Fatal(err)
		}
		snap := troupetest.Settled(t, sys, id, registry.AsAgent(a))
		if _, err := a.Stats(context.Background()); err != nil { // after the notice, if any
			t.Fatal(err)
		}
		if r, _ := cancelled.Load().(string); !utf8.ValidString(r) || len(r) > job.MaxReasonBytes {
			t.Fatalf("the producer's Cancel got %d bytes: %q", len(r), r)
		}
		check("label", snap.Label, job.MaxLabelBytes)
		if strings.ContainsAny(snap.Label, "\n\r\v\f\u0085\u2028\u2029") {
			t.Fatalf("label is not one line: %q", snap.Label)
		}
		check("detail", snap.GetDetail(), maxDetail)
		check("settled job_output", call(NameOutput, map[string]string{"job_id": id}), maxOut)
		check("settled job_kill", call(NameKill, map[string]string{"job_id": id}), maxDetail+128)
		list := call(NameList, map[string]string{})
		check("job_list", list, 2*job.MaxKindBytes+job.MaxLabelBytes+64)
		if n := strings.Count(list, "\n") + 1; n != 1 {
			t.Fatalf("job_list has %d lines for one job: %q", n, list)
		}
		sink.mu.Lock()
		texts := sink.texts
		sink.mu.Unlock()
		for _, n := range texts {
			check("notice", n, 2*job.MaxKindBytes+job.MaxLabelBytes+maxDetail+128)
		}
	})
}
