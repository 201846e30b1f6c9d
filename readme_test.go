package troupe_test

import (
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/agenttools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/tools/subagenttool"
	"github.com/troupe-rt/troupe/troupetest"
)

func readme(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("README.md")
	require.NoError(t, err)
	return string(raw)
}

// section returns the README's text from the heading line up to the next heading of
// the same level.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	i := strings.Index(doc, "\n"+heading+"\n")
	require.GreaterOrEqual(t, i, 0, "README has no %q", heading)
	rest := doc[i+1+len(heading)+1:]
	level := heading[:strings.IndexByte(heading, ' ')+1]
	if j := strings.Index(rest, "\n"+level); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// README's embedding snippet is Example_embedding's body, so `go test` proves it:
// it compiles, runs and prints what it says.
func TestReadmeEmbeddingIsTheExample(t *testing.T) {
	emb := section(t, readme(t), "## Embedding")
	start := strings.Index(emb, "```go\n")
	require.GreaterOrEqual(t, start, 0, "the Embedding section opens with a Go block")
	block := emb[start+len("```go\n"):]
	block = block[:strings.Index(block, "```\n")]

	const file = "example_embedding_test.go"
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	var body string
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	require.NoError(t, err)
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "Example_embedding" {
			body = string(src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset])
		}
	}
	require.NotEmpty(t, body, "%s has Example_embedding", file)
	lines := strings.Split(strings.Trim(body, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "\t")
	}
	require.Equal(t, strings.Join(lines, "\n")+"\n", block,
		"README's embedding block must be Example_embedding's body, unindented by one tab")
}

// arg is one argument of a tool as a JSON Schema declares it.
type arg struct {
	Tool, Name, Type string
	Required         bool
	Enum             []string
}

// schemaArgs reads a tool's argument list from its JSON Schema.
func schemaArgs(t *testing.T, tool tools.Tool) []arg {
	t.Helper()
	var s struct {
		Type       string `json:"type"`
		Properties map[string]struct {
			Type string   `json:"type"`
			Enum []string `json:"enum"`
		} `json:"properties"`
		Required   []string `json:"required"`
		Additional *bool    `json:"additionalProperties"`
	}
	require.NoError(t, json.Unmarshal(tool.Parameters, &s), tool.Name)
	require.Equal(t, "object", s.Type, tool.Name)
	require.NotNil(t, s.Additional, tool.Name)
	require.False(t, *s.Additional, "%s refuses unknown arguments, as README says", tool.Name)
	out := []arg{}
	for name, p := range s.Properties {
		out = append(out, arg{Tool: tool.Name, Name: name, Type: p.Type, Required: slices.Contains(s.Required, name), Enum: p.Enum})
	}
	return out
}

var backticked = regexp.MustCompile("`([^`]+)`")

// tableArgs reads README's tool table: one row per argument; an empty tool cell
// continues the tool above; `—` marks a tool without arguments.
func tableArgs(t *testing.T, doc string) (args []arg, toolsListed []string) {
	t.Helper()
	const header = "| tool | argument | type | required | what it is |"
	i := strings.Index(doc, header+"\n| --- |")
	require.GreaterOrEqual(t, i, 0, "README has the tool table")
	rows := strings.Split(doc[i:], "\n")[2:]
	tool := ""
	for _, row := range rows {
		if !strings.HasPrefix(row, "|") {
			break
		}
		cells := strings.Split(strings.Trim(row, "|"), "|")
		require.Len(t, cells, 5, "row %q", row)
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		if cells[0] != "" {
			m := backticked.FindStringSubmatch(cells[0])
			require.NotNil(t, m, "tool cell %q", cells[0])
			tool = m[1]
			toolsListed = append(toolsListed, tool)
		}
		require.NotEmpty(t, tool, "row %q continues no tool", row)
		if cells[1] == "—" {
			continue
		}
		m := backticked.FindStringSubmatch(cells[1])
		require.NotNil(t, m, "argument cell %q", cells[1])
		a := arg{Tool: tool, Name: m[1], Type: strings.Fields(strings.TrimSuffix(cells[2], ":"))[0]}
		a.Type = strings.TrimSuffix(a.Type, ":")
		require.Contains(t, []string{"yes", "no"}, cells[3], "row %q", row)
		a.Required = cells[3] == "yes"
		if _, enum, ok := strings.Cut(cells[2], ":"); ok {
			for _, e := range backticked.FindAllStringSubmatch(enum, -1) {
				a.Enum = append(a.Enum, e[1])
			}
		}
		args = append(args, a)
	}
	return args, toolsListed
}

