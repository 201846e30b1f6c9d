package controller

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/scope"
)

// Controller is the handle to the job-controller actor. Remote callers send the
// protobuf messages to PID(); local ones can use the methods.
type Controller struct {
	root    *actor.RootContext
	jobs    *registry.Client
	pid     *actor.PID
	effect  *scope.Effect
	streams atomic.Uint64
}

// Spawn starts the job-controller actor over the job registry jobs, stopped with
// the global scope global, reporting its lifecycle to inspector (the facade,
// troupe.System.StartController, passes its own). It attaches no job controller
// (SPEC §1.3 rule 25): the human surface can kill and observe, never arm Start.
func Spawn(jobs *registry.Client, global *scope.Scope, inspector *actor.PID, cfg Config) (*Controller, error) {
	cfg = cfg.withDefaults()
	a := &controllerActor{cfg: cfg, jobs: jobs, rosters: map[key]*roster{}, follows: map[key]*follow{},
		inspector: inspector}
	root := jobs.Root()
	pid, err := root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return a }), "job-controller")
	if err != nil {
		return nil, err
	}
	eff, err := jobs.OnJobsChanged(context.Background(), global, func(o registry.Owner) {
		root.Send(pid, &changed{session: o.Session})
	})
	if err != nil {
		_ = root.StopFuture(pid).Wait()
		return nil, err
	}
	// Stopping the actor goes with the global scope (before the system stops).
	stop, err := global.Add("job-controller.stop()", func(ctx context.Context) error {
		_ = eff.Run(ctx)
		return root.StopFuture(pid).Wait()
	})
	if err != nil {
		_ = eff.Run(context.Background())
		_ = root.StopFuture(pid).Wait()
		return nil, err
	}
	return &Controller{root: root, jobs: jobs, pid: pid, effect: stop}, nil
}

// PID is the job-controller actor's address.
func (c *Controller) PID() *actor.PID { return c.pid }

// Stop stops the controller (it also stops with the system). Idempotent.
func (c *Controller) Stop(ctx context.Context) error { return c.effect.Run(ctx) }

// Kill is job.kill {sessionId, jobId}.
func (c *Controller) Kill(ctx context.Context, session, id string) (messages.KillResult, error) {
	reply, err := c.request(ctx, &messages.JobKill{SessionId: session, JobId: id})
	if err != nil {
		return 0, err
	}
	r, ok := reply.(*messages.JobKillReply)
	if !ok {
		return 0, errors.New("job-controller: unexpected reply")
	}
	if r.Error != nil {
		return 0, messages.FromProto(r.Error)
	}
	return r.Outcome, nil
}

// RecordBounds returns the offset of the oldest retained byte and the total
// appended of a job's output record, as session's user sees it (the fence of
// job.follow: session "" sees unowned jobs only); has is false for a job that
// declared no record. It asks the registry directly, with the user authority.
func (c *Controller) RecordBounds(ctx context.Context, session, id string) (earliest, total int64, has bool, err error) {
	rec, _, err := c.jobs.Record(ctx, id, forUser(session))
	if err != nil || rec == nil {
		return 0, 0, false, err
	}
	earliest, total = rec.Bounds()
	return earliest, total, true, nil
}

func (c *Controller) request(ctx context.Context, msg proto.Message) (any, error) {
	reply := make(chan any, 1)
	sink := c.root.Spawn(actor.PropsFromFunc(func(ac actor.Context) {
		if m, ok := ac.Message().(proto.Message); ok {
			reply <- m
			ac.Stop(ac.Self())
		}
	}))
	c.root.RequestWithCustomSender(c.pid, msg, sink)
	select {
	case r := <-reply:
		return r, nil
	case <-ctx.Done():
		c.root.Stop(sink)
		return nil, context.Cause(ctx)
	}
}

// Stream is an open job.list or job.follow stream, received as Go values.
type Stream[T proto.Message] struct {
	// Frames delivers the stream's frames; it is closed when the stream ends (a
	// follow's terminal frame) or is closed.
	Frames <-chan T
	close  func()
}

// Close ends the stream. Idempotent.
func (s *Stream[T]) Close() { s.close() }

// List opens job.list for session.
func (c *Controller) List(session string) *Stream[*messages.JobRoster] {
	id := "list-" + strconv.FormatUint(c.streams.Add(1), 10)
	return open(c, id, &messages.JobListOpen{SessionId: session, StreamId: id}, func(*messages.JobRoster) bool { return false })
}

// Follow opens job.follow for a job; session "" sees unowned jobs only; from nil is 0.
func (c *Controller) Follow(session, jobID string, from *int64) *Stream[*messages.JobFollowFrame] {
	id := "follow-" + strconv.FormatUint(c.streams.Add(1), 10)
	return open(c, id, &messages.JobFollowOpen{SessionId: session, JobId: jobID, From: from, StreamId: id},
		func(f *messages.JobFollowFrame) bool { return f.GetStatus() != nil || f.GetError() != nil })
}

// streamBuffer is how many frames a Stream holds before its sink actor waits for
// the reader.
const streamBuffer = 256

func open[T proto.Message](c *Controller, id string, req proto.Message, last func(T) bool) *Stream[T] {
	frames := make(chan T, streamBuffer)
	done := make(chan struct{})
	var closed atomic.Bool
	sink := c.root.Spawn(actor.PropsFromFunc(func(ac actor.Context) {
		switch m := ac.Message().(type) {
		case T:
			if closed.Load() {
				return
			}
			select {
			case frames <- m:
			case <-done:
				return
			}
			if last(m) && closed.CompareAndSwap(false, true) {
				close(frames)
				ac.Stop(ac.Self())
			}
		case *actor.Stopped:
			if closed.CompareAndSwap(false, true) {
				close(frames)
			}
		}
	}))
	c.root.RequestWithCustomSender(c.pid, req, sink)
	var once atomic.Bool
	return &Stream[T]{Frames: frames, close: func() {
		if once.CompareAndSwap(false, true) {
			close(done)
			c.root.RequestWithCustomSender(c.pid, &messages.StreamClose{StreamId: id}, sink)
			_ = c.root.StopFuture(sink).Wait()
		}
	}}
}
