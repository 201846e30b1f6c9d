// Package layering keeps the house's layers true: every package of the module has
// a layer, and a package imports only packages of its own layer or below (Go
// itself forbids cycles within a layer). The layers, lowest first, are the table
// in layers; a new package must be added there, or this test fails. The check
// reads `go list` of the default build and of the troupe_mutation build (whose
// planted-bug files have imports of their own). Only non-test imports count: a
// package's external tests (package x_test) are test support, at the top.
package layering

import (
	"bytes"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	module     = "github.com/troupe-rt/troupe"
	moduleRoot = "../.."
)

// layer is one layer of the house: the packages in it, by path from the module
// root ("" is the root package, the facade; a trailing "/" is every package below).
type layer struct {
	name string
	pkgs []string
}

// layers is the house, lowest first. tools (the tool pipeline's types) and
// subagent (the subagent seam) sit above the core actors and below the
// continuation manager, which runs subagent turns; the tool and producer
// implementations build on all of those; the facade wires them; the surfaces and
// test support use the facade.
var layers = []layer{
	{"protocol", []string{"messages", "internal/fault", "internal/deliver", "internal/userauth", "internal/mailbox"}},
	{"foundations", []string{"scope", "session", "session/postgres", "supervision"}},
	{"core actors", []string{"actors/owner", "actors/job", "actors/registry", "actors/controller"}},
	{"seams", []string{"tools", "subagent"}},
	{"continuation manager", []string{"actors/activation"}},
	// workflow: the workflow engine; tools/workflowtool (its model tool) builds on it
	// (docs/WORKFLOW.md); cluster: the scale-out engine
	{"producers and tools", []string{"producers/", "tools/", "workflow", "tools/workflowtool", "subagent/acp", "cluster", "cluster/"}},
	{"facade", []string{""}},
	{"surfaces and test support", []string{"cmd/", "interop/", "web", "web/", "troupetest", "harness", "test/", "session/storetest", "session/postgres/pgtest", "workflow/workflowtest"}},
}

// rank returns the layer of the package at rel (path from the module root): the
// layer of its exact entry, else of its longest prefix entry ("tools" is a seam,
// "tools/jobtools" is under "tools/").
func rank(rel string) (int, bool) {
	at, best := -1, -1
	for i, l := range layers {
		for _, p := range l.pkgs {
			score := -1
			switch {
			case p == rel:
				score = 1 << 20
			case strings.HasSuffix(p, "/") && strings.HasPrefix(rel, p):
				score = len(p)
			}
			if score > best {
				at, best = i, score
			}
		}
	}
	return at, at >= 0
}

// pkg is one package as go list reports it.
type pkg struct {
	path    string   // import path
	imports []string // direct imports
	deps    []string // every transitive dependency
	dir     string
	files   []string // GoFiles of this build
}

func rel(path string) (string, bool) {
	if path == module {
		return "", true
	}
	r, ok := strings.CutPrefix(path, module+"/")
	return r, ok
}

// violations returns every import of pkgs that points to a higher layer, and
// every package of the module that has no layer.
func violations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		from, _ := rel(p.path)
		rf, ok := rank(from)
		if !ok {
			out = append(out, fmt.Sprintf("%s has no layer: add it to test/layering's table", p.path))
			continue
		}
		for _, imp := range p.imports {
			to, inModule := rel(imp)
			if !inModule {
				continue
			}
			rt, ok := rank(to)
			if !ok {
				out = append(out, fmt.Sprintf("%s has no layer: add it to test/layering's table", imp))
				continue
			}
			if rt > rf {
				out = append(out, fmt.Sprintf("%s (layer %q) imports %s (layer %q, above it)",
					p.path, layers[rf].name, imp, layers[rt].name))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// list runs go list over the module with the build tags (none: the default build).
func list(t *testing.T, tags string) []pkg {
	t.Helper()
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the layering check needs the go command")
	args := []string{"list", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .Deps \" \"}}\t{{.Dir}}\t{{join .GoFiles \" \"}}"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command(goBin, append(args, "./...")...)
	cmd.Dir = moduleRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	var pkgs []pkg
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimRight(line, "\n"), "\t")
		require.Len(t, f, 5, "go list line %q", line)
		pkgs = append(pkgs, pkg{path: f[0], imports: strings.Fields(f[1]), deps: strings.Fields(f[2]),
			dir: f[3], files: strings.Fields(f[4])})
	}
	require.NotEmpty(t, pkgs)
	readSources(t)
	return pkgs
}

// readSources opens every directory and stats every .go file of the module, so
// that go test's cache, which records the files a test opens (not those its go
// list subprocess reads), reruns this test when an import changes.
func readSources(t *testing.T) {
	t.Helper()
	err := filepath.WalkDir(moduleRoot, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != moduleRoot && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".go") || d.Name() == "go.mod") {
			_, err = os.Stat(path)
		}
		return err
	})
	require.NoError(t, err)
}

