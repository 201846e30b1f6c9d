package mutation_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// moduleRoot is the repository root, from this package's directory.
const moduleRoot = "../.."

// statSources opens every directory and stats every .go file of the module, so
// that go test's cache, which records the files a test opens (not those its go
// subprocesses read), reruns a test that shells out to go when a source changes.
func statSources(t *testing.T) {
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
