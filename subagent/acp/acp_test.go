package acp_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/subagent/acp"
	"github.com/troupe-rt/troupe/test/acptest"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/tools/subagenttool"
	"github.com/troupe-rt/troupe/troupetest"
)

func TestMain(m *testing.M) {
	acptest.MaybeRun()
	goleak.VerifyTestMain(m)
}

const budget = 20 * time.Second

// world is one test's runtime with the provider registered.
type world struct {
	rt   *subagent.Runtime
	sc   *scope.Scope
	p    *acp.Provider
	rec  *acptest.Recorder
	log  string
	dir  string
	logs *troupetest.Logs
}

func self(t testing.TB) string {
	exe, err := os.Executable()
	require.NoError(t, err)
	return exe
}

// fakeConfig runs the test binary as the scripted agent.
func fakeConfig(t testing.TB, s acptest.Script, dir string) acp.Config {
	kv := strings.SplitN(acptest.Env(t, s), "=", 2)
	// GORACE: a -race child otherwise sleeps 1 s at exit.
	return acp.Config{Command: self(t), Cwd: dir, Env: map[string]string{kv[0]: kv[1], "GORACE": "atexit_sleep_ms=0"}}
}

func newWorld(t *testing.T, s acptest.Script, mutate ...func(*acp.Config)) *world {
	t.Helper()
	dir := t.TempDir()
	if s.Log == "" {
		s.Log = filepath.Join(t.TempDir(), "fake.log")
	}
	cfg := fakeConfig(t, s, dir)
	for _, m := range mutate {
		m(&cfg)
	}
	return register(t, cfg, s.Log, dir)
}

func register(t *testing.T, cfg acp.Config, log, dir string) *world {
	t.Helper()
	sys, logs := troupetest.NewSystem(t)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), slog.New(logs))
	require.NoError(t, err)
	rec := acptest.NewRecorder(budget)
	if also := cfg.Observe; also != nil {
		cfg.Observe = func(ev acp.Event) { rec.Observe(ev); also(ev) }
	} else {
		cfg.Observe = rec.Observe
	}
	cfg.Logger = slog.New(logs)
	p, err := acp.Register(rt, sys.Scope(), cfg)
	require.NoError(t, err)
	return &world{rt: rt, sc: sys.Scope(), p: p, rec: rec, log: log, dir: dir, logs: logs}
}

func ctxFor(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), budget)
	t.Cleanup(cancel)
	return c
}

func (w *world) start(t *testing.T, req subagent.Request) *subagent.Run {
	t.Helper()
	run, err := w.rt.Start(ctxFor(t), "acp", req, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = run.Dispose(context.Background()) })
	return run
}

func result(t *testing.T, run *subagent.Run) subagent.Result {
	t.Helper()
	res, err := run.Result(ctxFor(t))
	require.NoError(t, err)
	return res
}

// settle runs a prompt to its end, disposes it and checks the tree is gone.
func (w *world) settle(t *testing.T, req subagent.Request) subagent.Result {
	t.Helper()
	run := w.start(t, req)
	res := result(t, run)
	require.NoError(t, run.Dispose(ctxFor(t)))
	w.requireGone(t)
	return res
}

// requireGone: every process the provider spawned is gone and reaped.
func (w *world) requireGone(t *testing.T) {
	t.Helper()
	n := 0
	for _, e := range w.rec.All() {
		if e.Kind == acp.EventSpawned {
			acptest.RequireGone(t, e.Marker, e.PID)
			n++
		}
	}
	require.NotZero(t, n, "nothing was spawned")
	require.Zero(t, w.p.Live())
}

func requireCode(t *testing.T, err error, code messages.Code, msg string) {
	t.Helper()
	var coded *messages.Error
	require.ErrorAs(t, err, &coded)
	require.Equal(t, code, coded.Code)
	if msg != "" {
		require.Equal(t, msg, err.Error())
	}
}

func records(t *testing.T, w *world, method string) []acptest.Record {
	var out []acptest.Record
	for _, r := range acptest.ReadLog(t, w.log) {
		if r.Method == method {
			out = append(out, r)
		}
	}
	return out
}

