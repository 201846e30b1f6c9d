package troupe_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// contract is what docs/SPEC.md offers to cite: its numbered sections (headings
// "## 2. …" and "### 2.7 …"), the numbered rules of §1.3, and the numbered
// acceptance cases of §8.
type contract struct {
	sections map[string]bool
	rules    map[int]bool
	cases    map[int]bool
}

var (
	headingRe = regexp.MustCompile(`^#{2,4} ([0-9]+(?:\.[0-9]+)*)\.? `)
	itemRe    = regexp.MustCompile(`^([0-9]+)\. `)
)

func readContract(t *testing.T, path string) contract {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err, "the behaviour contract is docs/SPEC.md")
	c := contract{sections: map[string]bool{}, rules: map[int]bool{}, cases: map[int]bool{}}
	section := ""
	for line := range strings.Lines(string(raw)) {
		line = strings.TrimRight(line, "\n")
		if m := headingRe.FindStringSubmatch(line); m != nil {
			section = m[1]
			c.sections[section] = true
			continue
		}
		if strings.HasPrefix(line, "#") {
			section = "" // an unnumbered heading
			continue
		}
		m := itemRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		switch {
		case section == "1.3":
			c.rules[n] = true
		case strings.HasPrefix(section, "8.") && strings.Contains(line, "["):
			c.cases[n] = true // "79. [S3] Given …"
		}
	}
	return c
}

var (
	// §2.7, §3 — any § in a .go file cites SPEC (no other document is cited by §).
	sectionRe = regexp.MustCompile(`§([0-9]+(?:\.[0-9]+)*)`)
	// §1.3 rule 23, §1.3 rules 3–5, SPEC §1.3 rules 35–38
	ruleRe = regexp.MustCompile(`§1\.3,? rules? ([0-9]+)(?:\s*[–-]\s*([0-9]+))?`)
	// case 146, cases 70–78 (in // comments only: Go has its own `case 1:`)
	caseRe = regexp.MustCompile(`\b[Cc]ases? ([0-9]+)(?:\s*[–-]\s*([0-9]+))?`)
	// func TestSpec079_…
	specTestRe = regexp.MustCompile(`func TestSpec([0-9]+)_`)
)

// citation is one reference to the contract, where it was found.
type citation struct {
	where, what string
}

// citations collects every reference to SPEC in the module's .go files.
func citations(t *testing.T, root string) (sections, rules, cases []citation) {
	t.Helper()
	add := func(list *[]citation, where string, re *regexp.Regexp, text string, rangeOK bool) {
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			*list = append(*list, citation{where, m[1]})
			if rangeOK && m[2] != "" {
				*list = append(*list, citation{where, m[2]})
			}
		}
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := string(src)
		add(&sections, path, sectionRe, text, false)
		add(&rules, path, ruleRe, text, true)
		add(&cases, path, specTestRe, text, false)
		for line := range strings.Lines(text) {
			if i := strings.Index(line, "//"); i >= 0 {
				add(&cases, path, caseRe, line[i:], true) // a line comment: not Go's `case 1:`
			}
		}
		return nil
	})
	require.NoError(t, err)
	return sections, rules, cases
}

// unresolved lists the citations under root that spec cannot resolve, sorted.
func unresolved(t *testing.T, spec contract, root string) []string {
	t.Helper()
	sections, rules, cases := citations(t, root)
	require.NotEmpty(t, sections, "no SPEC section cited under %s: is the scan broken?", root)
	missing := []string{}
	for _, c := range sections {
		if !spec.sections[c.what] {
			missing = append(missing, c.where+": §"+c.what+" (no such heading)")
		}
	}
	for _, c := range rules {
		if n, _ := strconv.Atoi(c.what); !spec.rules[n] {
			missing = append(missing, c.where+": §1.3 rule "+c.what+" (no such rule)")
		}
	}
	for _, c := range cases {
		if n, _ := strconv.Atoi(c.what); !spec.cases[n] {
			missing = append(missing, c.where+": case "+c.what+" (no such case in §8)")
		}
	}
	slices.Sort(missing)
	return slices.Compact(missing)
}

// Every section, §1.3 rule and acceptance case the code cites exists in
// docs/SPEC.md, so a reader can follow each citation.
func TestContractCitationsResolve(t *testing.T) {
	spec := readContract(t, filepath.Join("docs", "SPEC.md"))
	sections, rules, cases := citations(t, ".")
	require.Greater(t, len(sections), 100, "the code cites SPEC sections")
	require.NotEmpty(t, rules, "the code cites §1.3 rules")
	require.Greater(t, len(cases), 100, "the code cites cases (TestSpecNNN_…)")
	require.Empty(t, unresolved(t, spec, "."), "citations docs/SPEC.md cannot resolve")
}

// The check reads the contract's numbering and reports a citation of a section,
// rule or case that does not exist.
func TestContractCitationCheckCatchesDanglingCitations(t *testing.T) {
	spec := readContract(t, filepath.Join("docs", "SPEC.md"))
	require.True(t, spec.sections["2"] && spec.sections["2.7"] && spec.sections["3.5"] && spec.sections["8.2"])
	require.False(t, spec.sections["2.15"], "SPEC has no section 2.15")
	require.True(t, spec.rules[1] && spec.rules[22] && spec.rules[42])
	require.False(t, spec.rules[43], "§1.3 has 42 rules")
	require.True(t, spec.cases[1] && spec.cases[79] && spec.cases[183])
	require.False(t, spec.cases[6], "case 6 does not apply and is not listed")

	dir := t.TempDir()
	file := filepath.Join(dir, "p.go")
	// Written with \u00a7 and a split name, so that this file cites nothing itself.
	src := "package p\n\n// SPEC \u00a72.7 and \u00a72.15; \u00a71.3 rules 41–43 (cases 78–80).\n" +
		"func TestSpec" + "006_Gone() {}\n\nfunc f(n int) {\n\tswitch n {\n\tcase 6:\n\t}\n}\n"
	require.NoError(t, os.WriteFile(file, []byte(src), 0o644))
	require.Equal(t, []string{
		file + ": case 006 (no such case in \u00a78)",
		file + ": \u00a71.3 rule 43 (no such rule)",
		file + ": \u00a72.15 (no such heading)",
	}, unresolved(t, spec, dir))
}
