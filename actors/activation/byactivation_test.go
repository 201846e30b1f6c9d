package activation

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
)

// TestByActivationReadsTheChildIDOffTheName: the directory finds an entry by its
// Activation's PID without an index of its own — the child id is read off the
// name, whatever dashes or slashes the id holds — and only that very Activation
// answers: a PID of an older Activation of the same child, of another directory,
// or a name that is not an Activation's is nil.
func TestByActivationReadsTheChildIDOffTheName(t *testing.T) {
	d := &directoryActor{acts: map[string]*entry{}, named: "directory/"}
	pidOf := func(id string, n uint64) *actor.PID {
		return &actor.PID{Address: "nonhost", Id: d.named + activationName(id, n)}
	}
	ids := []string{"plain", "with-dash-7", "a/activation-b-3", "-", "9"}
	for k, id := range ids {
		d.acts[id] = &entry{pid: pidOf(id, uint64(10+k))}
	}
	for k, id := range ids {
		require.Same(t, d.acts[id], d.byActivation(pidOf(id, uint64(10+k))), "child %q", id)
		require.Nil(t, d.byActivation(pidOf(id, uint64(1+k))), "an older Activation of %q", id)
	}
	require.Nil(t, d.byActivation(&actor.PID{Id: "other/" + activationName("plain", 10)}), "another directory's")
	require.Nil(t, d.byActivation(&actor.PID{Id: "directory/owner-10"}), "not an Activation's name")
	require.Nil(t, d.byActivation(&actor.PID{Id: "directory/activation-plain"}), "no spawn count")
	require.Nil(t, d.byActivation(pidOf("absent", 1)), "no entry")
	require.Nil(t, (&directoryActor{acts: d.acts}).byActivation(pidOf("plain", 10)), "nothing spawned yet")
}
