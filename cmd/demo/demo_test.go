package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestScenariosKeepTheirPromises plays every scenario in-process (so the race
// detector and goleak see the runtime under the demo). A scenario returns an error,
// and records the promise, when it observes a broken one: a notice in the wrong
// lane, a lost answer, a job settled twice, a child that did not resume.
func TestScenariosKeepTheirPromises(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			var stream bytes.Buffer
			out := newEmitter(&stream, true, false)
			kept, broken, err := play(context.Background(), out, sc, filepath.Join(t.TempDir(), sessionsFile))
			if err != nil || len(broken) > 0 || kept == 0 {
				t.Fatalf("err %v, broken %q, %d kept; the events:\n%s", err, broken, kept, stream.String())
			}
		})
	}
}

// TestBrokenPromiseExitsNonZero: a scenario that observes a broken promise makes the
// demo exit 1, saying which promise broke, and the stream's summary counts it.
func TestBrokenPromiseExitsNonZero(t *testing.T) {
	scenarios = append(scenarios, scenario{"broken", "a scenario whose promise breaks", func(st *stage) error {
		return st.check("two and two make five", 2+2 == 5, "they make %d", 2+2)
	}})
	defer func() { scenarios = scenarios[:len(scenarios)-1] }()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--json", "--scenario", "broken", "--data", t.TempDir()}, &stdout, &stderr)
	require.Equal(t, 1, code)
	require.Contains(t, stderr.String(), "demo: scenario broken: broken promise: two and two make five: they make 4\n")
	events := parseStream(t, stdout.String())
	sum := events[len(events)-1].Summary
	require.Equal(t, 1, sum.Broken)
	require.Equal(t, []string{"broken"}, sum.Failed)
}
