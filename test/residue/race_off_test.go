//go:build !race

package residue

const raceEnabled = false
