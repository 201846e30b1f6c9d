package session_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/session/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The store contract (session/storetest), against Memory and Bolt; session/postgres
// runs the same suite.
func TestStoreMemory(t *testing.T) {
	storetest.Run(t, func(*testing.T) session.Store { return session.NewMemory() })
}

func TestStoreBolt(t *testing.T) {
	storetest.Run(t, func(t *testing.T) session.Store {
		b, err := session.OpenBolt(filepath.Join(t.TempDir(), "sessions.db"))
		require.NoError(t, err)
		return b
	})
}

// Memory and Bolt record the turn start of a cold restore's lone message in
// ResumeAccept's commit (session/postgres declines).
func TestResumeAcceptStartsMemory(t *testing.T) { storetest.ResumeAcceptStarts(t, session.NewMemory()) }

func TestResumeAcceptStartsBolt(t *testing.T) {
	b, err := session.OpenBolt(filepath.Join(t.TempDir(), "sessions.db"))
	require.NoError(t, err)
	storetest.ResumeAcceptStarts(t, b)
}
