//go:build race

package residue

const raceEnabled = true
