package controller

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/supervision"
)

// Defaults of SPEC §4 (sibling streams).
const (
	DefaultObserveFlush         = 100 * time.Millisecond
	DefaultObserveMaxFrameBytes = 65536
	// ReasonUser is the kill reason of job.kill.
	ReasonUser = "cancelled by the user"
)

// Config configures the controller. The zero value means the defaults.
type Config struct {
	ObserveFlush         time.Duration
	ObserveMaxFrameBytes int
}

func (c Config) withDefaults() Config {
	if c.ObserveFlush <= 0 {
		c.ObserveFlush = DefaultObserveFlush
	}
	if c.ObserveMaxFrameBytes <= 0 {
		c.ObserveMaxFrameBytes = DefaultObserveMaxFrameBytes
	}
	return c
}

type key struct{ to, stream string }

type roster struct {
	to      *actor.PID
	stream  string
	session string
	dirty   bool
}

type follow struct {
	to       *actor.PID
	stream   string
	session  string
	jobID    string
	rec      *job.Record
	cursor   int64
	unsub    func()
	cancel   context.CancelFunc
	settled  *messages.JobSnapshot
	dirty    bool
	finished bool
}

// Internal messages.
type (
	changed      struct{ session string } // "" = an unowned job: every roster
	outputDirty  struct{ k key }
	flushTick    struct{}
	followSettle struct {
		k    key
		snap *messages.JobSnapshot
		err  error
	}
)

type controllerActor struct {
	cfg     Config
	jobs    *registry.Client
	rosters map[key]*roster
	follows map[key]*follow
	timer   *time.Timer // the pending flush, nil if none
	// inspector receives the actor's lifecycle events (the supervision tree's).
	inspector *actor.PID
	// life bounds the kills in flight: cancelled when the actor stops.
	life    context.Context
	endLife context.CancelFunc
}

func (a *controllerActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.JobKill:
		// The kill waits for the producer's Cancel, which may block: it runs off the
		// mailbox, so one stuck job holds up no other human request.
		sender, root, life := c.Sender(), c.ActorSystem().Root, a.life
		go func() {
			r := a.kill(life, m)
			if sender != nil {
				root.Send(sender, r)
			}
		}()
	case *messages.JobListOpen:
		a.openRoster(c, m)
	case *messages.JobFollowOpen:
		a.openFollow(c, m)
	case *messages.StreamClose:
		if c.Sender() != nil {
			a.close(key{c.Sender().String(), m.StreamId})
		}
	case *changed:
		for _, r := range a.rosters {
			if m.session == "" || r.session == m.session {
				r.dirty = true
			}
		}
		a.schedule(c)
	case *outputDirty:
		if f := a.follows[m.k]; f != nil {
			f.dirty = true
			a.schedule(c)
		}
	case *flushTick:
		a.timer = nil
		a.flush(c)
	case *followSettle:
		a.settle(c, m)
	case *actor.Terminated:
		for k := range a.rosters {
			if k.to == m.Who.String() {
				a.close(k)
			}
		}
		for k := range a.follows {
			if k.to == m.Who.String() {
				a.close(k)
			}
		}
	case *actor.Stopping:
		if a.endLife != nil {
			a.endLife()
		}
		if a.timer != nil {
			a.timer.Stop()
		}
		for k := range a.follows {
			a.close(k)
		}
		clear(a.rosters)
	case *actor.Started:
		a.life, a.endLife = context.WithCancel(context.Background())
		supervision.Emit(c, a.inspector, supervision.Event{Kind: supervision.Spawned,
			Node: supervision.Ref{Kind: supervision.KindController, ID: c.Self().Id}, Actor: c.Self().Id})
	case *actor.Stopped:
		supervision.Emit(c, a.inspector, supervision.Event{Kind: supervision.Stopped,
			Node: supervision.Ref{Kind: supervision.KindController, ID: c.Self().Id}, Cause: supervision.CauseTeardown})
	}
}

// kill is job.kill: lookup, fence and a non-claiming kill, in one registry message.
func (a *controllerActor) kill(ctx context.Context, m *messages.JobKill) *messages.JobKillReply {
	res, _, err := a.jobs.Kill(ctx, m.JobId, forUser(m.SessionId), registry.KillOptions{Reason: ReasonUser, NoClaim: true})
	if err != nil {
		return &messages.JobKillReply{Error: notFound(err, m.SessionId, m.JobId)}
	}
	return &messages.JobKillReply{Outcome: res}
}

// notFound maps unknown and foreign jobs to job/not-found, keeping the original
// message; any other error (a failing cancel) stays as it is.
func notFound(err error, session, id string) *messages.ErrorInfo {
	var e *messages.Error
	if errors.As(err, &e) && (e.Code == messages.CodeNotFound || e.Code == messages.CodeForeign) {
		return &messages.ErrorInfo{Code: string(messages.CodeNotFound), Message: e.Message,
			Details: map[string]string{"sessionId": session, "jobId": job.CleanID(id)}}
	}
	if errors.As(err, &e) {
		return e.Proto()
	}
	return &messages.ErrorInfo{Message: err.Error()}
}

func (a *controllerActor) openRoster(c actor.Context, m *messages.JobListOpen) {
	to := c.Sender()
	if to == nil {
		return
	}
	c.Watch(to)
	r := &roster{to: to, stream: m.StreamId, session: m.SessionId}
	a.rosters[key{to.String(), m.StreamId}] = r
	a.sendRoster(c, r)
}

