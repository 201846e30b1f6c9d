package scope

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/troupe-rt/troupe/messages"
)

// ID identifies a scope for the lifetime of the process.
type ID uint64

var nextID atomic.Uint64

// Scope is a node of the registration tree. The zero value is not usable; make a
// root with NewRoot and children with Child.
//
// Every live agent incarnation has one, with two effects, so it is kept to 64 B
// (README "Performance": memory per idle resident activation): its effects are a list linked
// through the effects themselves (no slice), and what only some scopes use is made
// on first use — its chain by the first Chain, and its children's list and its
// disposal (more) by the first Child or Dispose.
type Scope struct {
	label  string
	parent *Scope
	id     ID
	chain  atomic.Pointer[[]ID] // root first, this scope last; built by the first Chain, then immutable

	mu struct {
		sync.Mutex
		newest *Effect // the live effects, newest first, linked by Effect.older
		more   *more   // nil until the first Child or Dispose
	}
}

// more is what a scope with children, or being disposed, holds beside its effects.
type more struct {
	children []*Scope
	done     chan struct{} // nil until Dispose begins (non-nil is disposed); closed when the teardown has finished
	err      error         // written before done closes, read after
}

// disposing reports whether Dispose has begun on s. s.mu must be held.
func (s *Scope) disposing() bool { return s.mu.more != nil && s.mu.more.done != nil }

// extra returns s's more, made on first use. s.mu must be held.
func (s *Scope) extra() *more {
	if s.mu.more == nil {
		s.mu.more = new(more)
	}
	return s.mu.more
}

// NewRoot makes a global scope: the root of a new tree.
func NewRoot(label string) *Scope {
	return &Scope{label: label, id: ID(nextID.Add(1))}
}

// Child makes a scope under s. It fails with scope/disposed once s is disposed.
func (s *Scope) Child(label string) (*Scope, error) {
	c := &Scope{label: label, parent: s, id: ID(nextID.Add(1))}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.disposing() {
		return nil, disposedErr(s)
	}
	m := s.extra()
	m.children = append(m.children, c)
	return c, nil
}

// ID returns the scope's identity.
func (s *Scope) ID() ID { return s.id }

// Label returns the label the scope was made with.
func (s *Scope) Label() string { return s.label }

// Parent returns the enclosing scope, nil for a root.
func (s *Scope) Parent() *Scope { return s.parent }

// Chain returns the ids from the root to s (root first). Callers must not modify it.
func (s *Scope) Chain() []ID {
	if c := s.chain.Load(); c != nil {
		return *c
	}
	var c []ID
	if s.parent != nil {
		c = append(slices.Clip(s.parent.Chain()), s.id)
	} else {
		c = []ID{s.id}
	}
	s.chain.CompareAndSwap(nil, &c) // a concurrent first call built the same ids
	return *s.chain.Load()
}

// Root reports whether s is a root (global) scope.
func (s *Scope) Root() bool { return s.parent == nil }

// Disposed reports whether Dispose has begun on s or an ancestor.
func (s *Scope) Disposed() bool {
	for p := s; p != nil; p = p.parent {
		p.mu.Lock()
		d := p.disposing()
		p.mu.Unlock()
		if d {
			return true
		}
	}
	return false
}

// Effect is one registration in a scope: 32 B (an agent incarnation's scope holds
// two, both Disposers). Its run is once: the first Run takes what it does (under
// the scope's lock) and runs it, a concurrent Run waits for that run, and a later
// one returns its outcome.
type Effect struct {
	scope *Scope
	older *Effect // the next older live effect of scope; under scope's lock
	// do is, until its run begins, what it runs: a *funcEffect (Add) or a Disposer
	// (AddDisposer); then its *effectRun. Under scope's lock.
	do any
}

// Disposer is an effect's teardown as methods (AddDisposer): an effect whose state
// is one pointer registers it with no closure and no label of its own.
type Disposer interface {
	Dispose(context.Context) error
	Label() string // the effect's label (for example `owner.stop()`)
}

// funcEffect is an Add's effect: its label and its func.
type funcEffect struct {
	label string
	fn    func(context.Context) error
}

// effectRun is an effect's run: mu is held while it runs, err is its outcome
// (written before mu is unlocked, read after it is locked).
type effectRun struct {
	mu    sync.Mutex
	err   error
	label string
}

// labelOf returns the label of an effect's do.
func labelOf(do any) string {
	switch d := do.(type) {
	case *funcEffect:
		return d.label
	case *effectRun:
		return d.label
	default:
		return d.(Disposer).Label()
	}
}

