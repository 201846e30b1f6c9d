package layering

import (
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// docs/ARCHITECTURE.md describes the house this package checks; the tests below
// keep the page true: its layer table is layers, its import list is go list's,
// and every file it names exists.

var update = flag.Bool("update", false, "rewrite docs/ARCHITECTURE.md's import list from go list")

var architecture = filepath.Join(moduleRoot, "docs", "ARCHITECTURE.md")

const (
	importsBegin = "<!-- imports:begin -->"
	importsEnd   = "<!-- imports:end -->"
)

var ticked = regexp.MustCompile("`([^`]+)`")

// docPackage is how the page writes a layers entry: the root package is ".".
func docPackage(entry string) string {
	if entry == "" {
		return "."
	}
	return entry
}

// tableRows returns the cells of every row of the first Markdown table under the
// heading line, header and separator rows excluded.
func tableRows(t *testing.T, doc, heading string) [][]string {
	t.Helper()
	_, after, ok := strings.Cut(doc, "\n"+heading+"\n")
	require.True(t, ok, "docs/ARCHITECTURE.md has no %q", heading)
	var rows [][]string
	inTable := false
	for line := range strings.Lines(after) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			if strings.HasPrefix(line, "#") {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	require.GreaterOrEqual(t, len(rows), 3, "docs/ARCHITECTURE.md's table under %q", heading)
	return rows[2:]
}

func readArchitecture(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(architecture)
	require.NoError(t, err, "the house in one page is docs/ARCHITECTURE.md")
	return string(raw)
}

// TestArchitectureListsTheLayers: the page's layer table is layers, row for row:
// the same names in the same order with the same packages.
func TestArchitectureListsTheLayers(t *testing.T) {
	var want, got []string
	for i, l := range layers {
		pkgs := make([]string, len(l.pkgs))
		for j, p := range l.pkgs {
			pkgs[j] = "`" + docPackage(p) + "`"
		}
		want = append(want, fmt.Sprintf("| %d | %s | %s |", i+1, l.name, strings.Join(pkgs, ", ")))
	}
	for _, cells := range tableRows(t, readArchitecture(t), "## Layers") {
		require.GreaterOrEqual(t, len(cells), 3, "a layer row has a number, a name and packages: %q", cells)
		var pkgs []string
		for _, m := range ticked.FindAllStringSubmatch(cells[2], -1) {
			pkgs = append(pkgs, "`"+m[1]+"`")
		}
		got = append(got, fmt.Sprintf("| %s | %s | %s |", cells[0], cells[1], strings.Join(pkgs, ", ")))
	}
	require.Equal(t, want, got, "docs/ARCHITECTURE.md's layer table (first three columns) must be test/layering's layers")
}

// importList renders the module-internal imports of every package outside test/,
// by layer then path, one line each.
func importList(pkgs []pkg) string {
	type line struct {
		layer int
		from  string
		to    []string
	}
	var lines []line
	for _, p := range pkgs {
		from, _ := rel(p.path)
		if strings.HasPrefix(from, "test/") {
			continue
		}
		r, _ := rank(from)
		var to []string
		for _, imp := range p.imports {
			if t, ok := rel(imp); ok {
				to = append(to, docPackage(t))
			}
		}
		slices.Sort(to)
		lines = append(lines, line{r, docPackage(from), to})
	}
	slices.SortFunc(lines, func(a, b line) int {
		if a.layer != b.layer {
			return a.layer - b.layer
		}
		return strings.Compare(a.from, b.from)
	})
	width := 0
	for _, l := range lines {
		width = max(width, len(l.from))
	}
	var b strings.Builder
	b.WriteString("```text\n")
	for _, l := range lines {
		to := "(nothing of the module)"
		if len(l.to) > 0 {
			to = strings.Join(l.to, ", ")
		}
		fmt.Fprintf(&b, "%-*s  → %s\n", width, l.from, to)
	}
	b.WriteString("```\n")
	return b.String()
}

// TestArchitectureImports: the page's import list is what go list reports for the
// default build; -update rewrites it.
func TestArchitectureImports(t *testing.T) {
	doc := readArchitecture(t)
	head, rest, ok := strings.Cut(doc, importsBegin+"\n")
	require.True(t, ok, "docs/ARCHITECTURE.md has %s", importsBegin)
	block, tail, ok := strings.Cut(rest, importsEnd)
	require.True(t, ok, "docs/ARCHITECTURE.md has %s", importsEnd)
	want := importList(list(t, ""))
	if *update {
		require.NoError(t, os.WriteFile(architecture, []byte(head+importsBegin+"\n"+want+importsEnd+tail), 0o644))
		return
	}
	require.Equal(t, want, block,
		"docs/ARCHITECTURE.md's import list is stale: go test ./test/layering -run TestArchitectureImports -update")
}

// TestImportListRendersTheGraph: the list has one line per package, by layer, with
// its module imports sorted and the root written ".".
func TestImportListRendersTheGraph(t *testing.T) {
	got := importList([]pkg{
		{path: module, imports: []string{module + "/scope", module + "/messages", "fmt"}},
		{path: module + "/test/spec", imports: []string{module}},
		{path: module + "/messages"},
		{path: module + "/scope", imports: []string{module + "/messages"}},
	})
	require.Equal(t, "```text\n"+
		"messages  → (nothing of the module)\n"+
		"scope     → messages\n"+
		".         → messages, scope\n"+
		"```\n", got)
}

var goFile = regexp.MustCompile(`^[A-Za-z0-9_./-]+\.go$`)

// namedFiles returns every .go file the page names, as a path from the module
// root. A name with a slash is a path from the module root; a bare file name is in
// the directory of the last path named before it on the same line (an actor row
// starts in its package, column one), or else in the root package.
func namedFiles(t *testing.T, doc string) []string {
	t.Helper()
	var out []string
	for line := range strings.Lines(doc) {
		dir := ""
		for _, m := range ticked.FindAllStringSubmatch(line, -1) {
			tok := m[1]
			if d, err := os.Stat(filepath.Join(moduleRoot, tok)); dir == "" && err == nil && d.IsDir() && strings.Contains(tok, "/") {
				dir = tok
				continue
			}
			if !goFile.MatchString(tok) {
				continue
			}
			if strings.Contains(tok, "/") {
				dir = path.Dir(tok)
				out = append(out, tok)
				continue
			}
			if dir == "" {
				out = append(out, tok) // a file of the root package (troupe.go)
				continue
			}
			out = append(out, path.Join(dir, tok))
		}
	}
	return out
}

// TestArchitectureNamesRealFiles: every file the page names exists, and the actors
// table names every production file of actors/ (planted bugs, their twins and the
// package docs excepted), so a reader finds each concern from the table.
func TestArchitectureNamesRealFiles(t *testing.T) {
	doc := readArchitecture(t)
	named := namedFiles(t, doc)
	require.NotEmpty(t, named)
	for _, f := range named {
		_, err := os.Stat(filepath.Join(moduleRoot, f))
		require.NoError(t, err, "docs/ARCHITECTURE.md names %s", f)
	}
	_, actorsTable, _ := strings.Cut(doc, "\n## Actors\n")
	actorsTable, _, _ = strings.Cut(actorsTable, "\n## ")
	inTable := namedFiles(t, actorsTable)
	prod, err := filepath.Glob(filepath.Join(moduleRoot, "actors", "*", "*.go"))
	require.NoError(t, err)
	require.NotEmpty(t, prod)
	var missing []string
	for _, f := range prod {
		name := filepath.Base(f)
		if strings.HasSuffix(name, "_test.go") || name == "doc.go" || strings.HasPrefix(name, "planted") {
			continue
		}
		r, err := filepath.Rel(moduleRoot, f)
		require.NoError(t, err)
		if r = filepath.ToSlash(r); !slices.Contains(inTable, r) {
			missing = append(missing, r)
		}
	}
	require.Empty(t, missing, "files of actors/ the actors table of docs/ARCHITECTURE.md does not name")
}

// TestReadmeLinksTheArchitecture: README and docs/ARCHITECTURE.md describe one
// house — the actors table lives on the page, and README's Actors section and
// its Layout point to it.
func TestReadmeLinksTheArchitecture(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(moduleRoot, "README.md"))
	require.NoError(t, err)
	readme := string(raw)
	_, actors, ok := strings.Cut(readme, "\n## Actors\n")
	require.True(t, ok, "README has an Actors section")
	actors, _, _ = strings.Cut(actors, "\n## ")
	require.Contains(t, actors, "(docs/ARCHITECTURE.md)", "README's Actors section links the actors table")
	require.NotContains(t, actors, "| --- |", "the actors table lives in docs/ARCHITECTURE.md only")
	require.Contains(t, readArchitecture(t), "\n## Actors\n")
}
