package mailbox_test

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/troupe-rt/troupe/internal/mailbox"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// manual is a dispatcher whose runs wait until the test runs them, one at a time.
type manual struct {
	runs       []func()
	throughput int
}

func (d *manual) Schedule(fn func()) { d.runs = append(d.runs, fn) }
func (d *manual) Throughput() int {
	if d.throughput == 0 {
		return 300
	}
	return d.throughput
}

// runAll runs the scheduled runs (and those they schedule) until none is left.
func (d *manual) runAll() {
	for len(d.runs) > 0 {
		fn := d.runs[0]
		d.runs = d.runs[1:]
		fn()
	}
}

// invoker records what it is handed; a message equal to panicOn panics.
type invoker struct {
	mb        *mailbox.Mailbox
	got       []string
	escalated []any
	panicOn   string
	onUser    func(string)
}

func (v *invoker) InvokeSystemMessage(m any) { v.got = append(v.got, "sys:"+m.(string)) }
func (v *invoker) InvokeUserMessage(m any) {
	s, ok := m.(string)
	if !ok {
		s = "inline:" + string(m.(inline))
	}
	if s == v.panicOn {
		panic("boom " + s)
	}
	v.got = append(v.got, "user:"+s)
	if v.onUser != nil {
		v.onUser(s)
	}
}
func (v *invoker) EscalateFailure(reason any, m any) {
	v.escalated = append(v.escalated, reason, m)
	v.mb.PostSystemMessage(&actor.SuspendMailbox{})
}

// inline is an Inline message.
type inline string

func (inline) HandledBySender() bool { return true }

func newBox(d *manual) (*mailbox.Mailbox, *invoker) { return registered(mailbox.New(), d) }

// registered gives mb a recording invoker and the dispatcher d.
func registered(mb *mailbox.Mailbox, d *manual) (*mailbox.Mailbox, *invoker) {
	v := &invoker{mb: mb}
	mb.RegisterHandlers(v, d)
	return mb, v
}

func TestSystemBeforeUserEachFIFOAndOneRun(t *testing.T) {
	d := &manual{}
	mb, v := newBox(d)
	for _, m := range []string{"u1", "u2", "u3", "u4", "u5"} { // past the inline slots: the ring grows
		mb.PostUserMessage(m)
	}
	mb.PostSystemMessage("s1")
	mb.PostSystemMessage("s2")
	mb.PostSystemMessage("s3")
	require.Len(t, d.runs, 1, "one run is scheduled however many messages wait")
	require.Equal(t, 5, mb.UserMessageCount())
	d.runAll()
	require.Equal(t, []string{"sys:s1", "sys:s2", "sys:s3", "user:u1", "user:u2", "user:u3", "user:u4", "user:u5"}, v.got)
	require.Zero(t, mb.UserMessageCount())
	mb.PostUserMessage("u6")
	require.Len(t, d.runs, 1, "an idle mailbox schedules a new run")
	d.runAll()
	require.Equal(t, "user:u6", v.got[len(v.got)-1])
}

func TestPostFromHandlerRunsInSameRun(t *testing.T) {
	d := &manual{}
	mb, v := newBox(d)
	v.onUser = func(s string) {
		if s == "a" {
			mb.PostUserMessage("b") // a handler sending to its own mailbox: no new run
			require.Empty(t, d.runs)
		}
	}
	mb.PostUserMessage("a")
	d.runAll()
	require.Equal(t, []string{"user:a", "user:b"}, v.got)
}

func TestWrapAroundKeepsOrder(t *testing.T) {
	d := &manual{}
	mb, v := newBox(d)
	var want []string
	for round := range 5 {
		for i := range round + 2 {
			m := string(rune('a'+round)) + string(rune('0'+i))
			mb.PostUserMessage(m)
			want = append(want, "user:"+m)
		}
		d.runAll()
	}
	require.Equal(t, want, v.got)
}

func TestPanicEscalatesSuspendsAndResumes(t *testing.T) {
	d := &manual{}
	mb, v := newBox(d)
	v.panicOn = "bad"
	mb.PostUserMessage("ok1")
	mb.PostUserMessage("bad")
	mb.PostUserMessage("ok2")
	d.runAll()
	require.Equal(t, []string{"user:ok1"}, v.got, "suspended after the failure: user messages wait")
	require.Equal(t, []any{"boom bad", "bad"}, v.escalated)
	mb.PostSystemMessage("sys")
	d.runAll()
	require.Equal(t, []string{"user:ok1", "sys:sys"}, v.got, "a suspended mailbox still runs system messages")
	mb.PostSystemMessage(&actor.ResumeMailbox{})
	d.runAll()
	require.Equal(t, []string{"user:ok1", "sys:sys", "user:ok2"}, v.got)
}

