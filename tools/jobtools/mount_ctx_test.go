package jobtools_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/tools/jobtools"
	"github.com/troupe-rt/troupe/troupetest"
)

// MountIn's ctx bounds its registrations: with ctx ended it fails and attaches
// nothing; with a live ctx the mount attaches its controller and its notice
// listener, and Dispose detaches both.
func TestMountInWithAnEndedContextAttachesNothing(t *testing.T) {
	sys, _ := troupetest.NewSystem(t)
	before, err := sys.Jobs().Footprint(t.Context())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = jobtools.MountIn(ctx, sys.Jobs(), sys.Scope(), jobtools.DefaultConfig())
	require.ErrorIs(t, err, context.Canceled)
	after, err := sys.Jobs().Footprint(t.Context())
	require.NoError(t, err)
	require.Equal(t, before, after, "a failed mount left a registration behind")

	m, err := jobtools.MountIn(t.Context(), sys.Jobs(), sys.Scope(), jobtools.DefaultConfig())
	require.NoError(t, err)
	mounted, err := sys.Jobs().Footprint(t.Context())
	require.NoError(t, err)
	require.Equal(t, before.Controllers+1, mounted.Controllers)
	require.Equal(t, before.Registrations+2, mounted.Registrations)
	require.NoError(t, m.Dispose(t.Context()))
	after, err = sys.Jobs().Footprint(t.Context())
	require.NoError(t, err)
	require.Equal(t, before, after, "Dispose left a registration behind")
}
