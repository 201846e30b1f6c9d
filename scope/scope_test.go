package scope

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"unsafe"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe/messages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// journal records the order effects ran in.
type journal struct {
	mu  sync.Mutex
	ran []string
}

func (j *journal) effect(name string, err error) func(context.Context) error {
	return func(context.Context) error {
		j.mu.Lock()
		defer j.mu.Unlock()
		j.ran = append(j.ran, name)
		return err
	}
}

func (j *journal) get() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.ran)
}

func mustAdd(t *testing.T, s *Scope, label string, fn func(context.Context) error) *Effect {
	t.Helper()
	e, err := s.Add(label, fn)
	require.NoError(t, err)
	require.Equal(t, label, e.Label())
	return e
}

func mustChild(t *testing.T, s *Scope, label string) *Scope {
	t.Helper()
	c, err := s.Child(label)
	require.NoError(t, err)
	return c
}

func TestEffectRunIsIdempotent(t *testing.T) {
	s := NewRoot("root")
	j := &journal{}
	boom := errors.New("boom")
	e := mustAdd(t, s, "e", j.effect("e", boom))
	mustAdd(t, s, "other", j.effect("other", nil))
	require.Equal(t, []string{"e", "other"}, s.Effects())

	require.ErrorIs(t, e.Run(t.Context()), boom)
	require.Equal(t, []string{"other"}, s.Effects(), "Run removes the effect from its scope")
	require.ErrorIs(t, e.Run(t.Context()), boom, "a later Run returns the first error")
	require.Equal(t, []string{"e"}, j.get(), "fn runs once")

	require.NoError(t, s.Dispose(t.Context()), "a run effect's error is not reported again")
	require.Equal(t, []string{"e", "other"}, j.get())
	require.ErrorIs(t, e.Run(t.Context()), boom)
	require.Equal(t, []string{"e", "other"}, j.get())
}

func TestEffectRunIsOnceUnderConcurrency(t *testing.T) {
	s := NewRoot("root")
	j := &journal{}
	e := mustAdd(t, s, "e", j.effect("e", nil))
	errs := make(chan error, 9)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { errs <- e.Run(context.Background()) })
	}
	wg.Go(func() { errs <- s.Dispose(context.Background()) })
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, []string{"e"}, j.get())
}

func TestEffectDetach(t *testing.T) {
	s := NewRoot("root")
	j := &journal{}
	e := mustAdd(t, s, "detached", j.effect("detached", nil))
	mustAdd(t, s, "kept", j.effect("kept", nil))
	e.Detach()
	e.Detach() // idempotent
	require.Equal(t, []string{"kept"}, s.Effects())

	require.NoError(t, s.Dispose(t.Context()))
	require.Equal(t, []string{"kept"}, j.get(), "a detached effect does not run on disposal")

	require.NoError(t, e.Run(t.Context()), "a detached effect can still be run explicitly")
	require.NoError(t, e.Run(t.Context()))
	require.Equal(t, []string{"kept", "detached"}, j.get())
}

func TestDisposeRunsChildrenFirstThenEffectsNewestFirst(t *testing.T) {
	root := NewRoot("root")
	j := &journal{}
	mustAdd(t, root, "r1", j.effect("r1", nil))
	c1 := mustChild(t, root, "c1")
	mustAdd(t, c1, "c1a", j.effect("c1a", nil))
	mustAdd(t, c1, "c1b", j.effect("c1b", nil))
	mustAdd(t, root, "r2", j.effect("r2", nil))
	c2 := mustChild(t, root, "c2")
	mustAdd(t, c2, "c2a", j.effect("c2a", nil))
	g := mustChild(t, c2, "g")
	mustAdd(t, g, "ga", j.effect("ga", nil))
	mustAdd(t, c2, "c2b", j.effect("c2b", nil))
	mustAdd(t, root, "r3", j.effect("r3", nil))

	require.NoError(t, root.Dispose(t.Context()))
	// Children (newest first, each recursively) before the scope's own effects, and
	// every scope's effects newest first: the order registrations would unwind.
	require.Equal(t, []string{"ga", "c2b", "c2a", "c1b", "c1a", "r3", "r2", "r1"}, j.get())
	for _, s := range []*Scope{root, c1, c2, g} {
		require.Empty(t, s.Effects(), s.Label())
		require.True(t, s.Disposed(), s.Label())
	}
}

