//go:build !race

package activationsuites

const raceEnabled = false