// Label names the effect (for example `jobs.ownerCleanup()`).
func (e *Effect) Label() string {
	e.scope.mu.Lock()
	defer e.scope.mu.Unlock()
	return labelOf(e.do)
}

// Add registers fn under label. fn runs at most once: on e.Run or on scope disposal.
func (s *Scope) Add(label string, fn func(context.Context) error) (*Effect, error) {
	return s.add(&funcEffect{label: label, fn: fn})
}

// AddDisposer registers d under d.Label(), as Add registers d.Dispose, without a
// closure: d.Dispose runs at most once, on e.Run or on scope disposal.
func (s *Scope) AddDisposer(d Disposer) (*Effect, error) {
	return s.add(d)
}

// add registers do, a *funcEffect or a Disposer.
func (s *Scope) add(do any) (*Effect, error) {
	e := &Effect{scope: s, do: do}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.disposing() {
		return nil, disposedErr(s)
	}
	e.older, s.mu.newest = s.mu.newest, e
	return e, nil
}

// Run removes the effect from its scope and runs it, once; later calls return the
// first call's error without running it again.
func (e *Effect) Run(ctx context.Context) error {
	s := e.scope
	s.mu.Lock()
	s.unlink(e)
	do := e.do
	if r, ok := do.(*effectRun); ok {
		s.mu.Unlock()
		r.mu.Lock() // held by the first Run until what it runs has returned
		defer r.mu.Unlock()
		return r.err
	}
	r := &effectRun{label: labelOf(do)}
	r.mu.Lock()
	defer r.mu.Unlock()
	e.do = r // what do captured is garbage once it has run
	s.mu.Unlock()
	r.err = call(ctx, do, r.label)
	return r.err
}

// call runs do, turning a panic into an error.
func call(ctx context.Context, do any, label string) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("scope effect %s panicked: %v", label, v)
		}
	}()
	if f, ok := do.(*funcEffect); ok {
		return f.fn(ctx)
	}
	return do.(Disposer).Dispose(ctx)
}

// Detach removes the effect from its scope without running it. The effect can
// still be Run explicitly.
func (e *Effect) Detach() {
	s := e.scope
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unlink(e)
}

// unlink removes e from s's live effects if it is one. s.mu must be held.
func (s *Scope) unlink(e *Effect) {
	for p := &s.mu.newest; *p != nil; p = &(*p).older {
		if *p == e {
			*p, e.older = e.older, nil
			return
		}
	}
}

// Effects lists the labels of the scope's live effects, oldest first.
func (s *Scope) Effects() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for e := s.mu.newest; e != nil; e = e.older {
		n++
	}
	out := make([]string, n)
	for e := s.mu.newest; e != nil; e = e.older {
		n--
		out[n] = labelOf(e.do)
	}
	return out
}

// Dispose disposes the scope's children, then runs its effects newest first, and
// returns when they are done or when ctx ends, whichever comes first; a ctx that
// ends never stops the teardown itself. It is idempotent: every call waits for the
// same teardown. The returned error joins the effects' errors, or is ctx's error.
func (s *Scope) Dispose(ctx context.Context) error {
	s.mu.Lock()
	m := s.extra()
	if m.done == nil {
		m.done = make(chan struct{})
		go s.teardown(m)
	}
	s.mu.Unlock()
	select {
	case <-m.done:
		return m.err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (s *Scope) teardown(m *more) {
	s.mu.Lock()
	children := m.children
	m.children = nil
	s.mu.Unlock()
	var errs []error
	for _, c := range slices.Backward(children) {
		if err := c.Dispose(context.Background()); err != nil {
			errs = append(errs, err)
		}
	}
	for {
		s.mu.Lock()
		e := s.mu.newest
		s.mu.Unlock()
		if e == nil {
			break
		}
		if err := e.Run(context.Background()); err != nil {
			errs = append(errs, err)
		}
	}
	m.err = errors.Join(errs...)
	if p := s.parent; p != nil {
		p.mu.Lock()
		if pm := p.mu.more; pm != nil {
			if i := slices.Index(pm.children, s); i >= 0 {
				pm.children = slices.Delete(pm.children, i, i+1)
			}
		}
		p.mu.Unlock()
	}
	close(m.done)
}

func disposedErr(s *Scope) error {
	return messages.Errorf(messages.CodeScopeDisposed, "scope %q is disposed", s.label)
}