func TestThroughputYieldsWithinOneRun(t *testing.T) {
	d := &manual{throughput: 2}
	mb, v := newBox(d)
	for _, m := range []string{"1", "2", "3", "4", "5", "6", "7"} {
		mb.PostUserMessage(m)
	}
	d.runAll()
	require.Equal(t, []string{"user:1", "user:2", "user:3", "user:4", "user:5", "user:6", "user:7"}, v.got)
}

type batch struct{ msgs []any }

func (b batch) GetMessages() []any { return b.msgs }

func TestBatchPostsItsMessagesThenItself(t *testing.T) {
	d := &manual{}
	mb := mailbox.New()
	var got []any
	mb.RegisterHandlers(recorder{&got}, d)
	b := batch{msgs: []any{"x", "y"}}
	mb.PostUserMessage(b)
	d.runAll()
	require.Equal(t, []any{"x", "y", b}, got)
}

type recorder struct{ got *[]any }

func (r recorder) InvokeSystemMessage(m any) { *r.got = append(*r.got, m) }
func (r recorder) InvokeUserMessage(m any)   { *r.got = append(*r.got, m) }
func (r recorder) EscalateFailure(_, _ any)  {}

// goDispatcher runs each run on a fresh goroutine (protoactor's default).
type goDispatcher struct{ wg *sync.WaitGroup }

func (d goDispatcher) Schedule(fn func()) { d.wg.Add(1); go func() { defer d.wg.Done(); fn() }() }
func (d goDispatcher) Throughput() int    { return 300 }

// counter counts user messages; only one run touches it at a time (-race checks).
type counter struct {
	n    int
	last map[int]int
}

func (c *counter) InvokeSystemMessage(any) {}
func (c *counter) InvokeUserMessage(m any) {
	p, ok := m.([2]int)
	if !ok {
		p = m.(inlinePair)
	}
	if prev, ok := c.last[p[0]]; ok && prev >= p[1] {
		panic("out of order")
	}
	c.last[p[0]] = p[1]
	c.n++
}
func (c *counter) EscalateFailure(r, _ any) { panic(r) }

// inlinePair is counter's message as an Inline one.
type inlinePair [2]int

func (inlinePair) HandledBySender() bool { return true }

// TestConcurrentSendersNoLossPerSenderFIFO: senders posting plain and Inline
// messages at once (some runs on the senders, the rest on the dispatcher) lose
// none, each sender's in order, one run at a time (-race).
func TestConcurrentSendersNoLossPerSenderFIFO(t *testing.T) {
	var wg sync.WaitGroup
	mb := mailbox.New()
	c := &counter{last: map[int]int{}}
	mb.RegisterHandlers(c, goDispatcher{&wg})
	const senders, each = 8, 2000
	var send sync.WaitGroup
	for s := range senders {
		send.Add(1)
		go func() {
			defer send.Done()
			for i := range each {
				if i%2 == 0 {
					mb.PostUserMessage([2]int{s, i})
				} else {
					mb.PostUserMessage(inlinePair{s, i}) // run by this sender when idle
				}
			}
		}()
	}
	send.Wait()
	wg.Wait()
	require.Equal(t, senders*each, c.n)
	require.Zero(t, mb.UserMessageCount())
}

// An idle job actor holds its mailbox: it must stay as small as protoactor's
// lock-free one (176 B with its queues and stubs): 160 B here plus the run's
// 16-B function value.
func TestIdleSize(t *testing.T) {
	var m mailbox.Mailbox
	require.LessOrEqual(t, unsafe.Sizeof(m), uintptr(160))
}

// TestInlineToIdleMailboxRunsOnSender: an Inline message posted to an idle mailbox
// is handled before PostUserMessage returns, with no run handed to the dispatcher;
// the mailbox is idle after it (a later message schedules a run as usual).
func TestInlineToIdleMailboxRunsOnSender(t *testing.T) {
	d := &manual{}
	mb, v := newBox(d)
	mb.PostUserMessage(inline("n"))
	require.Equal(t, []string{"user:inline:n"}, v.got)
	require.Empty(t, d.runs, "no run went to the dispatcher")
	require.Zero(t, mb.UserMessageCount())
	mb.PostUserMessage("u")
	require.Len(t, d.runs, 1, "the inline run ended: the mailbox is idle again")
	d.runAll()
	require.Equal(t, "user:u", v.got[len(v.got)-1])
}