var builds = []string{"", "troupe_mutation"}

// TestNoUpwardImports: in both builds, no package imports a layer above its own.
func TestNoUpwardImports(t *testing.T) {
	for _, tags := range builds {
		t.Run("tags="+tags, func(t *testing.T) {
			require.Empty(t, violations(list(t, tags)), "imports that point up the layers")
		})
	}
}

// TestNothingBelowTheFacadeDependsOnIt is issue 14's acceptance in its own
// words: go list -deps of every package below the facade lacks the root package.
func TestNothingBelowTheFacadeDependsOnIt(t *testing.T) {
	facade, _ := rank("")
	for _, tags := range builds {
		below := 0
		for _, p := range list(t, tags) {
			r, _ := rel(p.path)
			if l, ok := rank(r); ok && l < facade {
				below++
				require.False(t, slices.Contains(p.deps, module), "%s (tags %q): go list -deps contains the facade %s", p.path, tags, module)
			}
		}
		require.GreaterOrEqual(t, below, 15, "the packages below the facade were not listed")
	}
}

// TestViolationsFindsUpwardImports: the check itself flags an upward import, an
// import of the facade from an actor, and a package with no layer; it accepts a
// downward and a same-layer import and ignores modules outside this one.
func TestViolationsFindsUpwardImports(t *testing.T) {
	ok := []pkg{
		{path: module + "/actors/registry", imports: []string{module + "/actors/job", module + "/messages", "fmt"}},
		{path: module, imports: []string{module + "/actors/activation"}},
		{path: module + "/tools/jobtools", imports: []string{module + "/tools", module + "/actors/registry"}},
	}
	require.Empty(t, violations(ok))
	bad := []pkg{
		{path: module + "/actors/activation", imports: []string{module}},
		{path: module + "/messages", imports: []string{module + "/scope"}},
		{path: module + "/subagent", imports: []string{module + "/actors/activation"}},
		{path: module + "/newpkg"},
	}
	require.Equal(t, []string{
		module + "/actors/activation (layer \"continuation manager\") imports " + module + " (layer \"facade\", above it)",
		module + "/messages (layer \"protocol\") imports " + module + "/scope (layer \"foundations\", above it)",
		module + "/newpkg has no layer: add it to test/layering's table",
		module + "/subagent (layer \"seams\") imports " + module + "/actors/activation (layer \"continuation manager\", above it)",
	}, violations(bad))
	for path, want := range map[string]string{"tools": "seams", "tools/jobtools": "producers and tools",
		"test/settle": "surfaces and test support", "": "facade", "actors/activation": "continuation manager"} {
		r, ok := rank(path)
		require.True(t, ok, path)
		require.Equal(t, want, layers[r].name, path)
	}
}

// TestJobKnowsItsOwnerOnlyInItsSpec keeps the job → owner edge as narrow as
// package job's doc says: only spec.go (the start request's Owner field, read by
// the registry) imports actors/owner; the job actor never addresses its owner.
func TestJobKnowsItsOwnerOnlyInItsSpec(t *testing.T) {
	for _, tags := range builds {
		for _, p := range list(t, tags) {
			if p.path != module+"/actors/job" {
				continue
			}
			var importers []string
			for _, name := range p.files {
				f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.dir, name), nil, parser.ImportsOnly)
				require.NoError(t, err)
				for _, imp := range f.Imports {
					if path, _ := strconv.Unquote(imp.Path.Value); path == module+"/actors/owner" {
						importers = append(importers, name)
					}
				}
			}
			require.Equal(t, []string{"spec.go"}, importers, "files of actors/job (tags %q) that import actors/owner", tags)
		}
	}
}
