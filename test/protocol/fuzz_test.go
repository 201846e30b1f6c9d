package protocol

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/supervision"
	"github.com/troupe-rt/troupe/troupetest"
)

// wireRequests are the request types the registry serves to any actor, by the
// fuzzer's selector byte.
var wireRequests = []func() proto.Message{
	func() proto.Message { return &messages.GetRequest{} },
	func() proto.Message { return &messages.ListRequest{} },
	func() proto.Message { return &messages.ReadRequest{} },
	func() proto.Message { return &messages.KillRequest{} },
	func() proto.Message { return &messages.WaitRequest{} },
}

// errorOf returns the reply's error, and whether the reply is the request's kind.
func errorOf(req proto.Message, reply any) (*messages.ErrorInfo, bool) {
	switch req.(type) {
	case *messages.GetRequest:
		r, ok := reply.(*messages.GetReply)
		return r.GetError(), ok
	case *messages.ListRequest:
		r, ok := reply.(*messages.ListReply)
		return r.GetError(), ok
	case *messages.ReadRequest:
		r, ok := reply.(*messages.ReadReply)
		return r.GetError(), ok
	case *messages.KillRequest:
		r, ok := reply.(*messages.KillReply)
		return r.GetError(), ok
	case *messages.WaitRequest:
		r, ok := reply.(*messages.WaitReply)
		return r.GetError(), ok
	}
	return nil, false
}

// FuzzWireRequests: arbitrary bytes decoded as any of the registry's wire requests
// and sent to it — ids, sessions, reasons and timeouts the fuzzer chooses — always
// get the matching reply within the request timeout, and an error in it always
// carries a stable code (job/… or troupe/…). The registry never panics, hangs or
// answers with the wrong type.
func FuzzWireRequests(f *testing.F) {
	seed := func(sel byte, m proto.Message) {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(sel, b)
	}
	seed(0, &messages.GetRequest{JobId: "bash-1", CallerSession: "alice"})
	seed(0, &messages.GetRequest{JobId: "bash-1", CallerSession: "bob"})
	seed(0, &messages.GetRequest{JobId: "", CallerSession: ""})
	seed(0, &messages.GetRequest{JobId: "bash-\u00e9-1\x00", CallerSession: "alice"})
	seed(1, &messages.ListRequest{CallerSession: "alice"})
	seed(2, &messages.ReadRequest{JobId: "bash-1", CallerSession: "alice"})
	seed(3, &messages.KillRequest{JobId: "bash-1", CallerSession: "alice", Reason: strings.Repeat("r", 300)})
	seed(3, &messages.KillRequest{JobId: "nope-9007199254740993", NoClaim: true})
	seed(4, &messages.WaitRequest{JobId: "bash-1", CallerSession: "alice", TimeoutMs: -5})
	seed(4, &messages.WaitRequest{JobId: "bash-1", CallerSession: "alice", TimeoutMs: 1})
	f.Add(byte(2), []byte{0xff, 0xff, 0xff})

	sys, _ := troupetest.Served(f)
	alice := troupetest.Agent(f, sys, "alice")
	p := troupetest.NewProducer()
	p.Stream = true
	p.OnCancel = &job.Outcome{Status: job.Killed, Detail: "signal: SIGTERM"}
	p.Emit("hello")
	if _, err := sys.Jobs().Start(context.Background(), p.Spec(alice)); err != nil { // bash-1 of alice, live
		f.Fatal(err)
	}
	root, pid := sys.Actors().Root, sys.Jobs().PID()

	f.Fuzz(func(t *testing.T, sel byte, data []byte) {
		req := wireRequests[int(sel)%len(wireRequests)]()
		if err := proto.Unmarshal(data, req); err != nil {
			return // not a message of this type: nothing is sent
		}
		if w, ok := req.(*messages.WaitRequest); ok && w.TimeoutMs > 20 {
			w.TimeoutMs = 20 // the fuzzer's waits are short; the timeout rules are its own tests'
		}
		reply, err := root.RequestFuture(pid, req, requestTimeout).Result()
		if err != nil {
			t.Fatalf("%T %v: no reply: %v", req, req, err)
		}
		e, ok := errorOf(req, reply)
		if !ok {
			t.Fatalf("%T %v: reply is %T", req, req, reply)
		}
		if e != nil && !strings.HasPrefix(e.GetCode(), "job/") && !strings.HasPrefix(e.GetCode(), "troupe/") {
			t.Fatalf("%T %v: error without a stable code: %v", req, req, e)
		}
	})
}

// FuzzLifecycleEventFromProto: any bytes that decode as a LifecycleEvent convert
// to an Event or to a coded error, never a panic, and an accepted event converts
// back to the same wire form.
func FuzzLifecycleEventFromProto(f *testing.F) {
	f.Add([]byte{})
	for _, e := range []supervision.Event{
		{Seq: 1, Kind: supervision.Spawned, Node: supervision.Ref{Kind: supervision.KindJob, ID: "bash-1"},
			Parent: supervision.Ref{Kind: supervision.KindRegistry, ID: "registry"}, Session: "alice"},
		{Seq: 2, Kind: supervision.Settled, Node: supervision.Ref{Kind: supervision.KindJob, ID: "bash-1"},
			Cause: supervision.CausePanic, Status: "failed", Detail: "boom"},
	} {
		b, err := proto.Marshal(e.Proto())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p messages.LifecycleEvent
		if proto.Unmarshal(data, &p) != nil {
			return
		}
		e, err := supervision.EventFromProto(&p)
		if err != nil {
			if messages.CodeOf(err) == "" {
				t.Fatalf("uncoded error: %v", err)
			}
			return
		}
		back, err := supervision.EventFromProto(e.Proto())
		if err != nil {
			t.Fatalf("an accepted event does not convert back: %v", err)
		}
		if back.Seq != e.Seq || back.Kind != e.Kind || back.Node != e.Node || back.Cause != e.Cause || back.Detail != e.Detail {
			t.Fatalf("round trip changed the event: %v → %v", e, back)
		}
	})
}