func TestInteropA01_CapabilitiesRefusedBeforeSpawn(t *testing.T) {
	sentinel := filepath.Join(t.TempDir(), "sentinel")
	w := register(t, acp.Config{Command: "touch", Args: []string{sentinel}, Cwd: t.TempDir()}, "", "")
	require.Equal(t, "acp", w.p.Name())
	require.Equal(t, subagent.Capabilities{}, w.p.Capabilities())
	require.False(t, w.p.InheritsParentContext())
	_, isCont := w.rt.Provider(t.Context(), "acp").(subagent.Continuable)
	require.False(t, isCont, "without Config.Continuable the provider is not continuable")
	_, err := w.rt.Start(ctxFor(t), "acp", subagent.Request{Prompt: "p", Persona: "x"}, nil)
	requireCode(t, err, subagent.CodeUnsupportedCapability, `subagent provider "acp" does not support the "persona" capability`)
	require.NoFileExists(t, sentinel)
	require.Empty(t, w.rec.All())
}

func TestInteropA02_ConfigValidation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	for _, tc := range []struct {
		cfg acp.Config
		msg string
	}{
		{acp.Config{}, "acp: command must be non-empty"},
		{acp.Config{Command: "x", Cwd: "rel"}, "acp: cwd must be an absolute path: rel"},
		{acp.Config{Command: "x", Cwd: file}, "acp: cwd is not an accessible directory: " + file},
		{acp.Config{Command: "x", Grace: -time.Second}, ""},
		{acp.Config{Command: "x", CancelGrace: -time.Second}, ""},
		{acp.Config{Command: "x", MaxOutputBytes: -1}, ""},
		{acp.Config{Command: "x", Permission: "maybe"}, ""},
	} {
		requireCode(t, tc.cfg.Validate(), messages.CodeInvalidConfig, tc.msg)
	}
	require.NoError(t, acp.Config{Command: "x"}.Validate())

	sentinel := filepath.Join(t.TempDir(), "sentinel")
	w := register(t, acp.Config{Command: "touch", Args: []string{sentinel}}, "", "")
	_, err := w.rt.Start(ctxFor(t), "acp", subagent.Request{Prompt: "p", Parent: subagent.Parent{Session: "p"}}, nil)
	requireCode(t, err, messages.CodeInvalidConfig, "acp: no working directory for the child; set Config.Cwd or give the parent a cwd")
	require.NoFileExists(t, sentinel)
	require.Empty(t, w.rec.All(), "nothing spawned")
}

func TestInteropA03_HandshakeAndPrompt(t *testing.T) {
	w := newWorld(t, acptest.Script{Updates: []acptest.Update{{Kind: "text", Text: "hi"}}}, func(c *acp.Config) { c.Cwd = "" })
	d := t.TempDir()
	run := w.start(t, subagent.Request{Prompt: "do it", Parent: subagent.Parent{Session: "p", Cwd: d}})
	require.Equal(t, "p/acp-1", run.ID())
	require.False(t, run.Local())
	res := result(t, run)
	require.Equal(t, subagent.StopCompleted, res.StopReason)
	require.Equal(t, "hi", res.Text())
	require.NoError(t, run.Dispose(ctxFor(t)))
	w.requireGone(t)

	log := acptest.ReadLog(t, w.log)
	require.Equal(t, []string{"start", "initialize", "session/new", "session/prompt", "eof"}, acptest.Methods(log))
	real, err := filepath.EvalSymlinks(d)
	require.NoError(t, err)
	require.Equal(t, real, log[0].Cwd, "the process runs in the parent's cwd")

	var init acpsdk.InitializeRequest
	require.NoError(t, json.Unmarshal(log[1].Params, &init))
	require.EqualValues(t, 1, init.ProtocolVersion)
	require.Equal(t, "troupe", init.ClientInfo.Name)
	require.False(t, init.ClientCapabilities.Fs.ReadTextFile)
	require.False(t, init.ClientCapabilities.Fs.WriteTextFile)
	require.False(t, init.ClientCapabilities.Terminal)

	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(log[2].Params, &raw))
	require.JSONEq(t, `"`+d+`"`, string(raw["cwd"]))
	require.JSONEq(t, `[]`, string(raw["mcpServers"]))

	require.NoError(t, json.Unmarshal(log[3].Params, &raw))
	require.JSONEq(t, `[{"type":"text","text":"do it"}]`, string(raw["prompt"]))
	sid := w.rec.Wait(t, acp.EventSession).SessionID
	require.NotEqual(t, sid, run.ID())

	second := w.start(t, subagent.Request{Prompt: "again", Parent: subagent.Parent{Session: "p", Cwd: d}})
	require.Equal(t, "p/acp-2", second.ID())
	result(t, second)
}

