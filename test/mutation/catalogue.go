//go:build troupe_mutation

package mutation

import (
	"slices"
	"strings"
	"testing"

	"github.com/troupe-rt/troupe/actors/activation"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/cluster"
	"github.com/troupe-rt/troupe/internal/fault"
)

// Bug is one planted bug of the catalogue.
type Bug struct {
	Switch string // its fault.Plant name (the Planted… constant's value)
	Const  string // the constant that names it, package-qualified
	What   string // the mistake
	Suite  string // the package of the suite that catches it, from the module root
	Test   string // the mutation test in Suite
	Oracle string // what in the suite catches it, in words
	// Oracles are the suite's named oracles that catch it: a planted run counts as
	// caught only if one of them fired.
	Oracles []Oracle
}

// Catalogue is every planted bug, with the suite that must catch it.
var Catalogue = []Bug{
	{
		Switch: job.PlantedCheckThenActSettle, Const: "job.PlantedCheckThenActSettle",
		What:  "the Done watcher or OnSettle delivery settles from a published copy of the job's state, outside the job actor",
		Suite: "./test/settle", Test: "TestMutation_CheckThenActSettle",
		Oracle:  "porcupine settlement model + exact counters",
		Oracles: []Oracle{SettleModel, SettleCommits, SettleAnnounce, SettleReplies},
	},
	{
		Switch: registry.PlantedDoubleSlotRelease, Const: "registry.PlantedDoubleSlotRelease",
		What:  "the job actor's termination frees the admission slot the settlement commit already freed",
		Suite: "./test/settle", Test: "TestMutation_DoubleSlotRelease",
		Oracle:  "admission probe at quiescence (one start fits, the next is refused)",
		Oracles: []Oracle{SettleAdmission},
	},
	{
		Switch: job.PlantedNoticeBeforeCommit, Const: "job.PlantedNoticeBeforeCommit",
		What:  "the completion is announced from the producer's outcome before the job settles and the registry commits",
		Suite: "./test/notices", Test: "TestMutation_NoticeBeforeCommit",
		Oracle:  "settled snapshot and notice vs SPEC's prediction; settled == delivered + claimed",
		Oracles: []Oracle{NoticesSettled, NoticesDelivered, NoticesAccount},
	},
	{
		Switch: activation.PlantedActivationWithoutClaim, Const: "activation.PlantedActivationWithoutClaim",
		What:  "a followup to a child being materialized resumes it again instead of waiting on the directory's claim",
		Suite: "./test/activation_suites", Test: "TestMutation_ActivationWithoutClaim",
		Oracle:  "stale-epoch counter; porcupine directory model (each alone catches it)",
		Oracles: []Oracle{StaleEpoch, LiveGauge, DirectoryModel},
	},
	{
		Switch: activation.PlantedAuthzBySender, Const: "activation.PlantedAuthzBySender",
		What:  "the parent-only check trusts the sender the message claims, not the live incarnation's session",
		Suite: "./test/activation_suites", Test: "TestMutation_AuthzBySender",
		Oracle:  "every ordered pair of a generated tree: delivered iff direct parent of record",
		Oracles: []Oracle{AuthzPairs},
	},
	{
		Switch: activation.PlantedFIFOByMapIteration, Const: "activation.PlantedFIFOByMapIteration",
		What:  "the next turn is taken by ranging over a map of pending messages, not from the queue's head",
		Suite: "./test/activation_suites", Test: "TestMutation_FIFOByMapIteration",
		Oracle:  "porcupine FIFO model + turn order == acceptance order",
		Oracles: []Oracle{TurnOrder, FIFOModel},
	},
	{
		Switch: cluster.PlantedWriteWithoutEpoch, Const: "cluster.PlantedWriteWithoutEpoch",
		What:  "the cluster child writes with the session's current epoch read from the store, not its own: a stale Activation's writes are accepted",
		Suite: "./cluster", Test: "TestMutation_ClusterWriteWithoutEpoch",
		Oracle: "multi-process suite: one live Activation per session (serial log, unique epochs, epoch gauge); each message accepted once",
		// A stale Activation's accepted write shows as either: a turn it runs
		// beside the current one's (the serial log), or a retried followup both
		// of them accepted (each message accepted once) — which one a run sees
		// first depends on where the paused member's Activations were.
		Oracles: []Oracle{ClusterOneActivation, ClusterOnce},
	},
	{
		Switch: cluster.PlantedRetryReaccepted, Const: "cluster.PlantedRetryReaccepted",
		What:  "a hedged or retried followup whose message id the child already accepted is accepted again",
		Suite: "./cluster", Test: "TestMutation_ClusterRetryReaccepted",
		Oracle:  "multi-process suite: each message accepted once",
		Oracles: []Oracle{ClusterOnce},
	},
	{
		Switch: cluster.PlantedRestoreByID, Const: "cluster.PlantedRestoreByID",
		What:  "on activation the unstarted messages are queued by message id, not in acceptance order",
		Suite: "./cluster", Test: "TestMutation_ClusterRestoreByID",
		Oracle:  "multi-process suite: porcupine FIFO model",
		Oracles: []Oracle{ClusterFIFO},
	},
}

