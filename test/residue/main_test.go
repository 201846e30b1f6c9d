// Package residue holds issue 12's "zero residue per incarnation" checks: agent
// incarnations churned through register → start one job → settle → dispose leave
// nothing behind — no registry map entry, no bucket, no index row, no supervision
// tree node — and the retained heap does not grow with their number.
//
// The full-size churn (100,000 incarnations) runs without -race and without
// -short; under -race or -short it runs churnRaceCount incarnations. The benchmark
// BenchmarkIncarnationResidue reports retained bytes per incarnation against the
// target of 0.
package residue

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
