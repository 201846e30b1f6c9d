package job

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMetaKindIsTheIDPrefix: a record stores no kind; it is read off the id, also
// for a kind with '-' in it, and a snapshot carries it.
func TestMetaKindIsTheIDPrefix(t *testing.T) {
	for id, kind := range map[string]string{"bash-1": "bash", "pty-send-12": "pty-send", "a-b-c-9007199254740991": "a-b-c"} {
		m := &Meta{ID: id, Label: "l"}
		require.Equal(t, kind, m.Kind(), id)
		require.Equal(t, kind, m.Snapshot(Running, nil, nil, false).Kind, id)
	}
}
