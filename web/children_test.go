package web_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/web"
)

// flakyLister returns its list, or fails while fail is set.
type flakyLister struct {
	list atomic.Pointer[[]web.Child]
	fail atomic.Bool
}

func (l *flakyLister) Children(context.Context, string) ([]web.Child, error) {
	if l.fail.Load() {
		return nil, errors.New("store offline")
	}
	return *l.list.Load(), nil
}

func TestWebChildrenAreRelistedAndAFailingListerKeepsTheLastGoodList(t *testing.T) {
	l := &flakyLister{}
	l.list.Store(&[]web.Child{{ID: "c-1", Label: "review", Status: "idle", Epoch: 2, Queued: 0}, {ID: "c-2", Status: "ready"}})
	e := newEnv(t, envOpts{children: l})
	s := open(t, e.url("events?session=s1"), nil)
	s.next("hello")
	r := s.next("rows")
	require.Equal(t, `{"session":"s1","jobs":[],"children":[{"id":"c-1","label":"review","status":"idle","epoch":2,"queued":0},{"id":"c-2","status":"ready"}]}`, r.Data)
	l.fail.Store(true)
	p := e.prod(t)
	_, err := e.sys.Jobs().Start(bg, p.Spec(e.a))
	require.NoError(t, err)
	withJob := rowsOf(t, s.skipTo("rows"))
	require.Len(t, withJob.Jobs, 1)
	require.Len(t, withJob.Children, 2, "the last good list is kept")
	require.Contains(t, e.logs.String(), "web: child lister failed")
	l.fail.Store(false)
	l.list.Store(&[]web.Child{{ID: "c-1", Label: "review", Status: "running", Epoch: 2, Queued: 1}})
	changed := s.rowsUntil(func(r rowsJSON) bool { return len(r.Children) == 1 })
	require.Equal(t, "running", changed.Children[0]["status"])
	require.EqualValues(t, 1, changed.Children[0]["queued"])
}
