package workflow_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every case of docs/WORKFLOW.md 6.9 (the tool) is a TestWorkflowWNN_ test in
// this package, and every TestWorkflowWNN_ test anywhere names a case the
// contract lists.
func TestWorkflowContractCasesAreTests(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "WORKFLOW.md"))
	require.NoError(t, err)
	text := string(doc)
	caseRe := regexp.MustCompile(`(?m)^W([0-9]+)\. `)
	all := map[string]bool{}
	for _, m := range caseRe.FindAllStringSubmatch(text, -1) {
		all[m[1]] = true
	}
	i := strings.Index(text, "### 6.9 The tool")
	j := strings.Index(text, "## 7.")
	require.True(t, i > 0 && j > i, "docs/WORKFLOW.md has WORKFLOW.md 6.9 and WORKFLOW.md 7")
	var tool []string
	for _, m := range caseRe.FindAllStringSubmatch(text[i:j], -1) {
		tool = append(tool, m[1])
	}
	require.Equal(t, []string{"49", "50", "51", "52", "54", "55", "56", "57", "59", "60", "61"}, tool)

	testRe := regexp.MustCompile(`func TestWorkflowW([0-9]+)_`)
	here := map[string]bool{}
	for _, dir := range []string{".", filepath.Join("..", "..", "workflow")} {
		files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
		require.NoError(t, err)
		for _, f := range files {
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			for _, m := range testRe.FindAllStringSubmatch(string(src), -1) {
				require.True(t, all[m[1]], "%s: TestWorkflowW%s names no case of docs/WORKFLOW.md", f, m[1])
				if dir == "." {
					here[m[1]] = true
				}
			}
		}
	}
	for _, n := range tool {
		require.True(t, here[n], "WORKFLOW.md 6.9's W%s has no TestWorkflowW%s_ test in test/workflow", n, n)
	}
}
