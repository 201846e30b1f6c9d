package troupe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/producers/process"
	"github.com/troupe-rt/troupe/tools"
	"github.com/troupe-rt/troupe/tools/jobtools"
)

// The real path of an embedder: a system, the model's job tools mounted, an agent,
// a shell job it owns, and the model's job_output call with its JSON arguments.
// README.md's "Embedding" shows this body; TestReadmeEmbeddingIsTheExample keeps
// the two the same.
func Example_embedding() {
	// SIGINT or SIGTERM ends ctx: a tool call waiting on it returns, and the
	// deferred Shutdown tears every job down before the process exits.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	sys, err := troupe.New(troupe.DefaultConfig())
	if err != nil {
		panic(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = sys.Shutdown(ctx) // refuses new work, kills every job's processes, stops the actors
	}()
	_, _ = sys.Jobs().MountAgents(ctx, sys.Scope()) // the agent registry: session id → live incarnation
	// job_output, job_list and job_kill; it attaches the "tool-jobs" controller,
	// without which Start is refused.
	mount, err := jobtools.MountIn(ctx, sys.Jobs(), sys.Scope(), jobtools.Config{})
	if err != nil {
		panic(err)
	}

	// One owner actor per agent incarnation. Pass owner.Options{Surface: s} to
	// receive its completion notices; without one they are dropped.
	agent, _ := sys.NewAgent(nil, "session-1")
	_ = sys.Jobs().RegisterAgent(ctx, agent)

	spec := process.Shell("echo hello from bash", process.Config{})
	spec.Owner = agent
	id, err := sys.Jobs().Start(ctx, spec)
	if err != nil {
		panic(err)
	}

	// The model calls job_output; run the call through the mount's pipeline, which
	// applies SPEC §3.6's output limit as its last step.
	res := mount.Pipeline().Run(ctx, mount.Output(), tools.Call{
		ID: "call-1", Name: "job_output", Caller: tools.AsAgent(agent), // the calling agent: its session fences the call
		Args: json.RawMessage(`{"job_id":"bash-1","wait":true,"timeout_ms":10000}`),
	})
	fmt.Println(id)
	fmt.Println(res.Content[0].Text)
	// Output:
	// bash-1
	// hello from bash
	// [status: completed, exit code: 0]
}
