package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/workflow"
)

// A script fans out over three files through the spawn provider (a scripted turn
// runner stands in for the LLM) and returns one JSON value.
func Example() {
	sys, _ := troupe.New(troupe.DefaultConfig())
	defer sys.Shutdown(context.Background())
	rt, _ := subagent.NewRuntime(sys.Actors(), sys.Scope(), nil)
	runner := &subagent.Scripted{Match: func(t subagent.Turn) (subagent.Reply, bool) {
		return subagent.Reply{Text: "ok: " + t.Input.Text()}, true
	}}
	_, _ = rt.RegisterProvider(context.Background(), sys.Scope(), subagent.NewSpawn(sys.Actors(), runner))
	eng, _ := workflow.NewEngine(workflow.Host{Actors: sys.Actors(), Scope: sys.Scope(), Inspector: sys.Tree().PID()},
		sys.Scope(), rt, workflow.DefaultConfig())
	parent, _ := sys.NewAgent(nil, "lead")

	run, err := eng.Start(context.Background(), workflow.Request{
		Script: "phase('Audit')\nconst found = await parallel(args.files.map(f => () => agent('audit ' + f)))\nreturn { found }",
		Meta:   json.RawMessage(`{"name":"audit","description":"audit three files"}`),
		Args:   json.RawMessage(`{"files":["a.go","b.go","c.go"]}`),
		Parent: parent,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer run.Dispose(context.Background())
	res, _ := run.Result(context.Background())
	fmt.Println(res.StopReason, res.AgentsStarted, string(res.Value))
	// Output: completed 3 {"found":["ok: audit a.go","ok: audit b.go","ok: audit c.go"]}
}