func TestInteropA04_StopReasons(t *testing.T) {
	for _, tc := range []struct{ acp, want, diag string }{
		{"end_turn", subagent.StopCompleted, ""},
		{"max_tokens", subagent.StopMaxTokens, ""},
		{"refusal", subagent.StopRefusal, ""},
		{"cancelled", subagent.StopAborted, ""},
		{"max_turn_requests", subagent.StopError, "acp stop reason: max_turn_requests"},
		{"weird", subagent.StopError, "acp stop reason: weird"},
	} {
		t.Run(tc.acp, func(t *testing.T) {
			w := newWorld(t, acptest.Script{Stop: tc.acp})
			res := w.settle(t, subagent.Request{Prompt: "p"})
			require.Equal(t, tc.want, res.StopReason)
			require.Equal(t, tc.diag, res.Diagnostic)
		})
	}
}

// answer is the fake's record of what troupe answered to its permission request.
func answers(t *testing.T, w *world) []string {
	var out []string
	for _, r := range records(t, w, "permission-answer") {
		out = append(out, r.Answer)
	}
	return out
}

func TestInteropA07_PermissionPolicy(t *testing.T) {
	allowOnly := []acptest.Option{{ID: "a1", Kind: "allow_once"}, {ID: "a2", Kind: "allow_always"}}
	rejectOnly := []acptest.Option{{ID: "r1", Kind: "reject_once"}}
	both := []acptest.Option{{ID: "a1", Kind: "allow_once"}, {ID: "r1", Kind: "reject_once"}}

	t.Run("reject with only allow options", func(t *testing.T) {
		w := newWorld(t, acptest.Script{Permissions: [][]acptest.Option{allowOnly}})
		require.Equal(t, subagent.StopCompleted, w.settle(t, subagent.Request{Prompt: "p"}).StopReason)
		require.Equal(t, []string{`{"outcome":"cancelled"}`}, answers(t, w))
		ev := w.rec.Wait(t, acp.EventPermission)
		require.Equal(t, "cancelled", ev.Answer)
		require.Len(t, ev.Options, 2)
	})
	t.Run("allow with only a reject option", func(t *testing.T) {
		w := newWorld(t, acptest.Script{Permissions: [][]acptest.Option{rejectOnly}}, func(c *acp.Config) { c.Permission = acp.PermissionAllow })
		w.settle(t, subagent.Request{Prompt: "p"})
		require.Equal(t, []string{`{"optionId":"r1","outcome":"selected"}`}, answers(t, w))
	})
	t.Run("allow picks allow_once", func(t *testing.T) {
		w := newWorld(t, acptest.Script{Permissions: [][]acptest.Option{both}}, func(c *acp.Config) { c.Permission = acp.PermissionAllow })
		w.settle(t, subagent.Request{Prompt: "p"})
		require.Equal(t, []string{`{"optionId":"a1","outcome":"selected"}`}, answers(t, w))
	})
	t.Run("Decide with an unknown id falls back to reject", func(t *testing.T) {
		var asked int
		w := newWorld(t, acptest.Script{Permissions: [][]acptest.Option{both, both}}, func(c *acp.Config) {
			c.Decide = func(ctx context.Context, req acp.PermissionRequest) (string, bool) {
				asked++
				if asked == 2 {
					panic("decider bug")
				}
				return "zzz", true
			}
		})
		w.settle(t, subagent.Request{Prompt: "p"})
		require.Equal(t, []string{`{"optionId":"r1","outcome":"selected"}`, `{"optionId":"r1","outcome":"selected"}`}, answers(t, w))
		require.Equal(t, 2, asked)
	})
	t.Run("Decide timing out falls back to reject", func(t *testing.T) {
		w := newWorld(t, acptest.Script{Permissions: [][]acptest.Option{both}}, func(c *acp.Config) {
			c.PermissionTimeout = 50 * time.Millisecond
			c.Decide = func(ctx context.Context, req acp.PermissionRequest) (string, bool) {
				<-ctx.Done()
				return "a1", true
			}
		})
		w.settle(t, subagent.Request{Prompt: "p"})
		require.Equal(t, []string{`{"optionId":"r1","outcome":"selected"}`}, answers(t, w))
	})
	t.Run("a request after session/cancel", func(t *testing.T) {
		w := newWorld(t, acptest.Script{Block: true, Updates: []acptest.Update{{Kind: "text", Text: "x"}}, PermissionAfterCancel: both},
			func(c *acp.Config) { c.Permission = acp.PermissionAllow })
		run := w.start(t, subagent.Request{Prompt: "p"})
		w.rec.Wait(t, acp.EventUpdate)
		require.NoError(t, run.Dispose(ctxFor(t)))
		res := result(t, run)
		require.Equal(t, subagent.StopAborted, res.StopReason)
		require.Equal(t, "x", res.Text(), "the text so far is kept")
		require.Empty(t, res.Diagnostic)
		require.Equal(t, []string{`{"outcome":"cancelled"}`}, answers(t, w))
		require.Equal(t, 1, w.rec.Count(acp.EventCancelSent))
		w.requireGone(t)
	})
}

