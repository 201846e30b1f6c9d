//go:build troupe_mutation

package cluster_test

import (
	"testing"

	"github.com/troupe-rt/troupe/cluster"
	"github.com/troupe-rt/troupe/session/postgres/pgtest"
	"github.com/troupe-rt/troupe/test/mutation"
)

// The mutation check of the multi-process suite (TESTING.md): each planted bug
// of the cluster child, planted in every member process (cluster.PlantEnv), must
// make failoverSuite fail by the oracle named for it in the catalogue, in every
// paired run, while the same run (same seed, same budgets) without it passes.

// clusterSuite is failoverSuite as a mutation.Suite: run i's seed is fixed.
func clusterSuite(tb testing.TB, run int, planted string) {
	failoverSuite(tb, 19_000+uint64(run), planted)
}

func checkCluster(t *testing.T, bug string) {
	pgtest.ServerDSN(t) // skipped without PostgreSQL (failed under TROUPE_PG_REQUIRED=1)
	if r := mutation.Check(t, bug, mutation.Runs(t, 2), clusterSuite); r.Caught != r.Runs {
		t.Fatalf("%s caught %d of %d runs", bug, r.Caught, r.Runs)
	}
}

func TestMutation_ClusterWriteWithoutEpoch(t *testing.T) {
	checkCluster(t, cluster.PlantedWriteWithoutEpoch)
}

func TestMutation_ClusterRetryReaccepted(t *testing.T) {
	checkCluster(t, cluster.PlantedRetryReaccepted)
}

func TestMutation_ClusterRestoreByID(t *testing.T) {
	checkCluster(t, cluster.PlantedRestoreByID)
}
