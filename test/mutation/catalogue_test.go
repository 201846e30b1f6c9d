//go:build troupe_mutation

// The reliability table: TESTING.md's mutation check, one row per planted bug of
// mutation.Catalogue. Each row's test runs its suite's own code in paired runs:
// run i without the bug must pass, and the same run i (same seed) with the bug
// planted must fail by one of the bug's named oracles (Bug.Oracles; a timeout or
// any other failure is not a catch), with the same budgets; "caught" counts the
// planted runs that did, and every one must. The default runs are the ones
// `go test -race -tags troupe_mutation ./test/...` makes; the figures in brackets
// are one measurement with TROUPE_MUTATION_RUNS=30 (2 vCPUs, -race), with the
// share of the suite's schedules that catch the bug where a run is several.
//
//	bug                       | switch (fault.Plant)     | suite: oracle                                          | caught (default runs) [30 runs]          | command
//	check-then-act settlement | check-then-act-settle    | test/settle: porcupine settlement model + counters     | 3 of 3, ≤40 schedules each [30 of 30; 30 of 198 schedules] | go test -race -tags troupe_mutation -run TestMutation_CheckThenActSettle ./test/settle/
//	double slot release       | double-slot-release      | test/settle: admission probe after the job actor stops | 3 of 3, ≤20 schedules each [30 of 30; 30 of 58 schedules]  | go test -race -tags troupe_mutation -run TestMutation_DoubleSlotRelease ./test/settle/
//	notice before commit      | notice-before-commit     | test/notices: predicted snapshot/notice, notice after commit, settled == delivered + claimed | 4 of 4, 20 rounds each [30 of 30] | go test -race -tags troupe_mutation -run TestMutation_NoticeBeforeCommit ./test/notices/
//	activation without claim  | activation-without-claim | test/activation_suites: stale-epoch counter; porcupine directory model | 4 of 4, 1 storm each [30 of 30; 30 of 30 schedules] | go test -race -tags troupe_mutation -run TestMutation_ActivationWithoutClaim ./test/activation_suites/
//	authorisation by sender   | authz-by-sender          | test/activation_suites: every ordered pair of a generated tree | 4 of 4, 1 tree each [30 of 30; 30 of 30 schedules] | go test -race -tags troupe_mutation -run TestMutation_AuthzBySender ./test/activation_suites/
//	FIFO by map iteration     | fifo-by-map-iteration    | test/activation_suites: turn order == acceptance order; porcupine FIFO model | 4 of 4, ≤8 schedules each [30 of 30; 30 of 33 schedules] | go test -race -tags troupe_mutation -run TestMutation_FIFOByMapIteration ./test/activation_suites/
//
// All of them: go test -race -tags troupe_mutation -run TestMutation ./test/...
// (≈ 40 s of test time under -race on 2 vCPUs; a planted run that loses a reply
// waits out the same 30 s budget as a clean one, and that schedule is no catch).
// This package checks the catalogue itself: every Planted… constant in actors/ is
// listed, and each listed test exists and names it.
package mutation_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/internal/fault"
	"github.com/troupe-rt/troupe/test/mutation"
)

// TestCatalogueListsEveryPlantedBug: every Planted… string constant in the runtime
// (actors/, cluster/) is in the catalogue with its value, and every catalogue entry names
// one: a bug planted without a mutation test, or a stale entry, fails here.
func TestCatalogueListsEveryPlantedBug(t *testing.T) {
	inSource := map[string]string{} // "pkg.Name" → value
	for _, root := range []string{"actors", "cluster"} {
		err := filepath.WalkDir(filepath.Join(moduleRoot, root), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			for name, value := range plantedConsts(f) {
				inSource[f.Name.Name+"."+name] = value
			}
			return nil
		})
		require.NoError(t, err)
	}
	require.GreaterOrEqual(t, len(mutation.Catalogue), 6, "TESTING.md's catalogue has at least six bugs")

	listed := map[string]string{}
	switches := map[string]bool{}
	for _, b := range mutation.Catalogue {
		require.False(t, switches[b.Switch], "switch %q listed twice", b.Switch)
		switches[b.Switch] = true
		listed[b.Const] = b.Switch
		require.NotEmpty(t, b.What, b.Const)
		require.NotEmpty(t, b.Oracle, b.Const)
		require.NotEmpty(t, b.Oracles, "%s names no oracle that catches it", b.Const)
		got, ok := mutation.Lookup(b.Switch)
		require.True(t, ok)
		require.Equal(t, b, got)
	}
	require.Equal(t, inSource, listed, "Planted… constants in actors/ and cluster/ vs the catalogue (name → switch)")
	_, ok := mutation.Lookup("no-such-bug")
	require.False(t, ok)
}