func TestInteropA08_OnlyMessageTextIsKept(t *testing.T) {
	w := newWorld(t, acptest.Script{Updates: []acptest.Update{
		{Kind: "thought", Text: "hmm"}, {Kind: "tool_call"}, {Kind: "image"},
		{Kind: "text", Text: "a"}, {Kind: "text", Text: "b"}, {Kind: "text", Text: "stray", OtherSession: true},
	}})
	res := w.settle(t, subagent.Request{Prompt: "p"})
	require.Equal(t, []subagent.Block{{Type: "text", Text: "ab"}}, res.Output)
	require.True(t, w.logs.Contains(`ignored agent_message_chunk update for unknown session "another-session"`))

	w = newWorld(t, acptest.Script{Updates: []acptest.Update{{Kind: "thought", Text: "hmm"}}})
	require.Empty(t, w.settle(t, subagent.Request{Prompt: "p"}).Output)

	w = newWorld(t, acptest.Script{})
	_, err := w.rt.Start(ctxFor(t), "acp", subagent.Request{Prompt: ""}, nil)
	requireCode(t, err, messages.CodeInvalidConfig, "acp: invalid prompt: expected non-empty text")
	require.Empty(t, w.rec.All(), "nothing spawned")
}

func TestInteropA08_OutputIsBounded(t *testing.T) {
	w := newWorld(t, acptest.Script{Updates: []acptest.Update{{Kind: "text", Text: "ééééé"}}}, func(c *acp.Config) { c.MaxOutputBytes = 5 })
	res := w.settle(t, subagent.Request{Prompt: "p"})
	require.Equal(t, "éé", res.Text(), "cut on a rune boundary")
	require.Equal(t, "acp output truncated at 5 bytes", res.Diagnostic)
}

func TestInteropA10_UnansweredCancelStopsTheProcess(t *testing.T) {
	w := newWorld(t, acptest.Script{IgnoreCancel: true, IgnoreEOF: true, TrapTERM: true, Updates: []acptest.Update{{Kind: "text", Text: "x"}}},
		func(c *acp.Config) {
			c.CancelGrace, c.EOFGrace, c.Grace = 200*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
		})
	run := w.start(t, subagent.Request{Prompt: "p"})
	w.rec.Wait(t, acp.EventUpdate)
	require.NoError(t, run.Dispose(ctxFor(t)))
	res := result(t, run)
	require.Equal(t, subagent.StopAborted, res.StopReason)
	require.Equal(t, "acp agent did not answer session/cancel within 200ms; process stopped", res.Diagnostic)
	require.Equal(t, "signal: SIGKILL", w.rec.Wait(t, acp.EventStopped).Outcome.Detail)
	w.requireGone(t)
}

