// Package bench holds troupe's benchmarks (see README.md and run.sh): the job
// lifecycle, reads, kills and lists, with and without 100,000 jobs of history,
// next to protoactor's own floor and a minimal mutex-based registry, plus the
// memory per settled record and per live idle job. `go test ./test/bench/` runs
// no benchmark: only the leak check below.
package bench

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
