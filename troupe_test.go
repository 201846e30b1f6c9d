package troupe_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/troupetest"
)

func TestConfigValidate(t *testing.T) {
	require.NoError(t, troupe.DefaultConfig().Validate())
	for _, n := range []int64{0, -1, 1 << 53} {
		cfg := troupe.Config{MaxConcurrentJobsPerOwner: &n}
		err := cfg.Validate()
		require.ErrorIs(t, err, messages.ErrInvalidConfig, "limit %d", n)
		_, err = troupe.New(cfg)
		require.ErrorIs(t, err, messages.ErrInvalidConfig)
	}
	max := int64(1<<53 - 1)
	require.NoError(t, troupe.Config{MaxConcurrentJobsPerOwner: &max}.Validate())
	for _, r := range []troupe.Retention{{PerOwner: -1}, {MaxAge: -time.Second}, {MaxAge: time.Microsecond}} {
		cfg := troupe.Config{Retention: r}
		require.ErrorIs(t, cfg.Validate(), messages.ErrInvalidConfig, "retention %+v", r)
		_, err := troupe.New(cfg)
		require.ErrorIs(t, err, messages.ErrInvalidConfig)
	}
	require.NoError(t, troupe.Config{Retention: troupe.Retention{PerOwner: 10, MaxAge: time.Hour}}.Validate())
}

func TestShutdownIsIdempotentAndTearsDownJobs(t *testing.T) {
	sys, err := troupe.New(troupe.DefaultConfig())
	require.NoError(t, err)
	_, err = sys.Jobs().AttachController(context.Background(), sys.Scope(), "t")
	require.NoError(t, err)
	p := troupetest.NewProducer()
	p.OnCancel = &job.Outcome{Status: job.Killed}
	id, err := sys.Jobs().Start(context.Background(), p.Spec(nil))
	require.NoError(t, err)
	require.Equal(t, "bash-1", id)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, sys.Shutdown(ctx))
	require.NoError(t, sys.Shutdown(ctx))
	require.Equal(t, []string{job.ReasonServiceDisposed}, p.Cancels())

	_, err = sys.Jobs().Start(ctx, p.Spec(nil))
	require.ErrorIs(t, err, messages.ErrStopped)
}

func TestShutdownHonoursCallerDeadline(t *testing.T) {
	sys, err := troupe.New(troupe.DefaultConfig())
	require.NoError(t, err)
	_, err = sys.Jobs().AttachController(context.Background(), sys.Scope(), "t")
	require.NoError(t, err)
	// A producer whose cancel never settles stalls teardown (SPEC §2.11's known limit)
	// until Shutdown's deadline.
	p := troupetest.NewProducer()
	_, err = sys.Jobs().Start(context.Background(), p.Spec(nil))
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = sys.Shutdown(ctx)
	require.ErrorIs(t, err, context.Canceled)
	// At the deadline the job is forced failed (issue 12): the error names it, and
	// its producer is still asked to stop once.
	require.ErrorIs(t, err, messages.ErrShutdownTimeout)
	require.Contains(t, err.Error(), "bash-1")
	require.Equal(t, job.ReasonServiceDisposed, p.NextCancel(t))
	p.Settle(job.Outcome{Status: job.Killed}) // late: ignored
	require.NoError(t, sys.Shutdown(context.Background()), "the same shutdown completes")
}