// TestInlineRunIsBoundedToTheSendersMessage: what is posted while the sender's
// message is handled — user messages, Inline ones, system messages — is not
// handled on the sender: its run ends with its own message and hands the rest to
// the dispatcher, in order (system messages first), as one run.
func TestInlineRunIsBoundedToTheSendersMessage(t *testing.T) {
	d := &manual{}
	mb, v := newBox(d)
	v.onUser = func(s string) {
		if s == "inline:n" {
			mb.PostUserMessage("b")
			mb.PostUserMessage(inline("m")) // the run is the sender's: queued, not nested
			mb.PostSystemMessage("s")
			require.Empty(t, d.runs, "posts during the sender's run schedule nothing")
		}
	}
	mb.PostUserMessage(inline("n"))
	require.Equal(t, []string{"user:inline:n"}, v.got, "the sender handled its own message only")
	require.Len(t, d.runs, 1, "the rest went to the dispatcher as one run")
	require.Equal(t, 2, mb.UserMessageCount())
	mb.PostUserMessage(inline("late")) // the handed-off run is scheduled: queued behind
	require.Len(t, d.runs, 1)
	d.runAll()
	require.Equal(t, []string{"user:inline:n", "sys:s", "user:b", "user:inline:m", "user:inline:late"}, v.got)
	require.Zero(t, mb.UserMessageCount())
}

// notInline is an Inline message whose sender declines the run (HandledBySender
// false): it is queued for the dispatcher as any other.
type notInline string

func (notInline) HandledBySender() bool { return false }

func TestInlineDeclinedIsScheduled(t *testing.T) {
	d := &manual{}
	mb := mailbox.New()
	var got []any
	mb.RegisterHandlers(recorder{&got}, d)
	mb.PostUserMessage(notInline("x"))
	require.Empty(t, got, "not handled on the sender")
	require.Len(t, d.runs, 1)
	d.runAll()
	require.Equal(t, []any{notInline("x")}, got)
}

// TestInlineToBusyMailboxIsQueued: with a run scheduled, an Inline message is
// queued behind what waits (FIFO) and handled by that run, not by its sender.
func TestInlineToBusyMailboxIsQueued(t *testing.T) {
	d := &manual{}
	mb, v := newBox(d)
	mb.PostUserMessage("u1")
	mb.PostUserMessage(inline("n"))
	require.Empty(t, v.got, "not handled on the sender: a run is scheduled")
	require.Len(t, d.runs, 1)
	d.runAll()
	require.Equal(t, []string{"user:u1", "user:inline:n"}, v.got)
}

// TestInlinePanicLosesNoMessage: a handler that panics in an inline run is
// escalated (the escalation suspends the mailbox, as the actor's does) and the
// rest of the run goes to the dispatcher; the messages queued behind the failure
// stay queued, and run once the mailbox is resumed. An Inline message to an idle
// but suspended mailbox is queued with them, not handled.
func TestInlinePanicLosesNoMessage(t *testing.T) {
	d := &manual{}
	mb, v := newBox(d)
	v.panicOn = "inline:bad"
	mb.PostUserMessage(inline("bad"))
	require.Empty(t, v.got)
	require.Equal(t, []any{"boom inline:bad", inline("bad")}, v.escalated)
	require.Len(t, d.runs, 1, "the escalation's suspension is the dispatcher's to run")
	mb.PostUserMessage("after")
	d.runAll()
	require.Empty(t, v.got, "suspended: user messages wait")
	require.Equal(t, 1, mb.UserMessageCount(), "the message behind the failure is kept")
	mb.PostUserMessage(inline("while-suspended")) // idle but suspended: runs no user message
	require.Empty(t, v.got)
	require.Empty(t, d.runs)
	mb.PostSystemMessage(&actor.ResumeMailbox{})
	d.runAll()
	require.Equal(t, []string{"user:after", "user:inline:while-suspended"}, v.got)
	require.Zero(t, mb.UserMessageCount())
}

// TestTerminatedBySenderRunsOnItsSenderAlone: to an idle NewTerminatedBySender
// mailbox, a Terminated is handled before PostSystemMessage returns, with no run
// for the dispatcher; what is posted while it is handled is the dispatcher's; to
// a busy one, or any other system message, it is queued. A plain mailbox queues
// it. Fails without the sender's run (a dispatcher run) and with it draining what
// was posted meanwhile.
func TestTerminatedBySenderRunsOnItsSenderAlone(t *testing.T) {
	d := &manual{}
	mb := mailbox.NewTerminatedBySender()
	var got []any
	rec := &hookRecorder{got: &got}
	mb.RegisterHandlers(rec, d)
	gone := &actor.Terminated{}
	mb.PostSystemMessage(gone)
	require.Equal(t, []any{gone}, got, "handled on the sender")
	require.Empty(t, d.runs)

	got = nil
	rec.onSys = func(any) { mb.PostUserMessage("u"); mb.PostSystemMessage("s") }
	mb.PostSystemMessage(gone)
	rec.onSys = nil
	require.Equal(t, []any{gone}, got, "only its own message")
	require.Len(t, d.runs, 1)
	d.runAll()
	require.Equal(t, []any{gone, "s", "u"}, got)

	got = nil
	mb.PostUserMessage("busy") // a run is scheduled
	mb.PostSystemMessage(gone)
	require.Empty(t, got)
	mb.PostSystemMessage("other")
	d.runAll()
	require.Equal(t, []any{gone, "other", "busy"}, got)

	plain := mailbox.New()
	got = nil
	plain.RegisterHandlers(&hookRecorder{got: &got}, d)
	plain.PostSystemMessage(gone)
	require.Empty(t, got, "a plain mailbox queues it")
	d.runAll()
	require.Equal(t, []any{gone}, got)
}

