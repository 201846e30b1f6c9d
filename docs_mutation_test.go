//go:build troupe_mutation

package troupe_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/test/mutation"
)

// docs/TESTING.md's mutation table lists every planted bug of the catalogue with
// its switch and its test.
func TestTestingGuideListsEveryPlantedBug(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("docs", "TESTING.md"))
	require.NoError(t, err)
	guide := string(raw)
	require.NotEmpty(t, mutation.Catalogue)
	for _, b := range mutation.Catalogue {
		row := ""
		for line := range strings.Lines(guide) {
			if strings.Contains(line, "| `"+b.Switch+"` |") {
				row = line
			}
		}
		require.NotEmpty(t, row, "docs/TESTING.md has a row for %s", b.Switch)
		require.Contains(t, row, "`"+b.Test+"`", b.Switch)
		require.Contains(t, row, "`"+strings.TrimPrefix(b.Suite, "./")+"`", b.Switch)
	}
}
