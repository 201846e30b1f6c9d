package spec

import (
	"context"
	"encoding/json"
	"github.com/troupe-rt/troupe/tools"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/controller"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/producers/process"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/troupetest"
)

// Hostile input (issue 12 scope 4): a 10 MiB label, a 1 MiB reason, invalid UTF-8
// in labels, reasons, details and output, kinds with '/', spaces and newlines, an
// empty session id. Each is a coded error or bounded, valid output on every surface
// that shows it — the API's snapshots, job_output, job_list, job_kill, the
// completion notice, job.list and job.follow frames (which must also marshal as
// protobuf, whose strings must be valid UTF-8) — and nothing panics.

// Bounds the surfaces must keep, whatever the input.
const (
	maxDetail = job.MaxDetailBytes + len("; ") + job.MaxReasonBytes
	// maxRow bounds one job_list row: id, kind, status and dash around the label.
	maxRow = job.MaxLabelBytes + 2*job.MaxKindBytes + 64
	// maxNotice bounds a completion notice: its fixed words, id, kind, label, status
	// line (status and detail).
	maxNotice = maxRow + maxDetail + 128
	// maxError bounds an errored tool result or an error's message.
	maxError = job.MaxDetailBytes + 256
)

// requireClean requires s to be valid UTF-8 of at most bound bytes.
func requireClean(t *testing.T, what, s string, bound int) {
	t.Helper()
	require.Truef(t, utf8.ValidString(s), "%s is not valid UTF-8: %q", what, head64(s))
	require.LessOrEqualf(t, len(s), bound, "%s is %d bytes (bound %d): %q", what, len(s), bound, head64(s))
}

// requireOneLine requires s to be one line (no line break of any kind).
func requireOneLine(t *testing.T, what, s string) {
	t.Helper()
	require.Falsef(t, strings.ContainsAny(s, "\n\r\v\f\u0085\u2028\u2029"), "%s is not one line: %q", what, head64(s))
}

