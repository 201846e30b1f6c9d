package activation

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// An Activation keeps its descriptor's provider and model names and its header's
// origin interned: equal names decoded for two Activations are one copy, and the
// zero value reads "" (an Activation that never restored).
func TestInternedNamesShareOneCopy(t *testing.T) {
	a, b := intern(string([]byte("provider-x"))), intern(string([]byte("provider-x")))
	require.Equal(t, "provider-x", a.String())
	require.Equal(t, unsafe.StringData(a.String()), unsafe.StringData(b.String()), "two copies of one name")
	require.Empty(t, interned{}.String())
	require.Empty(t, (&activationActor{}).desc.provider.String())
}