// plantedConsts returns the string constants of f whose names start with Planted.
func plantedConsts(f *ast.File) map[string]string {
	out := map[string]string{}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Planted") || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					out[name.Name], _ = strconv.Unquote(lit.Value)
				}
			}
		}
	}
	return out
}

// TestCatalogueTestsExist: each bug's mutation test is a Test function of its
// suite's package that names the bug's constant.
func TestCatalogueTestsExist(t *testing.T) {
	for _, b := range mutation.Catalogue {
		dir := filepath.Join(moduleRoot, filepath.FromSlash(strings.TrimPrefix(b.Suite, "./")))
		fn := findTest(t, dir, b.Test)
		require.NotNil(t, fn, "%s: no func %s in %s", b.Switch, b.Test, b.Suite)
		pkg, name, _ := strings.Cut(b.Const, ".")
		named := false
		ast.Inspect(fn, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == name {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == pkg {
					named = true
				}
			}
			return !named
		})
		require.True(t, named, "%s.%s does not name %s", b.Suite, b.Test, b.Const)
	}
}

// findTest returns the declaration of the top-level func name in dir's test files.
func findTest(t *testing.T, dir, name string) *ast.FuncDecl {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no test files in %s", dir)
	for _, path := range files {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == name {
				return fn
			}
		}
	}
	return nil
}

// TestRunRecordsFailures: a suite body's failures are recorded, not reported; a
// FailNow ends the body there; cleanups run after it, last first.
func TestRunRecordsFailures(t *testing.T) {
	var order []string
	reached := false
	out := mutation.Run(t, func(tb testing.TB) {
		tb.Cleanup(func() { order = append(order, "first registered") })
		tb.Cleanup(func() { order = append(order, "second registered") })
		tb.Errorf("checked %d", 1)
		require.Equal(tb, 1, 2, "an oracle's check")
		reached = true
	})
	require.True(t, out.Failed)
	require.False(t, out.Skipped)
	require.False(t, reached, "FailNow did not end the body")
	require.Len(t, out.Failures, 2)
	require.Equal(t, "checked 1", out.Failures[0])
	require.Contains(t, out.Failures[1], "an oracle's check")
	require.Equal(t, []string{"second registered", "first registered"}, order)
	require.False(t, t.Failed(), "the recorded failures leaked into the test")

	out = mutation.Run(t, func(tb testing.TB) {
		tb.Cleanup(func() { tb.Fatal("in a cleanup") })
		tb.Log("a passing body")
	})
	require.True(t, out.Failed, "a cleanup's failure counts")
	require.Equal(t, []string{"in a cleanup"}, out.Failures)

	out = mutation.Run(t, func(tb testing.TB) { require.True(tb, tb.Name() == t.Name()) })
	require.False(t, out.Failed)
	require.Empty(t, out.Failures)

	out = mutation.Run(t, func(tb testing.TB) {
		tb.Skip("not here")
		tb.Error("unreachable")
	})
	require.True(t, out.Skipped)
	require.False(t, out.Failed)
}

