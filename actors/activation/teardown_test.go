package activation_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/subagent"
)

// SPEC §1.3 rule 26 with §6.5: an agent's scope disposal is its teardown. Once a
// top-level parent's Dispose has begun — here it is held inside one of its scope's
// effects, with the parent still registered and its owner actor live — its
// lineage is tearing down: a continuable child's settlement notice is injected
// (never a followup turn, although the parent is idle), and no new continuable
// child is established below it (ACTIVATION_CLOSING).
func TestParentDisposalInjectsTheNoticeAndClosesAdmission(t *testing.T) {
	e := newDrainEnv(t)
	release := make(chan struct{})
	base := e.runner.Match
	e.runner.Match = func(turn subagent.Turn) (subagent.Reply, bool) {
		if turn.Input.Text() == "await release" {
			<-release
			return subagent.Reply{Text: "done"}, true
		}
		return base(turn)
	}
	p, s := e.parent(t, "P")
	_, _, err := e.m.Start(context.Background(), p, "spawn", "held", "c", subagent.Request{Prompt: "await release"})
	require.NoError(t, err)

	disposing, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	letGo := func() { once.Do(func() { close(proceed) }) }
	t.Cleanup(letGo) // before the system's shutdown, also when an assertion fails
	_, err = p.Scope().Add("test.holdDisposal()", func(context.Context) error {
		close(disposing)
		<-proceed
		return nil
	})
	require.NoError(t, err)
	disposed := make(chan error, 1)
	go func() { disposed <- p.Dispose(context.Background()) }()
	<-disposing // P's disposal has begun; it is still registered and its actor live

	close(release) // c's turn ends: c settles and is disposed, and notifies P
	assert.Equal(t, "inject Background subagent c finished and will do no further work unless you send it more.", s.next(t),
		"the notice to a parent whose disposal has begun")
	_, _, err = e.m.Start(context.Background(), p, "spawn", "late", "d", subagent.Request{Prompt: "hi"})
	if assert.Error(t, err, "a child was established below a parent whose disposal has begun") {
		assert.Equal(t, subagent.CodeActivationClosing, messages.CodeOf(err))
		assert.EqualError(t, err, `subagent parent "P" is being disposed; the child was not established`)
	}
	letGo()
	require.NoError(t, <-disposed)
}