func TestDisposeJoinsErrors(t *testing.T) {
	root := NewRoot("root")
	c := mustChild(t, root, "c")
	errRoot, errChild, errChild2 := errors.New("root"), errors.New("child"), errors.New("child2")
	j := &journal{}
	mustAdd(t, root, "r", j.effect("r", errRoot))
	mustAdd(t, root, "ok", j.effect("ok", nil))
	mustAdd(t, c, "c", j.effect("c", errChild))
	mustAdd(t, c, "c2", j.effect("c2", errChild2))

	err := root.Dispose(t.Context())
	require.ErrorIs(t, err, errRoot)
	require.ErrorIs(t, err, errChild)
	require.ErrorIs(t, err, errChild2)
	require.Equal(t, []string{"c2", "c", "ok", "r"}, j.get(), "a failing effect does not stop the others")

	err2 := root.Dispose(t.Context())
	require.Equal(t, err.Error(), err2.Error(), "every call reports the same teardown")
	require.Equal(t, []string{"c2", "c", "ok", "r"}, j.get(), "Dispose is idempotent")
}

func TestDisposeConcurrentCallersAllWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		root := NewRoot("root")
		c := mustChild(t, root, "c")
		release := make(chan struct{})
		var runs int
		boom := errors.New("boom")
		mustAdd(t, c, "slow", func(context.Context) error {
			runs++
			<-release
			return boom
		})

		const callers = 6
		results := make(chan error, callers)
		for i := range callers {
			target := root
			if i%2 == 1 {
				target = c // the child's own callers wait for the same teardown
			}
			go func() { results <- target.Dispose(context.Background()) }()
		}
		synctest.Wait() // every caller is blocked
		require.Empty(t, results, "no Dispose returns before the teardown is done")
		require.Equal(t, 1, runs)
		require.True(t, root.Disposed())
		require.True(t, c.Disposed())

		close(release)
		for range callers {
			require.ErrorIs(t, <-results, boom)
		}
		require.Equal(t, 1, runs)
		require.ErrorIs(t, root.Dispose(context.Background()), boom, "a later call returns at once with the result")
	})
}

func TestDisposeCtxEndsWaitingNotTeardown(t *testing.T) {
	root := NewRoot("root")
	j := &journal{}
	started, release := make(chan struct{}), make(chan struct{})
	boom := errors.New("boom")
	mustAdd(t, root, "first", j.effect("first", nil))
	mustAdd(t, root, "slow", func(context.Context) error {
		close(started)
		<-release
		return boom
	})

	ctx, cancel := context.WithCancelCause(t.Context())
	gaveUp := errors.New("caller gave up")
	result := make(chan error, 1)
	go func() { result <- root.Dispose(ctx) }()
	<-started
	cancel(gaveUp)
	require.ErrorIs(t, <-result, gaveUp, "Dispose returns the ctx's cause")
	require.Empty(t, j.get(), "the teardown is still stuck in the slow effect")

	close(release)
	require.ErrorIs(t, root.Dispose(t.Context()), boom, "the teardown went on and finished")
	require.Equal(t, []string{"first"}, j.get())
}

