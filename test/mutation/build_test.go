package mutation_test

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Tag is the build tag that compiles the planted bugs in.
const Tag = "troupe_mutation"

// plantedFiles are the files that hold the planted bugs, by package.
var plantedFiles = map[string]string{
	"github.com/troupe-rt/troupe/actors/job":        "planted.go",
	"github.com/troupe-rt/troupe/actors/registry":   "planted.go",
	"github.com/troupe-rt/troupe/actors/activation": "planted.go",
	"github.com/troupe-rt/troupe/cluster":           "planted.go",
}

// goCmd runs the go command in the module root and returns its stdout.
func goCmd(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("go")
	require.NoError(t, err, "the build check needs the go command")
	cmd := exec.Command(bin, args...)
	cmd.Dir = moduleRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go %s: %s", strings.Join(args, " "), stderr.String())
	return string(out)
}

// goFiles returns each runtime package's GoFiles in the build with tags.
func goFiles(t *testing.T, tags ...string) map[string][]string {
	t.Helper()
	args := []string{"list", "-f", "{{.ImportPath}} {{join .GoFiles \" \"}}"}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	out := map[string][]string{}
	for line := range strings.Lines(goCmd(t, append(args, "./actors/...", "./internal/...", "./cluster/...")...)) {
		f := strings.Fields(line)
		out[f[0]] = f[1:]
	}
	return out
}

var plantedSymbol = regexp.MustCompile(`(?i)planted`)

// plantedSymbols builds cmd/demo (which links every runtime package) with tags
// and returns the symbols of the binary whose names mention a planted bug.
func plantedSymbols(t *testing.T, tags ...string) []string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "demo")
	args := []string{"build", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	goCmd(t, append(args, "./cmd/demo")...)
	var found []string
	for line := range strings.Lines(goCmd(t, "tool", "nm", bin)) {
		if f := strings.Fields(line); len(f) >= 3 && plantedSymbol.MatchString(f[len(f)-1]) {
			found = append(found, f[len(f)-1])
		}
	}
	return found
}

// TestDefaultBuildHasNoPlantedCode: without the tag no planted.go is compiled,
// and a binary linking the whole runtime has no symbol of a planted bug (the
// no-op hooks inline away); with the tag the files are compiled and the symbols
// are there, so the check sees what it looks for.
func TestDefaultBuildHasNoPlantedCode(t *testing.T) {
	statSources(t)
	plain, tagged := goFiles(t), goFiles(t, Tag)
	for pkg, file := range plantedFiles {
		require.NotContains(t, plain[pkg], file, "%s compiles %s without -tags %s", pkg, file, Tag)
		require.Contains(t, plain[pkg], "planted_off.go", "%s: the no-op twin", pkg)
		require.Contains(t, tagged[pkg], file, "%s: -tags %s does not compile %s", pkg, Tag, file)
		require.NotContains(t, tagged[pkg], "planted_off.go", "%s: both twins under -tags %s", pkg, Tag)
	}
	for pkg, files := range plain {
		require.False(t, slices.ContainsFunc(files, func(f string) bool { return f == "planted.go" }),
			"%s compiles a planted.go in the default build", pkg)
	}

	require.Empty(t, plantedSymbols(t), "symbols of planted code in a default build of cmd/demo")
	syms := plantedSymbols(t, Tag)
	for _, want := range []string{"job.plantedDeliverer", "registry.(*registryActor).plantedAnnounce",
		"activation.(*directoryActor).plantedResumeCold", "cluster.(*grain).plantedWriteEpoch"} {
		require.True(t, slices.ContainsFunc(syms, func(s string) bool { return strings.HasSuffix(s, want) }),
			"-tags %s build lacks %s (the check would see nothing): %v", Tag, want, syms)
	}
}
