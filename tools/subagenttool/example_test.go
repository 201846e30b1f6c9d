package subagenttool_test

import (
	"context"
	"fmt"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/tools/subagenttool"
)

// A foreground delegation and a background one, collected with job_output.
func ExampleMountIn() {
	ctx := context.Background()
	sys, _ := troupe.New(troupe.DefaultConfig())
	defer sys.Shutdown(ctx)
	_, _ = sys.Jobs().MountAgents(ctx, sys.Scope())
	rt, _ := subagent.NewRuntime(sys.Actors(), sys.Scope(), nil)
	_, _ = rt.RegisterProvider(ctx, sys.Scope(), subagent.NewSpawn(sys.Actors(), subagent.NewScripted(subagent.Reply{Text: "42"})))

	jobs, _ := jobtools.MountIn(ctx, sys.Jobs(), sys.Scope(), jobtools.Config{})
	m, _ := subagenttool.MountIn(ctx, sys.Scope(), subagenttool.Config{Provider: "spawn"},
		subagenttool.Deps{Subagents: rt, Jobs: sys.Jobs()})
	agent, _ := sys.NewAgent(nil, "main")
	_ = sys.Jobs().RegisterAgent(ctx, agent)

	call := func(tool tools.Tool, args string) string {
		res := jobs.Pipeline().Run(ctx, tool, tools.Call{ID: "c", Name: tool.Name, Args: []byte(args), Caller: tools.AsAgent(agent)})
		return res.Content[0].Text
	}
	fmt.Println(call(m.Tool(), `{"description":"answer the question","prompt":"6 times 7?"}`))
	fmt.Println(call(m.Tool(), `{"description":"answer in background","prompt":"6 times 7?","run_in_background":true}`))
	fmt.Println(call(jobs.Output(), `{"job_id":"subagent-1","wait":true}`))
	// Output:
	// 42
	// started background subagent job subagent-1
	// 42
	// [status: completed]
}