func TestDisposeWithDoneCtxStillTearsDown(t *testing.T) {
	root := NewRoot("root")
	started, release := make(chan struct{}), make(chan struct{})
	mustAdd(t, root, "slow", func(context.Context) error {
		close(started)
		<-release
		return nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, root.Dispose(ctx), context.Canceled)
	<-started // the teardown began although the caller's ctx was already done
	require.True(t, root.Disposed())
	_, err := root.Add("late", func(context.Context) error { return nil })
	require.ErrorIs(t, err, messages.ErrScopeDisposed)
	close(release)
	require.NoError(t, root.Dispose(t.Context()))
}

func TestRegistrationAfterDisposeFails(t *testing.T) {
	root := NewRoot("root")
	c := mustChild(t, root, "agent:s1")
	var fromEffect error
	mustAdd(t, c, "registers", func(context.Context) error {
		_, fromEffect = c.Add("during", func(context.Context) error { return nil })
		return nil
	})
	require.NoError(t, root.Dispose(t.Context()))
	require.ErrorIs(t, fromEffect, messages.ErrScopeDisposed, "Add from an effect during disposal")

	for _, s := range []*Scope{root, c} {
		e, err := s.Add("late", func(context.Context) error { return nil })
		require.Nil(t, e)
		require.ErrorIs(t, err, messages.ErrScopeDisposed)
		require.Equal(t, messages.CodeScopeDisposed, messages.CodeOf(err))
		require.Equal(t, `scope "`+s.Label()+`" is disposed`, err.Error())

		child, err := s.Child("late")
		require.Nil(t, child)
		require.ErrorIs(t, err, messages.ErrScopeDisposed)
	}
}

func TestDisposedCoversDescendants(t *testing.T) {
	root := NewRoot("root")
	c := mustChild(t, root, "c")
	sibling := mustChild(t, root, "sibling")
	g := mustChild(t, c, "g")
	require.False(t, g.Disposed())

	require.NoError(t, c.Dispose(t.Context()))
	require.True(t, c.Disposed())
	require.True(t, g.Disposed())
	require.False(t, root.Disposed())
	require.False(t, sibling.Disposed())
	mustAdd(t, root, "still open", func(context.Context) error { return nil })
	mustChild(t, root, "new child")
}

func TestDisposedWhileAnAncestorIsTearingDown(t *testing.T) {
	root := NewRoot("root")
	older := mustChild(t, root, "older")
	g := mustChild(t, older, "g")
	newer := mustChild(t, root, "newer")
	started, release := make(chan struct{}), make(chan struct{})
	mustAdd(t, newer, "slow", func(context.Context) error {
		close(started)
		<-release
		return nil
	})
	ran := make(chan string, 1)

	result := make(chan error, 1)
	go func() { result <- root.Dispose(context.Background()) }()
	<-started
	// root's teardown is stuck in the newer child; the older one's turn has not come.
	require.True(t, older.Disposed(), "an ancestor's Dispose has begun")
	require.True(t, g.Disposed())
	e, err := older.Add("late", func(context.Context) error { ran <- "late"; return nil })
	close(release)
	require.NoError(t, <-result)
	if err == nil {
		// Accepted into a scope whose own turn had not come: it must still run.
		require.NotNil(t, e)
		require.Equal(t, "late", <-ran)
	} else {
		require.ErrorIs(t, err, messages.ErrScopeDisposed)
	}
}

func TestEffectsLabels(t *testing.T) {
	s := NewRoot("root")
	require.Empty(t, s.Effects())
	a := mustAdd(t, s, "jobs.ownerCleanup()", func(context.Context) error { return nil })
	mustAdd(t, s, "tool-jobs", func(context.Context) error { return nil })
	mustAdd(t, s, "tool-jobs", func(context.Context) error { return nil }) // duplicates are independent
	require.Equal(t, []string{"jobs.ownerCleanup()", "tool-jobs", "tool-jobs"}, s.Effects())

	labels := s.Effects()
	labels[0] = "mutated"
	require.Equal(t, "jobs.ownerCleanup()", s.Effects()[0], "Effects returns a copy")

	a.Detach()
	require.Equal(t, []string{"tool-jobs", "tool-jobs"}, s.Effects())
	require.NoError(t, s.Dispose(t.Context()))
	require.Empty(t, s.Effects())
}

func TestChain(t *testing.T) {
	root := NewRoot("global")
	require.True(t, root.Root())
	require.Nil(t, root.Parent())
	require.Equal(t, []ID{root.ID()}, root.Chain())
	require.Equal(t, "global", root.Label())

	// Several siblings at several depths: no chain may share storage with another.
	c1 := mustChild(t, root, "c1")
	c2 := mustChild(t, root, "c2")
	g11 := mustChild(t, c1, "g11")
	g12 := mustChild(t, c1, "g12")
	gg := mustChild(t, g11, "gg")
	gg2 := mustChild(t, g11, "gg2")
	g13 := mustChild(t, c1, "g13")

	want := map[*Scope][]*Scope{
		c1:  {root, c1},
		c2:  {root, c2},
		g11: {root, c1, g11},
		g12: {root, c1, g12},
		g13: {root, c1, g13},
		gg:  {root, c1, g11, gg},
		gg2: {root, c1, g11, gg2},
	}
	seen := map[ID]bool{}
	for s, path := range want {
		var ids []ID
		for _, p := range path {
			ids = append(ids, p.ID())
		}
		require.Equal(t, ids, s.Chain(), s.Label())
		require.False(t, s.Root(), s.Label())
		require.Same(t, path[len(path)-2], s.Parent(), s.Label())
		require.False(t, seen[s.ID()], "duplicate id")
		seen[s.ID()] = true
	}
	require.NotEqual(t, root.ID(), NewRoot("global").ID(), "ids are unique across trees")
}

// A child disposed on its own (an agent incarnation ending) should leave its parent.
// Otherwise every incarnation composed under the long-lived global scope stays
// reachable from it for the life of the process, with its effects' closures.
func TestDisposedChildLeavesItsParent(t *testing.T) {
	root := NewRoot("global")
	for range 100 {
		c := mustChild(t, root, "agent:s1")
		mustAdd(t, c, "owner", func(context.Context) error { return nil })
		require.NoError(t, c.Dispose(t.Context()))
	}
	root.mu.Lock()
	n := len(root.mu.more.children)
	root.mu.Unlock()
	require.Zero(t, n, "disposed children still held by the parent")
	require.NoError(t, root.Dispose(t.Context()))
}

// An agent incarnation's scope is made per incarnation and most never read their
// chain: Child allocates the scope alone (its chain is built by the first Chain,
// its children's list by its first Child). Before, Child also allocated the chain
// (2 allocations).
func TestChildAllocatesOnlyTheScope(t *testing.T) {
	root := NewRoot("global")
	t.Cleanup(func() { require.NoError(t, root.Dispose(context.Background())) })
	kids := make([]*Scope, 0, 1000)
	allocs := testing.AllocsPerRun(500, func() {
		c, err := root.Child("agent:s")
		require.NoError(t, err)
		kids = append(kids, c)
	})
	require.EqualValues(t, 1, allocs, "Child's allocations (amortized over the parent's list)")
	c := kids[0]
	require.Equal(t, []ID{root.ID(), c.ID()}, c.Chain())
	require.Equal(t, &c.Chain()[0], &c.Chain()[0], "the chain is built once")
}

// An agent incarnation's scope holds two effects (its owner's stop and its
// registration's, both Disposers): the scope fits 64 B and each effect 32 B, and
// AddDisposer allocates the effect alone, its list linked through the effects
// (128 B in all). Before, a scope was 88 B (the 96 B class), an effect 48 B and the
// effects a slice: an agent scope's two Adds made 4 objects (each effect, and the
// slice's array of 1, then of 2), 208 B with the scope, besides their closures.
func TestAnAgentScopeIsTheScopeAndItsTwoEffects(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(Scope{}), uintptr(64), "unsafe.Sizeof(Scope{})")
	require.LessOrEqual(t, unsafe.Sizeof(Effect{}), uintptr(32), "unsafe.Sizeof(Effect{})")
	root := NewRoot("global")
	t.Cleanup(func() { require.NoError(t, root.Dispose(context.Background())) })
	d, u := &counter{label: "owner.stop()"}, &counter{label: "agents.unregister()"}
	kids := make([]*Scope, 0, 1000)
	allocs := testing.AllocsPerRun(500, func() {
		c, err := root.Child("agent:s")
		require.NoError(t, err)
		kids = append(kids, c)
		_, err = c.AddDisposer(d)
		require.NoError(t, err)
		_, err = c.AddDisposer(u)
		require.NoError(t, err)
	})
	require.EqualValues(t, 3, allocs, "an agent scope's allocations: the scope and its two effects")
	require.Equal(t, []string{"owner.stop()", "agents.unregister()"}, kids[0].Effects())
}

