package activation

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// An Activation keeps its header's origin and its descriptor's provider and model
// names as one interned value: equal names decoded for two Activations are one
// copy, and the zero value reads "" (an Activation that never restored).
func TestInternedNamesShareOneCopy(t *testing.T) {
	names := func() descNames {
		return descNames{origin: "subagent", provider: string([]byte("provider-x")), agentModel: string([]byte("m"))}
	}
	a, b := turnDescOf("subagent", Descriptor{Provider: "provider-x", AgentModel: "m"}), turnDescOf(names().origin, Descriptor{Provider: names().provider, AgentModel: names().agentModel})
	require.Equal(t, names(), a.names.get())
	require.Equal(t, unsafe.StringData(a.names.get().provider), unsafe.StringData(b.names.get().provider), "two copies of one name")
	require.Empty(t, interned[string]{}.get())
	require.Equal(t, descNames{}, (&activationActor{}).desc.names.get())
}
