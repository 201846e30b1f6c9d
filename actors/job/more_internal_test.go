package job

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestKillMoreFitsItsSizeClass: the jobMore a kill makes holds the kill's
// StopRequested and Settled in the 256-B size class, where a jobMore (80 B)
// and a stopSettled (176 B) were two allocations; a jobMore stays 80 B (a job
// only waited on holds no more).
func TestKillMoreFitsItsSizeClass(t *testing.T) {
	require.Equal(t, uintptr(80), unsafe.Sizeof(jobMore{}))
	require.LessOrEqual(t, unsafe.Sizeof(killMore{}), uintptr(256))
}