// TestCheck: the check passes only when every planted run fails by one of the
// bug's named oracles and every clean run passes; the bug is planted for the
// suite even inside an injector the suite installs itself, and only during
// planted runs. A planted run that fails otherwise (a timeout, another check) or
// by another oracle is not a catch.
func TestCheck(t *testing.T) {
	bug := registry.PlantedDoubleSlotRelease
	oracle := mutation.SettleAdmission
	var plantedSeen []bool
	catching := func(tb testing.TB, run int, planted string) {
		tb.Cleanup(fault.Install(fault.New(uint64(run), fault.YieldPercent(10)))) // the suite's own noise
		plantedSeen = append(plantedSeen, fault.Planted(bug))
		if (planted != "") != fault.Planted(bug) {
			tb.Fatalf("run %d: told %q, fault.Planted says %v", run, planted, fault.Planted(bug))
		}
		if fault.Planted(bug) {
			tb.Logf("a plain failure before the oracle's does not hide it")
			oracle.TB(tb).Errorf("slot released twice")
		}
	}
	res := mutation.Check(t, bug, 3, catching)
	caught := "oracle " + string(oracle) + ": slot released twice"
	require.Equal(t, mutation.Result{Runs: 3, Caught: 3, First: []string{caught, caught, caught}}, res)
	require.Equal(t, []bool{false, true, false, true, false, true}, plantedSeen, "clean then planted, per run")
	require.False(t, fault.Active(), "the check left an injector installed")

	blind := func(testing.TB, int, string) {}
	out := mutation.Run(t, func(tb testing.TB) { mutation.Check(tb, bug, 2, blind) })
	require.True(t, out.Failed)
	require.Len(t, out.Failures, 2)
	require.Contains(t, out.Failures[0], "run 0: the suite passed with \"double-slot-release\" planted")

	// An oracle that fails without a message is still a catch.
	silent := func(tb testing.TB, _ int, planted string) {
		if planted != "" {
			oracle.TB(tb).FailNow()
		}
	}
	res = mutation.Check(t, bug, 1, silent)
	require.Equal(t, []string{"(failed without a message)"}, res.First)

	// Failing without an oracle — a timeout, a bare FailNow — or by an oracle the
	// bug does not name is not.
	for name, suite := range map[string]mutation.Suite{
		"timeout": func(tb testing.TB, _ int, planted string) {
			if planted != "" {
				tb.Fatalf("operations did not all return within 30s (a lost reply)")
			}
		},
		"bare FailNow": func(tb testing.TB, _ int, planted string) {
			if planted != "" {
				tb.FailNow()
			}
		},
		"another oracle": func(tb testing.TB, _ int, planted string) {
			if planted != "" {
				mutation.SettleModel.TB(tb).Errorf("not linearizable")
			}
		},
	} {
		out = mutation.Run(t, func(tb testing.TB) { mutation.Check(tb, bug, 1, suite) })
		require.True(t, out.Failed, name)
		require.Len(t, out.Failures, 1, name)
		require.Contains(t, out.Failures[0], "none of its oracles ("+string(oracle)+") fired: not caught", name)
	}

	flaky := func(tb testing.TB, run int, _ string) { oracle.TB(tb).Errorf("fails anyway") }
	out = mutation.Run(t, func(tb testing.TB) { mutation.Check(tb, bug, 1, flaky) })
	require.True(t, out.Failed)
	require.Contains(t, out.Failures[0], "run 0 fails with nothing planted")

	out = mutation.Run(t, func(tb testing.TB) { mutation.Check(tb, "no-such-bug", 1, catching) })
	require.True(t, out.Failed)
	require.Contains(t, out.Failures[0], `planted bug "no-such-bug" is not in the mutation catalogue`)
}

// TestOracleTB: failures through an oracle's TB are prefixed with its name and
// recorded as it firing, testify's included; Errorf fires each oracle it names;
// plain failures fire nothing.
func TestOracleTB(t *testing.T) {
	out := mutation.Run(t, func(tb testing.TB) {
		tb.Errorf("plain")
		mutation.Errorf(tb, nil, "plain too")
		mutation.Errorf(tb, []mutation.Oracle{mutation.SettleCommits, mutation.SettleModel}, "two at once")
		require.Equal(mutation.FIFOModel.TB(tb), 1, 2, "turns")
	})
	require.Equal(t, []string{"plain", "plain too"}, out.Failures[:2])
	require.Equal(t, "oracle "+string(mutation.SettleCommits)+"; "+string(mutation.SettleModel)+": two at once", out.Failures[2])
	require.True(t, strings.HasPrefix(out.Failures[3], "oracle "+string(mutation.FIFOModel)+": "), out.Failures[3])
	var fired []mutation.Oracle
	for _, f := range out.Fired {
		fired = append(fired, f.Oracle)
	}
	require.Equal(t, []mutation.Oracle{mutation.SettleCommits, mutation.SettleModel, mutation.FIFOModel, mutation.FIFOModel}, fired,
		"testify's Errorf then FailNow")
	require.Equal(t, "", out.Fired[3].Msg, "FailNow's firing has no message")
}

func TestRuns(t *testing.T) {
	t.Setenv(mutation.RunsEnv, "")
	require.Equal(t, 4, mutation.Runs(t, 4))
	t.Setenv(mutation.RunsEnv, "25")
	require.Equal(t, 25, mutation.Runs(t, 4))
	t.Setenv(mutation.RunsEnv, "zero")
	out := mutation.Run(t, func(tb testing.TB) { mutation.Runs(tb, 4) })
	require.True(t, out.Failed)
	require.Contains(t, out.Failures[0], "want a positive integer")
}

// TestSummary: Check logs one line per caught run.
func TestSummary(t *testing.T) {
	out := mutation.Run(t, func(tb testing.TB) { require.Equal(tb, "a b", "a c", "job %s", "x") })
	require.Equal(t, `Not equal: expected: "a b" actual : "a c" job x`, mutation.Summary(out.Failures[0]))
	require.Equal(t, "schedule 3 failed: - porcupine: not linearizable",
		mutation.Summary("schedule 3 failed:\n- porcupine: not linearizable\nhistory…"))
	require.Equal(t, "plain", mutation.Summary("plain\nmore"))
}