// hookRecorder records every message and calls onSys for each system one.
type hookRecorder struct {
	got   *[]any
	onSys func(any)
}

func (r *hookRecorder) InvokeSystemMessage(m any) {
	*r.got = append(*r.got, m)
	if r.onSys != nil {
		r.onSys(m)
	}
}
func (r *hookRecorder) InvokeUserMessage(m any)  { *r.got = append(*r.got, m) }
func (r *hookRecorder) EscalateFailure(any, any) {}

// deferring returns a NewDeferring mailbox of limit 3 whose messages prefixed
// "e" may wait.
func deferring(d *manual) (*mailbox.Mailbox, *invoker) {
	return registered(mailbox.NewDeferring(3, func(m any) bool { s, ok := m.(string); return ok && s[0] == 'e' }), d)
}

func TestDeferredMessagesWaitForAMessageThatMayNot(t *testing.T) {
	d := &manual{}
	mb, v := deferring(d)
	mb.PostUserMessage("e1")
	mb.PostUserMessage("e2")
	require.Empty(t, d.runs, "messages that may wait schedule no run")
	require.Equal(t, 2, mb.UserMessageCount())
	mb.PostUserMessage("q1") // a query: the run it schedules handles what waited first
	require.Len(t, d.runs, 1)
	d.runAll()
	require.Equal(t, []string{"user:e1", "user:e2", "user:q1"}, v.got)

	mb.PostUserMessage("e3")
	mb.PostSystemMessage("s1") // a system message may not wait either
	require.Len(t, d.runs, 1)
	d.runAll()
	require.Equal(t, []string{"user:e1", "user:e2", "user:q1", "sys:s1", "user:e3"}, v.got)
}

func TestDeferredMessagesWaitAtMostLimit(t *testing.T) {
	d := &manual{}
	mb, v := deferring(d)
	mb.PostUserMessage("e1")
	mb.PostUserMessage("e2")
	require.Empty(t, d.runs)
	mb.PostUserMessage("e3") // the limit (3) queued: a run
	require.Len(t, d.runs, 1)
	mb.PostUserMessage("e4") // a run is scheduled: queued for it
	require.Len(t, d.runs, 1)
	d.runAll()
	require.Equal(t, []string{"user:e1", "user:e2", "user:e3", "user:e4"}, v.got)
	require.Zero(t, mb.UserMessageCount())
}

func TestEagerDeferringMailboxRunsEachMessage(t *testing.T) {
	d := &manual{}
	mb, v := deferring(d)
	mb.PostUserMessage("e1")
	require.Empty(t, d.runs)
	mb.SetEager(true) // what waits is scheduled at once
	require.Len(t, d.runs, 1)
	d.runAll()
	mb.PostUserMessage("e2")
	require.Len(t, d.runs, 1, "an eager mailbox schedules every message")
	d.runAll()
	mb.SetEager(false)
	mb.PostUserMessage("e3")
	require.Empty(t, d.runs)
	mb.PostUserMessage("q1")
	d.runAll()
	require.Equal(t, []string{"user:e1", "user:e2", "user:e3", "user:q1"}, v.got)

	plain, _ := newBox(d)
	plain.SetEager(false) // a New mailbox defers nothing, eager or not
	plain.PostUserMessage("e1")
	require.Len(t, d.runs, 1)
	d.runAll()
}

func TestInlineBehindDeferredMessagesIsScheduled(t *testing.T) {
	d := &manual{}
	mb, v := deferring(d)
	mb.PostUserMessage("e1")
	mb.PostUserMessage(inline("x")) // its sender would run e1, not its own: scheduled
	require.Len(t, d.runs, 1)
	require.Empty(t, v.got)
	d.runAll()
	require.Equal(t, []string{"user:e1", "user:inline:x"}, v.got)
}