func (a *controllerActor) sendRoster(c actor.Context, r *roster) {
	r.dirty = false
	jobs, err := a.jobs.List(context.Background(), forUser(r.session))
	frame := &messages.JobRoster{StreamId: r.stream}
	if err != nil {
		frame.Error = notFound(err, r.session, "")
	}
	for _, s := range jobs {
		frame.Jobs = append(frame.Jobs, messages.PublicOf(s))
	}
	c.Send(r.to, frame)
}

func (a *controllerActor) openFollow(c actor.Context, m *messages.JobFollowOpen) {
	to := c.Sender()
	if to == nil {
		return
	}
	rec, snap, err := a.jobs.Record(context.Background(), m.JobId, forUser(m.SessionId))
	if err != nil {
		c.Send(to, &messages.JobFollowFrame{StreamId: m.StreamId,
			Frame: &messages.JobFollowFrame_Error{Error: notFound(err, m.SessionId, m.JobId)}})
		return
	}
	if m.From != nil && *m.From < 0 {
		_, _, _, err := job.NewRecord().Read(*m.From)
		c.Send(to, &messages.JobFollowFrame{StreamId: m.StreamId,
			Frame: &messages.JobFollowFrame_Error{Error: notFound(err, m.SessionId, m.JobId)}})
		return
	}
	c.Watch(to)
	k := key{to.String(), m.StreamId}
	ctx, cancel := context.WithCancel(context.Background())
	f := &follow{to: to, stream: m.StreamId, session: m.SessionId, jobID: m.JobId, rec: rec, cancel: cancel}
	if m.From != nil {
		f.cursor = *m.From
	}
	a.follows[k] = f
	opened := &messages.FollowOpened{Job: messages.PublicOf(snap), HasRecord: rec != nil}
	if rec != nil {
		opened.Earliest, opened.Total = rec.Bounds()
		root, self := c.ActorSystem().Root, c.Self()
		f.unsub = rec.Subscribe(func() { root.Send(self, &outputDirty{k: k}) })
		f.dirty = true
		a.schedule(c)
	}
	c.Send(to, &messages.JobFollowFrame{StreamId: m.StreamId, Frame: &messages.JobFollowFrame_Opened{Opened: opened}})
	root, self, jobs := c.ActorSystem().Root, c.Self(), a.jobs
	go func() {
		snap, err := jobs.AwaitSettled(ctx, m.JobId, forUser(m.SessionId))
		if ctx.Err() == nil {
			root.Send(self, &followSettle{k: k, snap: snap, err: err})
		}
	}()
}

// schedule arranges one flush after ObserveFlush: changes within it coalesce.
func (a *controllerActor) schedule(c actor.Context) {
	if a.timer != nil {
		return
	}
	root, self := c.ActorSystem().Root, c.Self()
	a.timer = time.AfterFunc(a.cfg.ObserveFlush, func() { root.Send(self, &flushTick{}) })
}

func (a *controllerActor) flush(c actor.Context) {
	for _, r := range a.rosters {
		if r.dirty {
			a.sendRoster(c, r)
		}
	}
	for _, f := range a.follows {
		if f.dirty {
			a.sendOutput(c, f)
		}
	}
}

// sendOutput streams the record from the follow's cursor in frames of at most
// ObserveMaxFrameBytes (a single larger chunk goes whole).
func (a *controllerActor) sendOutput(c actor.Context, f *follow) {
	f.dirty = false
	if f.rec == nil {
		return
	}
	chunks, next, lossy, err := f.rec.Read(f.cursor)
	if err != nil || len(chunks) == 0 && !lossy {
		f.cursor = max(f.cursor, next)
		return
	}
	var frame *messages.FollowOutput
	size := 0
	emit := func() {
		if frame != nil {
			c.Send(f.to, &messages.JobFollowFrame{StreamId: f.stream, Frame: &messages.JobFollowFrame_Output{Output: frame}})
		}
		frame, size = nil, 0
	}
	for _, ch := range chunks {
		if frame != nil && size+len(ch.Text) > a.cfg.ObserveMaxFrameBytes {
			emit()
		}
		if frame == nil {
			frame = &messages.FollowOutput{Lossy: lossy}
			lossy = false
		}
		frame.Chunks = append(frame.Chunks, &messages.RecordChunk{Offset: ch.Offset, Text: ch.Text, Channel: ch.Channel, GapBefore: ch.GapBefore})
		size += len(ch.Text)
		frame.Next = ch.Offset + int64(len(ch.Text))
	}
	if frame == nil && lossy {
		frame = &messages.FollowOutput{Lossy: true, Next: next}
	}
	emit()
	f.cursor = next
}

// settle ends a follow: the rest of the record, then the terminal status frame.
func (a *controllerActor) settle(c actor.Context, m *followSettle) {
	f := a.follows[m.k]
	if f == nil {
		return
	}
	if m.err != nil {
		c.Send(f.to, &messages.JobFollowFrame{StreamId: f.stream,
			Frame: &messages.JobFollowFrame_Error{Error: notFound(m.err, f.session, f.jobID)}})
	} else {
		a.sendOutput(c, f)
		c.Send(f.to, &messages.JobFollowFrame{StreamId: f.stream,
			Frame: &messages.JobFollowFrame_Status{Status: messages.PublicOf(m.snap)}})
	}
	a.close(m.k)
}

func (a *controllerActor) close(k key) {
	delete(a.rosters, k)
	if f := a.follows[k]; f != nil {
		if f.unsub != nil {
			f.unsub()
		}
		f.cancel()
		delete(a.follows, k)
	}
}
