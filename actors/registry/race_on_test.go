//go:build race

package registry

// raceEnabled: sync.Pool drops a share of what is put back under the race
// detector, so allocation counts that rest on a pool are not asserted then.
const raceEnabled = true