func TestInteropA12_CancelledBeforeStart(t *testing.T) {
	sentinel := filepath.Join(t.TempDir(), "sentinel")
	w := register(t, acp.Config{Command: "touch", Args: []string{sentinel}, Cwd: t.TempDir()}, "", "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := w.rt.Start(ctx, "acp", subagent.Request{Prompt: "p"}, nil)
	requireCode(t, err, subagent.CodeCancelled, "subagent request was aborted before the ACP child started")
	require.NoFileExists(t, sentinel)

	var w2 *world
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	w2 = newWorld(t, acptest.Script{HoldNewSession: true}, func(c *acp.Config) {
		c.Observe = func(ev acp.Event) {
			if ev.Kind == acp.EventInitialized {
				cancel()
			}
		}
	})
	_, err = w2.rt.Start(ctx, "acp", subagent.Request{Prompt: "p"}, nil)
	requireCode(t, err, subagent.CodeCancelled, "subagent request was aborted before the ACP child started")
	w2.requireGone(t)
	got := acptest.Methods(acptest.ReadLog(t, w2.log))
	require.Contains(t, got, "initialize")
	require.NotContains(t, got, "session/prompt", "the fake never received a prompt")
}

func TestInteropA13_SpawnFailure(t *testing.T) {
	w := register(t, acp.Config{Command: "/nonexistent/agent", Cwd: t.TempDir()}, "", "")
	_, err := w.rt.Start(ctxFor(t), "acp", subagent.Request{Prompt: "p"}, nil)
	requireCode(t, err, acp.CodeSpawnFailed, "")
	require.True(t, strings.HasPrefix(err.Error(), `acp provider "acp": cannot start /nonexistent/agent:`), err.Error())
	require.Zero(t, w.p.Live())
}

func TestInteropA14_HandshakeFaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    acptest.Script
		msg  string
		// timeout is StartTimeout: 200 ms where the case is the timeout; the others
		// get room for a re-executed -race test binary to start on a loaded machine.
		timeout time.Duration
	}{
		{"no sessionId", acptest.Script{EmptySessionID: true}, `acp provider "acp": session/new returned no sessionId`, budget},
		{"protocol 2", acptest.Script{ProtocolVersion: 2}, `acp provider "acp": unsupported protocol version 2`, budget},
		{"no answer", acptest.Script{NoInitAnswer: true}, `acp provider "acp": handshake timed out after 200ms`, 200 * time.Millisecond},
		{"session/new error", acptest.Script{NewError: &acptest.RPCError{Code: -32603, Message: "nope"}}, `acp provider "acp": session/new failed: nope (-32603)`, budget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.s, func(c *acp.Config) { c.StartTimeout = tc.timeout })
			_, err := w.rt.Start(ctxFor(t), "acp", subagent.Request{Prompt: "p"}, nil)
			requireCode(t, err, acp.CodeHandshakeFailed, tc.msg)
			w.requireGone(t)
		})
	}
}

func TestInteropA15_AuthRequiredNamesTheMethods(t *testing.T) {
	w := newWorld(t, acptest.Script{AuthMethod: "key", NewError: &acptest.RPCError{Code: -32000, Message: "Authentication required"}})
	_, err := w.rt.Start(ctxFor(t), "acp", subagent.Request{Prompt: "p"}, nil)
	requireCode(t, err, acp.CodeAuthRequired,
		`acp provider "acp": session/new failed: Authentication required (-32000); advertised auth methods: key; set Config.AuthMethod`)
	w.requireGone(t)

	w = newWorld(t, acptest.Script{AuthMethod: "key"}, func(c *acp.Config) { c.AuthMethod = "key" })
	w.settle(t, subagent.Request{Prompt: "p"})
	require.Equal(t, []string{"start", "initialize", "authenticate", "session/new", "session/prompt", "eof"}, acptest.Methods(acptest.ReadLog(t, w.log)))
	ks := w.rec.Kinds()
	require.Less(t, slices.Index(ks, acp.EventAuthenticated), slices.Index(ks, acp.EventSession))
}

