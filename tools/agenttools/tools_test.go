package agenttools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/agenttools"
	"github.com/troupe-rt/troupe/troupetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type inbox chan owner.Message

func (i inbox) Inject(m owner.Message) error   { i <- m; return nil }
func (i inbox) Steer(m owner.Message) error    { i <- m; return nil }
func (i inbox) Followup(m owner.Message) error { i <- m; return nil }

func call(t *testing.T, tool tools.Tool, agent *owner.Agent, args any) tools.Result {
	t.Helper()
	raw, err := json.Marshal(args)
	require.NoError(t, err)
	c := tools.Call{ID: "c", Name: tool.Name, Args: raw, Caller: tools.AsAgent(agent)}
	return (&tools.Pipeline{}).Run(context.Background(), tool, c)
}

func text(t *testing.T, r tools.Result) string {
	t.Helper()
	s, ok := r.SingleText()
	require.True(t, ok)
	return s
}

func TestSendListInterrupt(t *testing.T) {
	sys, _ := troupetest.Served(t)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), nil)
	require.NoError(t, err)
	runner := subagent.NewScripted(subagent.Reply{Text: "done"})
	runner.Match = func(turn subagent.Turn) (subagent.Reply, bool) {
		// "hold" runs until it is interrupted (its context is cancelled).
		return subagent.Reply{Block: true}, turn.Input.Text() == "hold"
	}
	_, err = rt.RegisterProvider(t.Context(), sys.Scope(), subagent.NewSpawn(sys.Actors(), runner))
	require.NoError(t, err)
	m, err := sys.StartContinuations(session.NewMemory(), rt, runner, nil)
	require.NoError(t, err)
	tl, err := agenttools.New(m, "")
	require.NoError(t, err)

	notices := make(inbox, 8)
	parent, err := sys.NewAgent(nil, "P", owner.Options{Surface: notices})
	require.NoError(t, err)
	require.NoError(t, sys.Jobs().RegisterAgent(context.Background(), parent))
	stranger := troupetest.Agent(t, sys, "X")

	require.Equal(t, "(no subagents)", text(t, call(t, tl.List(), parent, map[string]any{})))
	_, _, err = m.Start(context.Background(), parent, "spawn", "research", "c1", subagent.Request{Prompt: "hold"})
	require.NoError(t, err)
	require.Equal(t, "c1 [running] \u2014 research", text(t, call(t, tl.List(), parent, map[string]any{})))
	require.Equal(t, "c1 [running] parent=P depth=1 \u2014 research", text(t, call(t, tl.List(), parent, map[string]any{"scope": "descendants"})))

	res := call(t, tl.Send(), parent, map[string]any{"subagent_id": "c1", "message": "next"})
	require.False(t, res.IsError)
	require.Equal(t, "message queued as the next turn for subagent c1", text(t, res))
	require.NotEmpty(t, res.Value.(agenttools.SendValue).MessageID)

	res = call(t, tl.Send(), stranger, map[string]any{"subagent_id": "c1", "message": "hijack"})
	require.True(t, res.IsError)
	require.Equal(t, `Error: subagent "c1" belongs to another parent session`, text(t, res))
	res = call(t, tl.Send(), nil, map[string]any{"subagent_id": "c1", "message": "x"})
	require.Equal(t, "Error: send_message requires a calling agent (exec.agent was undefined)", text(t, res))

	res = call(t, tl.Interrupt(), stranger, map[string]any{"agent_id": "c1"})
	require.True(t, res.IsError)
	require.Equal(t, `Error: subagent "c1" is not a live descendant of agent "X"`, text(t, res))
	res = call(t, tl.Interrupt(), parent, map[string]any{"agent_id": "c1"})
	require.False(t, res.IsError)
	require.Equal(t, "interrupt requested for agent c1", text(t, res))

	// The queued "next" survives the interrupt; a waking send runs it first.
	res = call(t, tl.Send(), parent, map[string]any{"subagent_id": "c1", "message": "last"})
	require.False(t, res.IsError)
	select {
	case n := <-notices:
		require.Contains(t, n.Text, "Background subagent c1 ")
	case <-time.After(10 * time.Second):
		t.Fatal("no settlement notice")
	}
	turns := runner.Turns()
	var inputs []string
	for _, tr := range turns {
		inputs = append(inputs, tr.Input.Text())
	}
	require.Equal(t, []string{"hold", "next", "last"}, inputs)
	require.Equal(t, "c1 [ready] \u2014 research", text(t, call(t, tl.List(), parent, map[string]any{})))
}

func TestListTextKeepsOneValidBoundedRowPerAgent(t *testing.T) {
	items := []activation.Listed{
		{ID: "c1", Status: "running", Label: "research\nrm -rf /\xff"},
		{ID: "c2", Status: "idle", Label: strings.Repeat("x", 10<<20)},
		{ID: "c3", Status: "ready", Label: "plain"},
	}
	text := agenttools.ListText(items, false)
	lines := strings.Split(text, "\n")
	require.Len(t, lines, len(items), "one row per agent")
	require.Equal(t, "c1 [running] \u2014 research↵rm -rf /\uFFFD", lines[0])
	require.Equal(t, "c3 [ready] \u2014 plain", lines[2])
	require.True(t, utf8.ValidString(text))
	require.LessOrEqual(t, len(lines[1]), len("c2 [idle] \u2014 ")+job.MaxLabelBytes)
}
