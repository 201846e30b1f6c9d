package subagenttool_test

import (
	"context"
	"fmt"
	"github.com/troupe-rt/troupe/actors/registry"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/tools/subagenttool"
	"github.com/troupe-rt/troupe/troupetest"
)

// BenchmarkForeground is one foreground delegation through the tool pipeline:
// decode, checks, provider start, the scripted turn, result, dispose, render. The
// spawn provider runs each child as an actor; the scripted provider as a goroutine.
func BenchmarkForeground(b *testing.B) {
	for _, tc := range []struct {
		name string
		cfg  subagenttool.Config
		make func(e *env, r subagent.TurnRunner) subagent.Provider
	}{
		{"spawn", subagenttool.Config{Provider: "spawn"}, func(e *env, r subagent.TurnRunner) subagent.Provider {
			return subagent.NewSpawn(e.sys.Actors(), r)
		}},
		{"scripted-provider", subagenttool.Config{Provider: "scripted", ProviderManagedDepth: true}, func(_ *env, r subagent.TurnRunner) subagent.Provider {
			return &subagent.ScriptedProvider{ProviderName: "scripted", Runner: r}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			e := newEnv(b)
			e.register(b, tc.make(e, &subagent.Scripted{Replies: []subagent.Reply{{Text: "ok"}}}))
			m := e.mount(b, tc.cfg)
			tool := m.Tool()
			ctx := context.Background()
			for b.Loop() {
				if res := e.run(ctx, tool, `{"description":"bench","prompt":"p"}`); res.IsError {
					b.Fatal(res.Content)
				}
			}
		})
	}
}

// BenchmarkJobLifecycle is the baseline for the background delegation: a trivial
// owned job started, settled by its producer, and awaited until its settlement
// step (observers included) has run.
func BenchmarkJobLifecycle(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	for b.Loop() {
		p := troupetest.NewProducer()
		id, err := e.sys.Jobs().Start(ctx, p.Spec(e.parent))
		if err != nil {
			b.Fatal(err)
		}
		p.Settle(job.Outcome{Status: job.Completed, Output: "ok"})
		if _, err := e.sys.Jobs().AwaitSettled(ctx, id, registry.AsAgent(e.parent)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBackground is one background delegation through the tools: the
// subagent tool starts the job (spawn provider, scripted turn), then job_output
// with wait:true collects it.
func BenchmarkBackground(b *testing.B) {
	e := newEnv(b)
	e.register(b, subagent.NewSpawn(e.sys.Actors(), &subagent.Scripted{Replies: []subagent.Reply{{Text: "ok"}}}))
	m := e.mount(b, subagenttool.Config{Provider: "spawn"})
	tool, output := m.Tool(), e.jobs.Output()
	ctx := context.Background()
	n := 0
	for b.Loop() {
		n++
		if res := e.run(ctx, tool, `{"description":"bench","prompt":"p","run_in_background":true}`); res.IsError {
			b.Fatal(res.Content)
		}
		res := e.run(ctx, output, fmt.Sprintf(`{"job_id":"subagent-%d","wait":true}`, n))
		text, _ := res.SingleText()
		require.Equal(b, "ok\n[status: completed]", text)
	}
}