func TestInteropA16_AgentExitsDuringPrompt(t *testing.T) {
	w := newWorld(t, acptest.Script{Stderr: "boom", ExitOnPrompt: 1})
	res := w.settle(t, subagent.Request{Prompt: "p"})
	require.Equal(t, subagent.StopError, res.StopReason)
	require.True(t, strings.HasPrefix(res.Diagnostic, "acp agent exited during session/prompt: exit code: 1"), res.Diagnostic)
	require.Contains(t, res.Diagnostic, "\nstderr: ")
	require.Contains(t, res.Diagnostic, "boom")
	require.LessOrEqual(t, len(res.Diagnostic), 4096)
}

func TestInteropA16_PromptErrorResponse(t *testing.T) {
	w := newWorld(t, acptest.Script{PromptError: &acptest.RPCError{Code: -32603, Message: "model down"}})
	res := w.settle(t, subagent.Request{Prompt: "p"})
	require.Equal(t, subagent.StopError, res.StopReason)
	require.Equal(t, "acp session/prompt failed: model down (-32603)", res.Diagnostic)
}

func TestInteropA17_ClientMethodsRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "written")
	w := newWorld(t, acptest.Script{CallClient: []string{"fs/read_text_file", "fs/write_text_file", "terminal/create", "_x/y"}, WritePath: p})
	res := w.settle(t, subagent.Request{Prompt: "p"})
	require.Equal(t, subagent.StopCompleted, res.StopReason)
	for _, m := range []string{"fs/read_text_file", "fs/write_text_file", "terminal/create", "_x/y"} {
		rs := records(t, w, "call "+m)
		require.Len(t, rs, 1, m)
		require.Equal(t, "error -32601", rs[0].Answer, m)
	}
	require.NoFileExists(t, p)
}

func TestInteropA18_EnvironmentScrub(t *testing.T) {
	t.Setenv("TROUPE_TEST_SECRET_TOKEN", "leak")
	t.Setenv("TROUPE_JOB", "parent")
	w := newWorld(t, acptest.Script{EchoEnv: true}, func(c *acp.Config) { c.Env["OPENAI_API_KEY"] = "x" })
	w.settle(t, subagent.Request{Prompt: "p"})
	env := records(t, w, "start")[0].Env
	marker := w.rec.Wait(t, acp.EventSpawned).Marker
	var jobs []string
	for _, kv := range env {
		require.False(t, strings.HasPrefix(kv, "TROUPE_TEST_SECRET_TOKEN="), "the secret leaked")
		if strings.HasPrefix(kv, "TROUPE_JOB=") {
			jobs = append(jobs, kv)
		}
	}
	require.Contains(t, env, "OPENAI_API_KEY=x")
	require.Equal(t, []string{marker}, jobs)
}

func TestScopeDisposalStopsEveryProcess(t *testing.T) {
	w := newWorld(t, acptest.Script{Block: true, Updates: []acptest.Update{{Kind: "text", Text: "x"}}})
	run := w.start(t, subagent.Request{Prompt: "p"})
	w.rec.Wait(t, acp.EventUpdate)
	require.Equal(t, 1, w.p.Live())
	require.NoError(t, w.sc.Dispose(ctxFor(t)))
	w.requireGone(t)
	_ = run.Dispose(ctxFor(t))
	res := result(t, run)
	require.Equal(t, subagent.StopError, res.StopReason, "the process was stopped under the prompt")
	require.True(t, strings.HasPrefix(res.Diagnostic, "acp agent exited during session/prompt: "), res.Diagnostic)
}

