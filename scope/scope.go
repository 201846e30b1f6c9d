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
// Every live agent incarnation has one, so it is kept to 96 B: what only some
// scopes use is made on first use — its chain by the first Chain, its children's
// list by the first Child, and what a disposal needs by the first Dispose.
type Scope struct {
	label  string
	parent *Scope
	id     ID
	chain  atomic.Pointer[[]ID] // root first, this scope last; built by the first Chain, then immutable

	mu struct {
		sync.Mutex
		effects  []*Effect
		children *[]*Scope // nil: none made yet
		disposal *disposal // nil until Dispose begins: non-nil is disposed
	}
}

// disposal is a scope's teardown once it has begun.
type disposal struct {
	done chan struct{} // closed when the teardown has finished
	err  error         // written before done closes, read after
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
	if s.mu.disposal != nil {
		return nil, disposedErr(s)
	}
	if s.mu.children == nil {
		s.mu.children = new([]*Scope)
	}
	*s.mu.children = append(*s.mu.children, c)
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
		d := p.mu.disposal != nil
		p.mu.Unlock()
		if d {
			return true
		}
	}
	return false
}

// Effect is one registration in a scope: 48 B (an agent incarnation's scope holds
// two). mu makes its run once: the first Run runs fn under it, a concurrent one
// waits for it, and res holds the outcome (nil: not run yet).
type Effect struct {
	scope *Scope
	label string
	fn    func(context.Context) error
	mu    sync.Mutex
	res   *error // &ranOK for a nil error (no allocation)
}

// ranOK is the outcome of every effect that returned nil.
var ranOK error

// Label names the effect (for example `jobs.ownerCleanup()`).
func (e *Effect) Label() string { return e.label }

// Add registers fn under label. fn runs at most once: on e.Run or on scope disposal.
func (s *Scope) Add(label string, fn func(context.Context) error) (*Effect, error) {
	e := &Effect{scope: s, label: label, fn: fn}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.disposal != nil {
		return nil, disposedErr(s)
	}
	s.mu.effects = append(s.mu.effects, e)
	return e, nil
}

// Run removes the effect from its scope and runs it, once; later calls return the
// first call's error without running it again.
func (e *Effect) Run(ctx context.Context) error {
	e.Detach()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.res == nil {
		if err := e.call(ctx); err != nil {
			e.res = &err
		} else {
			e.res = &ranOK
		}
		e.fn = nil // run: what it captured is garbage now
	}
	return *e.res
}

// call runs fn, turning a panic into an error.
func (e *Effect) call(ctx context.Context) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("scope effect %s panicked: %v", e.label, v)
		}
	}()
	return e.fn(ctx)
}

// Detach removes the effect from its scope without running it. The effect can
// still be Run explicitly.
func (e *Effect) Detach() {
	s := e.scope
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(s.mu.effects, e); i >= 0 {
		s.mu.effects = slices.Delete(s.mu.effects, i, i+1)
	}
}

// Effects lists the labels of the scope's live effects, oldest first.
func (s *Scope) Effects() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.mu.effects))
	for i, e := range s.mu.effects {
		out[i] = e.label
	}
	return out
}

// Dispose disposes the scope's children, then runs its effects newest first, and
// returns when they are done or when ctx ends, whichever comes first; a ctx that
// ends never stops the teardown itself. It is idempotent: every call waits for the
// same teardown. The returned error joins the effects' errors, or is ctx's error.
func (s *Scope) Dispose(ctx context.Context) error {
	s.mu.Lock()
	d := s.mu.disposal
	if d == nil {
		d = &disposal{done: make(chan struct{})}
		s.mu.disposal = d
		go s.teardown(d)
	}
	s.mu.Unlock()
	select {
	case <-d.done:
		return d.err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (s *Scope) teardown(d *disposal) {
	s.mu.Lock()
	var children []*Scope
	if s.mu.children != nil {
		children = *s.mu.children
	}
	s.mu.children = nil
	s.mu.Unlock()
	var errs []error
	for _, c := range slices.Backward(children) {
		if err := c.Dispose(context.Background()); err != nil {
			errs = append(errs, err)
		}
	}
	for {
		s.mu.Lock()
		n := len(s.mu.effects)
		if n == 0 {
			s.mu.Unlock()
			break
		}
		e := s.mu.effects[n-1]
		s.mu.Unlock()
		if err := e.Run(context.Background()); err != nil {
			errs = append(errs, err)
		}
	}
	d.err = errors.Join(errs...)
	if p := s.parent; p != nil {
		p.mu.Lock()
		if kids := p.mu.children; kids != nil {
			if i := slices.Index(*kids, s); i >= 0 {
				*kids = slices.Delete(*kids, i, i+1)
			}
		}
		p.mu.Unlock()
	}
	close(d.done)
}

func disposedErr(s *Scope) error {
	return messages.Errorf(messages.CodeScopeDisposed, "scope %q is disposed", s.label)
}
