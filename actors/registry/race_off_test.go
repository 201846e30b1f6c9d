//go:build !race

package registry

// raceEnabled: see race_on_test.go.
const raceEnabled = false