// background mounts the job and subagent tools over a provider registered with cfg and
// returns a model-tool caller acting as a live parent agent, and the job tool named name.
func background(t *testing.T, cfg acp.Config) (call func(tool tools.Tool, args string) string, jobTool func(name string) tools.Tool) {
	t.Helper()
	sys, logs := troupetest.NewSystem(t)
	_, err := sys.Jobs().MountAgents(context.Background(), sys.Scope())
	require.NoError(t, err)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), slog.New(logs))
	require.NoError(t, err)
	cfg.Logger = slog.New(logs)
	_, err = acp.Register(rt, sys.Scope(), cfg)
	require.NoError(t, err)
	sc, err := sys.Scope().Child("plugins")
	require.NoError(t, err)
	jobs, err := jobtools.MountIn(t.Context(), sys.Jobs(), sc, jobtools.Config{})
	require.NoError(t, err)
	m, err := subagenttool.MountIn(t.Context(), sc, subagenttool.Config{Provider: "acp", ProviderManagedDepth: true},
		subagenttool.Deps{Subagents: rt, Jobs: sys.Jobs()})
	require.NoError(t, err)
	parent, err := sys.NewAgent(sc, "parent")
	require.NoError(t, err)
	require.NoError(t, sys.Jobs().RegisterAgent(context.Background(), parent))
	call = func(tool tools.Tool, args string) string {
		res := jobs.Pipeline().Run(ctxFor(t), tool, tools.Call{ID: "c-" + tool.Name, Name: tool.Name,
			Args: json.RawMessage(args), Caller: tools.AsAgent(parent)})
		text, _ := res.SingleText()
		return text
	}
	jobTool = func(name string) tools.Tool {
		if name == subagenttool.DefaultToolName {
			return m.Tool()
		}
		for _, tl := range jobs.All() {
			if tl.Name == name {
				return tl
			}
		}
		t.Fatalf("no tool %q", name)
		return tools.Tool{}
	}
	return call, jobTool
}

func TestInteropA13_BackgroundSpawnFailure(t *testing.T) {
	call, tool := background(t, acp.Config{Command: "/nonexistent/agent", Cwd: t.TempDir()})
	require.Equal(t, "started background subagent job subagent-1",
		call(tool(subagenttool.DefaultToolName), `{"description":"x","prompt":"p","run_in_background":true}`))
	out := call(tool(jobtools.NameOutput), `{"job_id":"subagent-1","wait":true}`)
	require.True(t, strings.HasPrefix(out, "(no new output)\n[status: failed, Error: acp provider \"acp\": cannot start /nonexistent/agent: "), "%q", out)
}

// A12's background form (SPEC §5.4): a background delegation killed while its ACP child
// is still starting (the fake holds session/new) rejects CANCELLED after the process is
// gone, and the job settles killed (a start rejected under an aborted signal), not failed.
func TestInteropA12_BackgroundKilledBeforeStartIsKilled(t *testing.T) {
	log := filepath.Join(t.TempDir(), "fake.log")
	cfg := fakeConfig(t, acptest.Script{Log: log, HoldNewSession: true}, t.TempDir())
	rec := acptest.NewRecorder(budget)
	cfg.Observe = rec.Observe
	call, tool := background(t, cfg)
	require.Equal(t, "started background subagent job subagent-1",
		call(tool(subagenttool.DefaultToolName), `{"description":"x","prompt":"p","run_in_background":true}`))
	rec.Wait(t, acp.EventInitialized)
	require.Equal(t, "requested cancellation of job subagent-1", call(tool(jobtools.NameKill), `{"job_id":"subagent-1","reason":"superseded"}`))
	out := call(tool(jobtools.NameOutput), `{"job_id":"subagent-1","wait":true}`)
	require.Equal(t, "(no new output)\n[status: killed, superseded]", out)
	spawned := rec.Of(acp.EventSpawned)
	require.Len(t, spawned, 1)
	acptest.RequireGone(t, spawned[0].Marker, spawned[0].PID)
	got := acptest.Methods(acptest.ReadLog(t, log))
	require.Contains(t, got, "initialize")
	require.NotContains(t, got, "session/prompt", "the fake never received a prompt")
}