// Lookup returns the catalogue's entry for a switch name.
func Lookup(name string) (Bug, bool) {
	for _, b := range Catalogue {
		if b.Switch == name {
			return b, true
		}
	}
	return Bug{}, false
}

// Result is what Check found.
type Result struct {
	Runs, Caught int
	First        []string // per caught run, the first failure the suite reported
}

// Check is the mutation check of the planted bug switch: for each of runs paired
// runs, suite with nothing planted must pass, and suite with the bug planted must
// fail by one of the bug's named oracles (Bug.Oracles, reported through
// Oracle.TB or Errorf): a planted run that fails otherwise — a timeout, a setup
// error, another check — is not a catch. Both runs get the same budgets. It fails
// t otherwise, and logs "caught k of n runs" with the first violation of a named
// oracle in each caught run.
func Check(t testing.TB, switchName string, runs int, suite Suite) Result {
	t.Helper()
	bug, ok := Lookup(switchName)
	if !ok {
		t.Fatalf("planted bug %q is not in the mutation catalogue", switchName)
	}
	res := Result{Runs: runs}
	named := func(o Oracle) bool { return slices.Contains(bug.Oracles, o) }
	for i := range runs {
		if clean := Run(t, func(tb testing.TB) { suite(tb, i, "") }); clean.Failed {
			t.Errorf("run %d fails with nothing planted, so a catch would prove nothing:\n%s", i, clean.Report())
			continue
		}
		planted := Run(t, func(tb testing.TB) {
			// Restored by the first cleanup registered, so last: after those of any
			// injector the suite installs inside (fault's rule 5 keeps the bug planted).
			tb.Cleanup(fault.Install(fault.New(uint64(i), fault.Plant(switchName))))
			suite(tb, i, switchName)
		})
		if !planted.Failed {
			t.Errorf("run %d: the suite passed with %q planted (%s): not caught", i, switchName, bug.What)
			continue
		}
		k := slices.IndexFunc(planted.Fired, func(f Firing) bool { return named(f.Oracle) })
		if k < 0 {
			t.Errorf("run %d: the suite failed with %q planted, but none of its oracles (%s) fired: not caught:\n%s",
				i, switchName, oracleList(bug.Oracles), planted.Report())
			continue
		}
		first := "(failed without a message)"
		for _, f := range planted.Fired[k:] {
			if named(f.Oracle) && f.Msg != "" {
				first = "oracle " + string(f.Oracle) + ": " + firstLine(f.Msg)
				break
			}
		}
		res.Caught++
		res.First = append(res.First, first)
		t.Logf("run %d: %s caught: %s", i, switchName, first)
	}
	t.Logf("mutation %s: caught %d of %d runs by %s (%s)", switchName, res.Caught, res.Runs, bug.Suite, bug.Oracle)
	return res
}

func oracleList(list []Oracle) string {
	names := make([]string, len(list))
	for i, o := range list {
		names[i] = string(o)
	}
	return strings.Join(names, "; ")
}