// counter is a Disposer: its Dispose counts its runs (or panics).
type counter struct {
	label string
	runs  int
	panic bool
}

func (c *counter) Label() string { return c.label }

func (c *counter) Dispose(context.Context) error {
	c.runs++
	if c.panic {
		panic("boom")
	}
	return nil
}

// A Disposer is registered without a closure: AddDisposer allocates the effect
// alone, and the effect runs d.Dispose once, as Add's runs its func.
func TestAddDisposerRunsItOnceWithNoClosure(t *testing.T) {
	root := NewRoot("global")
	d := &counter{label: "counter.dispose()"}
	allocs := testing.AllocsPerRun(100, func() {
		e, err := root.AddDisposer(d)
		require.NoError(t, err)
		e.Detach()
	})
	require.EqualValues(t, 1, allocs, "AddDisposer's allocations")
	require.Zero(t, d.runs, "a detached disposer does not run")

	e, err := root.AddDisposer(d)
	require.NoError(t, err)
	require.Equal(t, []string{"counter.dispose()"}, root.Effects())
	require.Equal(t, "counter.dispose()", e.Label())
	require.NoError(t, e.Run(t.Context()))
	require.NoError(t, e.Run(t.Context()))
	require.Equal(t, 1, d.runs, "run once")
	require.Equal(t, "counter.dispose()", e.Label(), "a run effect keeps its label")

	p := &counter{label: "panics()", panic: true}
	_, err = root.AddDisposer(p)
	require.NoError(t, err)
	require.ErrorContains(t, root.Dispose(t.Context()), "scope effect panics() panicked: boom")
	require.Equal(t, 1, p.runs)
	_, err = root.AddDisposer(d)
	require.ErrorIs(t, err, messages.ErrScopeDisposed)
}