func head64(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// requireCleanSnapshot checks every text field of a snapshot, and that it marshals.
func requireCleanSnapshot(t *testing.T, what string, s *messages.JobSnapshot) {
	t.Helper()
	require.Truef(t, job.ValidKind(s.Kind), "%s: kind %q", what, s.Kind)
	requireClean(t, what+" label", s.Label, job.MaxLabelBytes)
	requireOneLine(t, what+" label", s.Label)
	requireClean(t, what+" detail", s.GetDetail(), maxDetail)
	_, err := proto.Marshal(s)
	require.NoErrorf(t, err, "%s does not marshal", what)
}

func TestHostileInput_BadKindsAreRefused(t *testing.T) {
	noLeaks(t)
	sys, _ := troupetest.Served(t)
	alice := troupetest.Agent(t, sys, "alice")
	changed := onChanged(t, sys, sys.Scope())
	bad := []string{
		"../../etc x\n", "a/b", "/bash", "bash x", " bash", "bash\n", "bash\t", "Bash", "BASH",
		"1bash", "-bash", "bash_x", "bash.x", "bash\x00", "bash\xff", "界", "bash\u2028",
		strings.Repeat("a", job.MaxKindBytes+1), strings.Repeat("k", 10<<20),
	}
	for _, kind := range bad {
		for _, a := range []*owner.Agent{nil, alice} {
			p := live()
			spec := p.Spec(a)
			spec.Kind = kind
			_, err := sys.Jobs().Start(context.Background(), spec)
			require.ErrorIsf(t, err, messages.ErrInvalidSpec, "kind %q", head64(kind))
			msg := err.Error()
			require.Truef(t, strings.HasPrefix(msg, "invalid job kind: expected a short identifier matching "+job.KindPattern+", got \""),
				"kind %q: %q", head64(kind), msg)
			requireClean(t, "the refusal", msg, 256)
			requireOneLine(t, "the refusal", msg)
			require.Zero(t, p.Runs(), "a refused kind ran its producer")
		}
	}
	require.Equal(t, `invalid job kind: expected a short identifier matching ^[a-z][a-z0-9-]{0,31}$, got "../../etc x\n"`,
		func() string {
			spec := live().Spec(nil)
			spec.Kind = "../../etc x\n"
			_, err := sys.Jobs().Start(context.Background(), spec)
			return err.Error()
		}())
	require.Empty(t, changed.Owners(), "a refused start fired onJobsChanged")
	require.Zero(t, countLabel(alice.Scope(), registry.OwnerCleanupLabel))
	requireNothingRegistered(t, sys, "bash-1", "alice")

	// SPEC's kinds, and the edges of the grammar, pass.
	for _, kind := range []string{"bash", "pty-send", "subagent", "workflow", "a", "a-", "x9", strings.Repeat("z", job.MaxKindBytes)} {
		spec := live().Spec(nil)
		spec.Kind = kind
		id := start(t, sys, spec)
		require.True(t, strings.HasPrefix(id, kind+"-"), "kind %q: id %q", kind, id)
	}
}

func TestHostileInput_EmptySessionIDIsRefused(t *testing.T) {
	noLeaks(t)
	sys, _ := troupetest.Served(t)
	before := sys.Scope().Effects()
	_, err := sys.NewAgent(nil, "")
	requireCode(t, err, messages.ErrInvalidSession, `invalid session id: expected a non-empty string ("" means no agent)`)
	_, err = owner.Spawn(sys.Actors().Root, sys.Scope(), "", nil, owner.Options{})
	require.ErrorIs(t, err, messages.ErrInvalidSession)
	// An agent value without a session (the zero Agent) cannot be registered either.
	require.ErrorIs(t, sys.Jobs().RegisterAgent(context.Background(), &owner.Agent{}), messages.ErrInvalidSession)
	require.Nil(t, sys.Jobs().RegisteredAgent(context.Background(), ""), `"" stays the no-caller identity`)
	// Nothing was left behind: no effect in the scope, no registered agent.
	require.Equal(t, before, sys.Scope().Effects())
	// The no-caller identity still works for access calls.
	id := start(t, sys, live().Spec(nil))
	require.Equal(t, []string{id}, list(t, sys, ""))
}

// hostileRow is one scenario: it starts job(s) owned by S, feeds them hostile
// text, settles them, and says what its job looks like to each surface.
type hostileRow struct {
	name string
	// spec edits the producer and spec before the start.
	spec func(p *troupetest.Producer, s *job.Spec)
	// act runs after the start (kills, emits, settles); id is the job's id.
	act func(t *testing.T, e *hostileEnv, p *troupetest.Producer, id string)
	// noticed: the job's settlement is due a notice (no claim was made).
	noticed bool
	// check runs extra row-specific assertions on the settled job.
	check func(t *testing.T, e *hostileEnv, p *troupetest.Producer, snap *messages.JobSnapshot)
}

type hostileEnv struct {
	sys *troupe.System
	ctl *controller.Controller
	s   *owner.Agent
	in  *inbox
	seq uint64
	m   *jobtools.Mount
}

func (e *hostileEnv) tool(name string, args any) (string, bool) {
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	e.seq++
	res := callTool(context.Background(), e.m, e.seq, tools.AsAgent(e.s), name, string(b))
	text, ok := res.SingleText()
	if !ok {
		panic("result is not one text block")
	}
	return text, res.IsError
}

func TestHostileInput_EverySurfaceIsBoundedAndValid(t *testing.T) {
	noLeaks(t)
	sys, _ := troupetest.NewSystem(t)
	m, err := jobtools.MountIn(t.Context(), sys.Jobs(), sys.Scope(), jobtools.DefaultConfig())
	require.NoError(t, err)
	_, err = sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(t, err)
	ctl, err := sys.StartController(controller.Config{})
	require.NoError(t, err)
	in := &inbox{msgs: make(chan owner.Message, 64)}
	s, err := sys.NewAgent(nil, "S", owner.Options{Surface: in})
	require.NoError(t, err)
	require.NoError(t, sys.Jobs().RegisterAgent(context.Background(), s))
	e := &hostileEnv{sys: sys, ctl: ctl, s: s, in: in, m: m}

	tenMiB := strings.Repeat("x", 10<<20)
	oneMiB := strings.Repeat("r", 1<<20)
	settle := func(o job.Outcome) func(*testing.T, *hostileEnv, *troupetest.Producer, string) {
		return func(_ *testing.T, _ *hostileEnv, p *troupetest.Producer, _ string) { p.Settle(o) }
	}
	rows := []hostileRow{
		{name: "10 MiB label", spec: func(_ *troupetest.Producer, s *job.Spec) { s.Label = tenMiB },
			act: settle(job.Outcome{Status: job.Completed, Detail: "exit code: 0"}), noticed: true,
			check: func(t *testing.T, _ *hostileEnv, _ *troupetest.Producer, snap *messages.JobSnapshot) {
				require.Len(t, snap.Label, job.MaxLabelBytes, "a cut label fills its cap")
				require.Equal(t, tenMiB[:job.MaxLabelBytes-len(job.CutMarker)]+job.CutMarker, snap.Label)
			}},
		{name: "invalid UTF-8, line breaks and controls in the label",
			spec: func(_ *troupetest.Producer, s *job.Spec) {
				s.Label = "pnpm \xff\xfe test\nrm -rf /\r\nnext\u2028\x1b[31mred\tok"
			},
			act: settle(job.Outcome{Status: job.Completed}), noticed: true,
			check: func(t *testing.T, _ *hostileEnv, _ *troupetest.Producer, snap *messages.JobSnapshot) {
				require.Equal(t, "pnpm \uFFFD test↵rm -rf /↵next↵\uFFFD[31mred\tok", snap.Label)
			}},
		{name: "1 MiB kill reason (API, human-style no-claim kill)",
			act: func(t *testing.T, e *hostileEnv, p *troupetest.Producer, id string) {
				res, snap, err := e.sys.Jobs().Kill(context.Background(), id, registry.AsAgent(s), registry.KillOptions{Reason: oneMiB, NoClaim: true})
				require.NoError(t, err)
				require.Equal(t, messages.KillResult_KILL_RESULT_REQUESTED, res)
				requireCleanSnapshot(t, "the kill's snapshot", snap)
				p.Settle(job.Outcome{Status: job.Killed, Detail: "signal: SIGTERM"})
			}, noticed: true,
			check: func(t *testing.T, _ *hostileEnv, p *troupetest.Producer, snap *messages.JobSnapshot) {
				cut := oneMiB[:job.MaxReasonBytes-len(job.CutMarker)] + job.CutMarker
				require.Equal(t, []string{cut}, p.Cancels(), "the producer gets the cut reason")
				require.Equal(t, "signal: SIGTERM; "+cut, snap.GetDetail())
			}},
		{name: "invalid UTF-8 kill reason (API)",
			act: func(t *testing.T, e *hostileEnv, p *troupetest.Producer, id string) {
				_, _, err := e.sys.Jobs().Kill(context.Background(), id, registry.AsAgent(s), registry.KillOptions{Reason: "stop \xff\xc3 now", NoClaim: true})
				require.NoError(t, err)
				p.Settle(job.Outcome{Status: job.Killed})
			}, noticed: true,
			check: func(t *testing.T, _ *hostileEnv, p *troupetest.Producer, snap *messages.JobSnapshot) {
				require.Equal(t, []string{"stop \uFFFD now"}, p.Cancels())
				require.Equal(t, "stop \uFFFD now", snap.GetDetail())
			}},
		{name: "60 KiB reason through job_kill (the model's kill claims)",
			act: func(t *testing.T, e *hostileEnv, p *troupetest.Producer, id string) {
				text, isErr := e.tool(jobtools.NameKill, map[string]string{"job_id": id, "reason": strings.Repeat("m", 60<<10)})
				require.False(t, isErr, text)
				require.Equal(t, "requested cancellation of job "+id, text)
				p.Settle(job.Outcome{Status: job.Killed})
			},
			check: func(t *testing.T, _ *hostileEnv, p *troupetest.Producer, snap *messages.JobSnapshot) {
				require.Len(t, p.Cancels(), 1)
				require.Len(t, p.Cancels()[0], job.MaxReasonBytes)
				require.Equal(t, p.Cancels()[0], snap.GetDetail())
			}},
		{name: "1 MiB reason through job_kill: the arguments are refused",
			act: func(t *testing.T, e *hostileEnv, p *troupetest.Producer, id string) {
				text, isErr := e.tool(jobtools.NameKill, map[string]string{"job_id": id, "reason": oneMiB})
				require.True(t, isErr)
				requireClean(t, "job_kill's refusal", text, maxError)
				require.Contains(t, text, "exceeds the limit")
				require.Empty(t, p.Cancels(), "a refused call killed")
				p.Settle(job.Outcome{Status: job.Completed})
			}, noticed: true},
		{name: "invalid UTF-8 stream output and detail",
			spec: func(p *troupetest.Producer, _ *job.Spec) { p.Stream = true },
			act: func(t *testing.T, e *hostileEnv, p *troupetest.Producer, id string) {
				p.Emit("out \xff\xfe put\n", "\xe7\x95") // the second ends inside a rune
				text, isErr := e.tool(jobtools.NameOutput, map[string]string{"job_id": id})
				require.False(t, isErr, text)
				require.Equal(t, "out \uFFFD put\n[status: running]", text)
				p.Settle(job.Outcome{Status: job.Failed, Detail: "exit \xc3 code\nsecond line"})
			}, noticed: true,
			check: func(t *testing.T, e *hostileEnv, _ *troupetest.Producer, snap *messages.JobSnapshot) {
				require.Equal(t, "exit \uFFFD code\nsecond line", snap.GetDetail())
			}},
		{name: "invalid UTF-8 final output and a 10 MiB detail",
			act: settle(job.Outcome{Status: job.Completed, Detail: "\xff" + tenMiB, Output: "\xfe answer"}), noticed: true,
			check: func(t *testing.T, e *hostileEnv, _ *troupetest.Producer, snap *messages.JobSnapshot) {
				require.Len(t, snap.GetDetail(), job.MaxDetailBytes)
				require.True(t, strings.HasPrefix(snap.GetDetail(), "\uFFFDxxx"))
				require.True(t, strings.HasSuffix(snap.GetDetail(), job.CutMarker))
				text, isErr := e.tool(jobtools.NameOutput, map[string]string{"job_id": snap.Id})
				require.False(t, isErr, text)
				require.True(t, strings.HasPrefix(text, "\uFFFD answer\n[status: completed, \uFFFDxxx"), head64(text))
			}},
		{name: "invalid UTF-8 and a split rune in the output record (job.follow)",
			spec: func(p *troupetest.Producer, s *job.Spec) { p.Record = job.NewRecord(); s.Record = p.Record },
			act: func(t *testing.T, e *hostileEnv, p *troupetest.Producer, id string) {
				p.Record.Append("a\xffb \xe7\x95", job.AppendOptions{Channel: "stdout"})
				p.Record.Append("\x8c!", job.AppendOptions{Channel: "stdout"})
				p.Record.Append("\xe7", job.AppendOptions{Channel: "stderr"}) // never completed
				p.Settle(job.Outcome{Status: job.Completed})
			}, noticed: true,
			check: func(t *testing.T, e *hostileEnv, _ *troupetest.Producer, snap *messages.JobSnapshot) {
				st := e.ctl.Follow("S", snap.Id, nil)
				defer st.Close()
				var out strings.Builder
				for f := range st.Frames {
					_, err := proto.Marshal(f)
					require.NoError(t, err, "a follow frame does not marshal")
					for _, c := range f.GetOutput().GetChunks() {
						requireClean(t, "a follow chunk", c.Text, job.DefaultRetainBytes)
						out.WriteString(c.Channel + ":" + c.Text + "|")
					}
					if s := f.GetStatus(); s != nil {
						requireClean(t, "the follow status label", s.Label, job.MaxLabelBytes)
					}
				}
				require.Equal(t, "stdout:a\uFFFDb |stdout:界!|stderr:\uFFFD|", out.String())
			}},
	}

	ids := make([]string, len(rows))
	for i, r := range rows {
		p := live()
		p.OnCancel = nil // the rows settle their jobs themselves
		spec := p.Spec(s)
		if r.spec != nil {
			r.spec(p, &spec)
		}
		id, err := sys.Jobs().Start(context.Background(), spec)
		require.NoError(t, err, r.name)
		ids[i] = id
		r.act(t, e, p, id)
		snap := troupetest.Settled(t, sys, id, registry.AsAgent(s))
		requireCleanSnapshot(t, r.name, snap)
		if r.noticed {
			n := recv(t, in.msgs)
			requireClean(t, r.name+": notice", n.Text, maxNotice)
			require.True(t, strings.HasPrefix(n.Text, "background job "+id+" ("), n.Text)
			requireClean(t, r.name+": notice summary", n.Source.Summary, 3*owner.SummaryUnits)
		}
		if r.check != nil {
			r.check(t, e, p, snap)
		}
		// job_output and job_kill on the settled job: valid and bounded.
		text, isErr := e.tool(jobtools.NameOutput, map[string]string{"job_id": id})
		require.False(t, isErr, text)
		requireClean(t, r.name+": job_output", text, 64<<10+maxDetail)
		require.True(t, strings.HasSuffix(text, "]"), head64(text))
		text, isErr = e.tool(jobtools.NameKill, map[string]string{"job_id": id})
		require.False(t, isErr, text)
		requireClean(t, r.name+": job_kill", text, maxDetail+128)
	}
	select {
	case n := <-in.msgs:
		t.Fatalf("an unexpected notice: %q", head64(n.Text))
	default:
	}

	// A real shell job: invalid bytes on its stdout, a command of several lines.
	sh := process.Shell("printf 'raw \\377\\376 bytes\\n'\nprintf 'split \\347\\225'\nprintf '\\214 joined\\n'", process.Config{})
	sh.Owner = s
	shID, err := sys.Jobs().Start(context.Background(), sh)
	require.NoError(t, err)
	ids = append(ids, shID)
	snap := troupetest.Settled(t, sys, shID, registry.AsAgent(s))
	requireCleanSnapshot(t, "the shell job", snap)
	require.Equal(t, "printf 'raw \\377\\376 bytes\\n'↵printf 'split \\347\\225'↵printf '\\214 joined\\n'", snap.Label)
	requireClean(t, "the shell job's notice", recv(t, in.msgs).Text, maxNotice)
	text, isErr := e.tool(jobtools.NameOutput, map[string]string{"job_id": shID})
	require.False(t, isErr, text)
	require.Equal(t, "raw \uFFFD bytes\nsplit 界 joined\n[status: completed, exit code: 0]", text)

	// job_list: one valid row per job, each bounded.
	text, isErr = e.tool(jobtools.NameList, map[string]string{})
	require.False(t, isErr, text)
	requireClean(t, "job_list", text, len(ids)*maxRow)
	lines := strings.Split(text, "\n")
	require.Len(t, lines, len(ids), "job_list is not one row per job")
	for i, line := range lines {
		require.True(t, strings.HasPrefix(line, ids[i]+" ["), line)
		requireClean(t, "a job_list row", line, maxRow)
	}

	// job.list's roster frame: every job, clean, and it marshals.
	roster := e.ctl.List("S")
	frame := recv(t, roster.Frames)
	roster.Close()
	_, err = proto.Marshal(frame)
	require.NoError(t, err, "the roster frame does not marshal")
	require.Len(t, frame.Jobs, len(ids))
	for _, j := range frame.Jobs {
		requireClean(t, "a roster label", j.Label, job.MaxLabelBytes)
		requireOneLine(t, "a roster label", j.Label)
		requireClean(t, "a roster detail", j.GetDetail(), maxDetail)
	}

	// A hostile job_id is echoed bounded and valid.
	for _, bogus := range []string{strings.Repeat("bash-", 10000), "bash-1\n\x00"} {
		text, isErr = e.tool(jobtools.NameOutput, map[string]string{"job_id": bogus})
		require.True(t, isErr)
		requireClean(t, "the unknown-job error", text, len("Error: unknown job ")+job.MaxIDBytes)
		_, err := sys.Jobs().Get(context.Background(), bogus+"\xff", registry.AsAgent(s))
		require.ErrorIs(t, err, messages.ErrNotFound)
		requireClean(t, "the unknown-job error", err.Error(), len("unknown job ")+job.MaxIDBytes)
		_, err = e.ctl.Kill(ctx(t), "S", bogus+"\xff")
		require.ErrorIs(t, err, messages.ErrNotFound)
		requireClean(t, "job.kill's error", err.Error(), len("unknown job ")+job.MaxIDBytes)
	}
	require.Equal(t, "Error: unknown job bash-99", func() string { t, _ := e.tool(jobtools.NameOutput, map[string]string{"job_id": "bash-99"}); return t }())
}

// A producer whose errors are huge or invalid UTF-8 reaches the caller bounded.
func TestHostileInput_ProducerErrorsAreBounded(t *testing.T) {
	noLeaks(t)
	e := serveTools(t, jobtools.DefaultConfig())
	huge := "boom \xff " + strings.Repeat("e", 1<<20)
	_, err := e.sys.Jobs().Start(context.Background(), job.Spec{Kind: "bash", Label: "doomed", Run: func() (job.Hooks, error) {
		return job.Hooks{}, errString(huge)
	}})
	require.ErrorIs(t, err, messages.ErrRunFailed)
	requireClean(t, "the run failure", err.Error(), job.MaxDetailBytes)
	require.ErrorIs(t, err, errString(huge), "the producer's own error stays the cause")

	p := live()
	p.CancelErr = errString(huge)
	id := start(t, e.sys, p.Spec(nil))
	text := errText(t, e.call(ctx(t), "", jobtools.NameKill, `{"job_id":"`+id+`"}`))
	requireClean(t, "job_kill's cancel failure", text, len("Error: ")+job.MaxDetailBytes)
	require.True(t, strings.HasPrefix(text, "Error: boom \uFFFD eee"), head64(text))
	p.CancelErr = nil
	p.Settle(job.Outcome{Status: job.Completed})
	troupetest.Settled(t, e.sys, id, registry.NoCaller)
}

type errString string

func (e errString) Error() string { return string(e) }
