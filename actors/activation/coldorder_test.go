package activation_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
)

// SPEC §6.3's refusals of a cold followup keep their order when several apply
// at once: the head's read (NOT_RESUMABLE, unavailable), the parent's liveness,
// its authority over the persisted header, the descriptor, then a parent whose
// disposal has begun (ACTIVATION_CLOSING). Each refusal writes nothing: no
// epoch taken, nothing accepted, no Activation.
func TestColdFollowupRefusalsKeepTheirOrder(t *testing.T) {
	r := newRig(t, func(subagent.Turn) (subagent.Reply, bool) { return subagent.Reply{Text: "ok"}, true }, false)
	ctx := context.Background()
	desc := func(mode string) json.RawMessage {
		raw, err := json.Marshal(map[string]any{"version": 2, "mode": mode, "provider": "spawn", "label": "l"})
		require.NoError(t, err)
		return raw
	}
	sessions := map[string]struct {
		parent string
		desc   json.RawMessage
	}{
		"oneshot-Q": {"Q", desc("one-shot")},
		"corrupt-P": {"P", desc("weird")},
		"cont-P":    {"P", desc("continuable")},
		"oneshot-D": {"D", desc("one-shot")},
		"cont-D":    {"D", desc("continuable")},
	}
	for id, s := range sessions {
		require.NoError(t, r.store.Create(ctx, session.Header{ID: id, ParentSession: s.parent, Origin: "subagent", DelegationDepth: 1},
			[]session.Entry{{Kind: session.EntryDescriptor, Descriptor: s.desc}}))
	}

	// stale: an instance of P's session that is not the registered one (not live).
	stale, err := r.sys.NewAgent(nil, "P", owner.Options{Surface: &inbox{msgs: make(chan owner.Message, 8)}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = stale.Dispose(context.Background()) })
	// d: D's live agent, whose disposal has begun (held inside one of its scope's
	// effects: still registered, its lineage tearing down).
	d, err := r.sys.NewAgent(nil, "D", owner.Options{Surface: &inbox{msgs: make(chan owner.Message, 8)}})
	require.NoError(t, err)
	require.NoError(t, r.sys.Jobs().RegisterAgent(ctx, d))
	disposing, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	letGo := func() { once.Do(func() { close(proceed) }) }
	t.Cleanup(letGo)
	_, err = d.Scope().Add("test.holdDisposal()", func(context.Context) error {
		close(disposing)
		<-proceed
		return nil
	})
	require.NoError(t, err)
	disposed := make(chan error, 1)
	go func() { disposed <- d.Dispose(context.Background()) }()
	<-disposing

	for _, c := range []struct {
		name   string
		sender *owner.Agent
		id     string
		code   messages.Code
		text   string
	}{
		{"the head's read before the liveness", stale, "absent", subagent.CodeNotResumable,
			`subagent "absent" is unavailable`},
		{"the liveness before the authority", stale, "oneshot-Q", subagent.CodeUnauthorized,
			`subagent "oneshot-Q" delivery requires the exact live parent agent`},
		{"the authority before the descriptor", r.parent, "oneshot-Q", subagent.CodeUnauthorized,
			`subagent "oneshot-Q" belongs to another parent session`},
		{"the authority before the closing", d, "cont-P", subagent.CodeUnauthorized,
			`subagent "cont-P" belongs to another parent session`},
		{"the descriptor before the closing", d, "oneshot-D", subagent.CodeNotResumable,
			`subagent "oneshot-D" has no supported continuation state and cannot be resumed; do not retry send_message with this id`},
		{"a corrupt current-version descriptor, its error as is", r.parent, "corrupt-P", "",
			`persisted subagent descriptor mode must be "one-shot" or "continuable"`},
		{"the closing last", d, "cont-D", subagent.CodeActivationClosing,
			`subagent parent "D" is being disposed; the child was not established`},
	} {
		_, err := r.m.Followup(ctx, c.sender, c.id, "refused", session.Source{Kind: "coordinator"})
		require.EqualError(t, err, c.text, c.name)
		require.Equal(t, c.code, messages.CodeOf(err), c.name)
	}
	for id := range sessions {
		snap, err := r.store.Load(ctx, id)
		require.NoError(t, err)
		require.Zero(t, snap.Header.Epoch, "%s: a refusal takes no epoch", id)
		require.Empty(t, snap.Inbox, "%s: a refusal accepts nothing", id)
		require.Len(t, snap.Log, 1, "%s: a refusal appends nothing", id)
	}
	require.Zero(t, r.m.Live(ctx), "no Activation")
	require.Empty(t, r.ran())
	letGo()
	require.NoError(t, <-disposed)
}