// README's tool table lists exactly the arguments the tools' schemas declare: names,
// types, required or not, enum values.
func TestReadmeToolTableMatchesTheSchemas(t *testing.T) {
	sys, _ := troupetest.NewSystem(t)
	jt, err := jobtools.New(sys.Jobs(), jobtools.Config{})
	require.NoError(t, err)
	at, err := agenttools.New(nil, "")
	require.NoError(t, err)
	rt, err := subagent.NewRuntime(sys.Actors(), sys.Scope(), nil)
	require.NoError(t, err)
	st, err := subagenttool.MountIn(t.Context(), sys.Scope(), subagenttool.Config{Provider: "spawn"}, subagenttool.Deps{Subagents: rt})
	require.NoError(t, err)
	shipped := append(append(jt.All(), st.Tool()), at.All()...)

	var want []arg
	var names []string
	for _, tool := range shipped {
		names = append(names, tool.Name)
		want = append(want, schemaArgs(t, tool)...)
	}
	got, listed := tableArgs(t, readme(t))
	require.Equal(t, names, listed, "the table lists every shipped tool, in this order")
	key := func(a, b arg) int { return strings.Compare(a.Tool+"/"+a.Name, b.Tool+"/"+b.Name) }
	slices.SortFunc(want, key)
	slices.SortFunc(got, key)
	require.Equal(t, want, got)
}

// What README's "What Dispose does to settled records" says, step by step.
func TestDisposeDeletesTheIncarnationsRecords(t *testing.T) {
	sys, _ := troupetest.Served(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	alice := troupetest.Agent(t, sys, "alice")
	changed := make(chan string, 64) // the observer runs on the registry actor: it only sends
	_, err := sys.Jobs().OnJobsChanged(ctx, sys.Scope(), func(o registry.Owner) { changed <- o.Session })
	require.NoError(t, err)
	drain := func() []string {
		out := []string{}
		for {
			select {
			case s := <-changed:
				out = append(out, s)
			default:
				return out
			}
		}
	}

	settled := troupetest.NewProducer()
	done, err := sys.Jobs().Start(ctx, settled.Spec(alice))
	require.NoError(t, err)
	settled.Settle(job.Outcome{Status: job.Completed, Detail: "exit code: 0"})
	snap := troupetest.Settled(t, sys, done, registry.AsAgent(alice))
	require.Equal(t, job.Completed, snap.Status)
	live := troupetest.NewProducer()
	live.OnCancel = &job.Outcome{Status: job.Killed}
	running, err := sys.Jobs().Start(ctx, live.Spec(alice))
	require.NoError(t, err)
	unowned := troupetest.NewProducer()
	free, err := sys.Jobs().Start(ctx, unowned.Spec(nil))
	require.NoError(t, err)
	unowned.Settle(job.Outcome{Status: job.Completed})
	troupetest.Settled(t, sys, free, registry.NoCaller)

	// The settled record answers while its incarnation lives.
	_, err = sys.Jobs().Get(ctx, done, registry.AsAgent(alice))
	require.NoError(t, err)
	text, _, err := sys.Jobs().Read(ctx, done, registry.AsAgent(alice))
	require.NoError(t, err)
	require.Empty(t, text)

	troupetest.Barrier(t, sys)
	drain()
	require.NoError(t, alice.Dispose(ctx))
	require.Equal(t, []string{"owner disposed"}, live.Cancels(), "the live job is cancelled for teardown")
	troupetest.Barrier(t, sys)
	require.Equal(t, []string{"alice", "alice", "alice"}, drain(), "stopping, settled, then one change for the removal")

	// The disposed incarnation is no authority any more (job/unauthenticated), so
	// the records are asked for as no caller: an owned record still there would
	// answer job/foreign, a deleted one is unknown.
	_, err = sys.Jobs().Get(ctx, done, registry.AsAgent(alice))
	require.Equal(t, messages.CodeUnauthenticated, messages.CodeOf(err), "%v", err)
	gone := registry.NoCaller
	for _, id := range []string{done, running} {
		_, err = sys.Jobs().Get(ctx, id, gone)
		require.ErrorIs(t, err, messages.ErrNotFound)
		require.EqualError(t, err, "unknown job "+id)
		_, _, err = sys.Jobs().Read(ctx, id, gone)
		require.ErrorIs(t, err, messages.ErrNotFound)
		_, err = sys.Jobs().Wait(ctx, id, time.Second, gone)
		require.ErrorIs(t, err, messages.ErrNotFound)
	}
	_, err = sys.Jobs().Start(ctx, troupetest.NewProducer().Spec(alice))
	require.ErrorIs(t, err, messages.ErrOwnerNotLive, "a disposed incarnation starts no more jobs")
	again := troupetest.Agent(t, sys, "alice")
	listed, err := sys.Jobs().List(ctx, registry.AsAgent(again))
	require.NoError(t, err)
	require.Equal(t, []string{free}, ids(listed), "only the unowned job is left in alice's view")
	last := troupetest.NewProducer()
	last.OnCancel = &job.Outcome{Status: job.Killed} // so that Shutdown's teardown ends
	next, err := sys.Jobs().Start(ctx, last.Spec(again))
	require.NoError(t, err)
	require.Equal(t, "bash-4", next, "ids are not issued again")
}

func ids(snaps []*messages.JobSnapshot) []string {
	out := []string{}
	for _, s := range snaps {
		out = append(out, s.Id)
	}
	return out
}
