package conformance_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/test/acptest"
	"github.com/troupe-rt/troupe/test/conformance"
)

func TestMain(m *testing.M) {
	acptest.MaybeRun() // the scripted ACP agent of TestACPProviderScriptedAgent
	goleak.VerifyTestMain(m)
}

func TestSpawn(t *testing.T) {
	conformance.RunProviderSuite(t, func(sys *troupe.System, r subagent.TurnRunner) subagent.Provider {
		return subagent.NewSpawn(sys.Actors(), r)
	})
}

func TestFork(t *testing.T) {
	conformance.RunProviderSuite(t, func(sys *troupe.System, r subagent.TurnRunner) subagent.Provider {
		return subagent.NewFork(sys.Actors(), r)
	})
}

func TestScriptedProvider(t *testing.T) {
	conformance.RunProviderSuite(t, func(_ *troupe.System, r subagent.TurnRunner) subagent.Provider {
		return &subagent.ScriptedProvider{ProviderName: "scripted", Runner: r}
	})
}
