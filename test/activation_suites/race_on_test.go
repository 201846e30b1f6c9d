//go:build race

package activationsuites

const raceEnabled = true
