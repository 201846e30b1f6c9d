package conformance_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/test/conformance"
)

// The suite must fail on providers that break the contract. Each broken provider
// runs the suite in a subprocess (a failing subtest cannot be expected in-process);
// the check it breaks must be reported failed.

const brokenEnv = "TROUPE_CONFORMANCE_BROKEN"

// goroutineProvider runs each turn in a goroutine, like ScriptedProvider, with one
// contract breach chosen by its fields.
type goroutineProvider struct {
	runner subagent.TurnRunner
	runs   atomic.Uint64
	// claimDepth claims depthLimit without enforcing it.
	claimDepth bool
	// abandon makes Dispose settle the result aborted without stopping the turn.
	abandon bool
	// reject makes a runner failure reject the result instead of resolving it.
	reject bool
}

func (p *goroutineProvider) Name() string                { return "broken" }
func (p *goroutineProvider) InheritsParentContext() bool { return false }
func (p *goroutineProvider) Capabilities() subagent.Capabilities {
	return subagent.Capabilities{DepthLimit: p.claimDepth}
}

func (p *goroutineProvider) Start(ctx context.Context, req subagent.ResolvedRequest) (*subagent.Run, error) {
	turnCtx, cancel := context.WithCancel(context.Background())
	quiet := make(chan struct{})
	var settle func(subagent.Result, error)
	var run *subagent.Run
	run, settle = subagent.NewRun("broken-"+strconv.FormatUint(p.runs.Add(1), 10), false, func(context.Context) error {
		if p.abandon {
			settle(subagent.Result{StopReason: subagent.StopAborted}, nil)
			return nil
		}
		cancel()
		<-quiet
		return nil
	})
	turn := subagent.Turn{Session: run.ID(), Depth: req.Depth,
		Input: subagent.Message{Role: "user", Content: []subagent.Block{{Type: "text", Text: req.Prompt}}}}
	go func() {
		defer close(quiet)
		if p.reject {
			var tr subagent.TurnResult
			err := func() (err error) {
				defer func() {
					if v := recover(); v != nil {
						err = fmt.Errorf("%v", v)
					}
				}()
				tr, err = p.runner.RunTurn(turnCtx, turn)
				return err
			}()
			if err != nil {
				settle(subagent.Result{}, err)
				return
			}
			settle(subagent.Result{Output: subagent.LastAssistant(tr.Messages), StopReason: subagent.StopCompleted}, nil)
			return
		}
		res, _ := subagent.RunOneTurn(turnCtx, p.runner, turn)
		settle(res, nil)
	}()
	return run, nil
}

var broken = map[string]struct {
	provider func(r subagent.TurnRunner) subagent.Provider
	fails    string // the check that must fail
}{
	"unenforced-depth": {func(r subagent.TurnRunner) subagent.Provider { return &goroutineProvider{runner: r, claimDepth: true} }, "Depth"},
	"no-quiescence":    {func(r subagent.TurnRunner) subagent.Provider { return &goroutineProvider{runner: r, abandon: true} }, "CancelMidTurn"},
	"rejecting-result": {func(r subagent.TurnRunner) subagent.Provider { return &goroutineProvider{runner: r, reject: true} }, "ChildFailureResolves"},
}

// TestBroken runs the suite against the broken provider named by the environment;
// it runs only as TestSuiteCatchesBrokenProviders' subprocess.
func TestBroken(t *testing.T) {
	name := os.Getenv(brokenEnv)
	if name == "" {
		t.Skip("runs only as a subprocess of TestSuiteCatchesBrokenProviders")
	}
	b := broken[name]
	conformance.RunProviderSuite(t, func(_ *troupe.System, r subagent.TurnRunner) subagent.Provider { return b.provider(r) })
}

func TestSuiteCatchesBrokenProviders(t *testing.T) {
	if os.Getenv(brokenEnv) != "" {
		t.Skip("inside a subprocess")
	}
	for name, b := range broken {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBroken$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), brokenEnv+"="+name)
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "the suite passed a broken provider:\n%s", out)
			require.Contains(t, string(out), "--- FAIL: TestBroken/"+b.fails+" ", "output:\n%s", out)
		})
	}
}
