package registry

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/messages"
)

// receiveProto serves the wire forms of the job requests (messages.*Request), so
// an actor on another node — or any sender of protobuf messages — can read, list,
// kill and wait on jobs. Each request is answered with its *Reply to the sender.
// It reports whether the message was one of them.
//
// A request is fenced by the session its credential proves (auth.go), never by the
// session string alone nor by its sender PID: one naming a session without that
// session's current credential is refused with job/unauthenticated before any
// lookup, so it learns nothing and no producer hook runs.
func (r *registryActor) receiveProto(c actor.Context) bool {
	switch m := c.Message().(type) {
	case *messages.GetRequest:
		caller, err := r.authenticate(m.CallerSession, m.CallerCredential)
		if err != nil {
			c.Respond(&messages.GetReply{Error: errorInfo(err)})
			return true
		}
		rec, err := r.access(m.JobId, caller)
		if err != nil {
			c.Respond(&messages.GetReply{Error: errorInfo(err)})
			return true
		}
		c.Respond(&messages.GetReply{Snapshot: rec.snapshot()})
	case *messages.ListRequest:
		caller, err := r.authenticate(m.CallerSession, m.CallerCredential)
		if err != nil {
			c.Respond(&messages.ListReply{Error: errorInfo(err)})
			return true
		}
		if r.disposed {
			c.Respond(&messages.ListReply{Error: errorInfo(errDisposed())})
			return true
		}
		r.sweep()
		recs := r.idx.list(caller)
		out := make([]*messages.JobSnapshot, len(recs))
		for i, rec := range recs {
			out[i] = rec.snapshot()
		}
		c.Respond(&messages.ListReply{Jobs: out})
	case *messages.ReadRequest:
		caller, err := r.authenticate(m.CallerSession, m.CallerCredential)
		if err != nil {
			c.Respond(&messages.ReadReply{Error: errorInfo(err)})
			return true
		}
		reply := make(chan job.ReadResult, 1)
		r.read(c, &job.Read{ID: m.JobId, Caller: caller, Reply: reply}, false)
		r.relay(c, func(stopped <-chan struct{}) proto.Message {
			select {
			case res := <-reply:
				return &messages.ReadReply{Text: res.Text, Snapshot: res.Snapshot, Error: errorInfo(res.Err)}
			case <-stopped:
				return nil
			}
		})
	case *messages.KillRequest:
		caller, err := r.authenticate(m.CallerSession, m.CallerCredential)
		if err != nil {
			c.Respond(&messages.KillReply{Error: errorInfo(err)})
			return true
		}
		reply := make(chan job.KillResult, 1)
		r.kill(c, &job.Kill{ID: m.JobId, Caller: caller, Reason: m.Reason, NoClaim: m.NoClaim, Reply: reply}, false)
		r.relay(c, func(stopped <-chan struct{}) proto.Message {
			select {
			case res := <-reply:
				return &messages.KillReply{Result: res.Result, Snapshot: res.Snapshot, Error: errorInfo(res.Err)}
			case <-stopped:
				return nil
			}
		})
	case *messages.WaitRequest:
		caller, err := r.authenticate(m.CallerSession, m.CallerCredential)
		if err != nil {
			c.Respond(&messages.WaitReply{Error: errorInfo(err)})
			return true
		}
		timeout := time.Duration(m.TimeoutMs) * time.Millisecond
		wctx, cancel := context.WithTimeoutCause(context.Background(), timeout, job.ErrWaitTimeout)
		reply := make(chan job.WaitResult, 1)
		token := r.client.tokens.Add(1)
		self := c.Self()
		r.wait(c, &job.Wait{ID: m.JobId, Caller: caller, Timeout: timeout, Token: token, Ctx: wctx, Reply: reply})
		r.relay(c, func(stopped <-chan struct{}) proto.Message {
			defer cancel()
			var res job.WaitResult
			select {
			case res = <-reply:
			case <-stopped:
				return nil
			case <-wctx.Done():
				r.client.root.Send(self, &asCaller{msg: &job.WaitEnd{ID: m.JobId, Token: token}})
				select {
				case res = <-reply:
				case <-stopped:
					return nil
				}
			}
			return &messages.WaitReply{Snapshot: res.Snapshot, Error: errorInfo(res.Err)}
		})
	default:
		return false
	}
	return true
}

// relay answers the current request's sender from a goroutine once await produces
// the reply; await gives up (returns nil) if the system stops first.
func (r *registryActor) relay(c actor.Context, await func(stopped <-chan struct{}) proto.Message) {
	sender, root, stopped := c.Sender(), c.ActorSystem().Root, r.client.stopped
	go func() {
		if msg := await(stopped); msg != nil && sender != nil {
			root.Send(sender, msg)
		}
	}()
}

func errorInfo(err error) *messages.ErrorInfo {
	if err == nil {
		return nil
	}
	if e, ok := err.(*messages.Error); ok {
		return e.Proto()
	}
	return &messages.ErrorInfo{Code: string(messages.CodeOf(err)), Message: err.Error()}
}
