package troupe_test

import (
	"context"
	"fmt"
	"time"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
)

// An embedder attaches a job controller, registers an agent, starts a job it owns,
// kills it with a reason and reads the settled snapshot.
func Example() {
	sys, _ := troupe.New(troupe.DefaultConfig())
	defer sys.Shutdown(context.Background())
	jobs := sys.Jobs()
	jobs.AttachController(context.Background(), sys.Scope(), "my-tools")
	jobs.MountAgents(context.Background(), sys.Scope())

	agent, _ := sys.NewAgent(nil, "session-1")
	jobs.RegisterAgent(context.Background(), agent)

	done := make(chan job.Outcome, 1)
	id, _ := jobs.Start(context.Background(), job.Spec{
		Kind: "bash", Label: "sleep 1000", Owner: agent,
		Run: func() (job.Hooks, error) {
			return job.Hooks{
				Cancel: func(string) error { done <- job.Outcome{Status: job.Killed, Detail: "signal: SIGTERM"}; return nil },
				Done:   done,
			}, nil
		},
	})
	res, _, _ := jobs.Kill(context.Background(), id, registry.AsAgent(agent), registry.KillOptions{Reason: "cancelled by the user", NoClaim: true})
	snap, _ := jobs.Wait(context.Background(), id, 5*time.Second, registry.AsAgent(agent))
	fmt.Println(id, res.Name(), snap.Status.Name(), snap.GetDetail())
	// Output: bash-1 requested killed signal: SIGTERM; cancelled by the user
}
