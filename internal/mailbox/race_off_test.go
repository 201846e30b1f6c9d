//go:build !race

package mailbox

// raceEnabled: see race_on_test.go.
const raceEnabled = false
