package protocol

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
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

// credentialOf returns a wire request's session and credential.
func credentialOf(req proto.Message) (string, []byte) {
	type asserted interface {
		GetCallerSession() string
		GetCallerCredential() []byte
	}
	a := req.(asserted)
	return a.GetCallerSession(), a.GetCallerCredential()
}

// setCredential replaces a request's credential.
func setCredential(req proto.Message, cred []byte) {
	switch r := req.(type) {
	case *messages.GetRequest:
		r.CallerCredential = cred
	case *messages.ListRequest:
		r.CallerCredential = cred
	case *messages.ReadRequest:
		r.CallerCredential = cred
	case *messages.KillRequest:
		r.CallerCredential = cred
	case *messages.WaitRequest:
		r.CallerCredential = cred
	}
}

// Placeholders the fuzzer's inputs may carry in caller_credential; each is replaced
// by that session's real credential (minted at random when the target starts), so
// authenticated requests are reachable from the corpus.
var (
	aliceCredential = []byte("<alice's credential>")
	bobCredential   = []byte("<bob's credential>")
)

// FuzzWireRequests: arbitrary bytes decoded as any of the registry's wire requests
// and sent to it — ids, sessions, credentials, reasons and timeouts the fuzzer
// chooses — always get the matching reply within the request timeout, and an error
// in it always carries a stable code (job/… or troupe/…). The registry never
// panics, hangs or answers with the wrong type.
//
// Its authorization oracle is computed from the request alone, not from the
// registry: a request is authenticated iff it names no session, or names alice or
// bob with exactly that session's credential. An unauthenticated one is refused with
// job/unauthenticated and returns no jobs, no output, no snapshot; only alice,
// authenticated, gets anything of alice's job (bash-1) — anyone else is refused
// (job/foreign, or a list without it) — and the producer's Cancel and ReadOutput
// run only for alice's authenticated kill and read of bash-1.
func FuzzWireRequests(f *testing.F) {
	seed := func(sel byte, m proto.Message) {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(sel, b)
	}
	a, b := aliceCredential, bobCredential
	seed(0, &messages.GetRequest{JobId: "bash-1", CallerSession: "alice"})
	seed(0, &messages.GetRequest{JobId: "bash-1", CallerSession: "alice", CallerCredential: a})
	seed(0, &messages.GetRequest{JobId: "bash-1", CallerSession: "bob", CallerCredential: b})
	seed(0, &messages.GetRequest{JobId: "bash-1", CallerSession: "bob", CallerCredential: a})
	seed(0, &messages.GetRequest{JobId: "", CallerSession: ""})
	seed(0, &messages.GetRequest{JobId: "bash-\u00e9-1\x00", CallerSession: "alice", CallerCredential: a})
	seed(1, &messages.ListRequest{CallerSession: "alice"})
	seed(1, &messages.ListRequest{CallerSession: "alice", CallerCredential: a})
	seed(1, &messages.ListRequest{CallerSession: "bob", CallerCredential: b})
	seed(2, &messages.ReadRequest{JobId: "bash-1", CallerSession: "alice", CallerCredential: a})
	seed(2, &messages.ReadRequest{JobId: "bash-1", CallerSession: "alice", CallerCredential: b})
	seed(3, &messages.KillRequest{JobId: "bash-1", CallerSession: "alice", Reason: strings.Repeat("r", 300)})
	seed(3, &messages.KillRequest{JobId: "bash-1", CallerSession: "bob", CallerCredential: b, Reason: "not mine"})
	seed(3, &messages.KillRequest{JobId: "nope-9007199254740993", NoClaim: true})
	seed(4, &messages.WaitRequest{JobId: "bash-1", CallerSession: "alice", CallerCredential: a, TimeoutMs: -5})
	seed(4, &messages.WaitRequest{JobId: "bash-1", CallerSession: "alice", CallerCredential: a, TimeoutMs: 1})
	seed(4, &messages.WaitRequest{JobId: "bash-1", CallerSession: strings.Repeat("é", 200), CallerCredential: []byte{0}, TimeoutMs: 1})
	f.Add(byte(2), []byte{0xff, 0xff, 0xff})

	sys, _ := troupetest.Served(f)
	alice := troupetest.Agent(f, sys, "alice")
	bob := troupetest.Agent(f, sys, "bob")
	creds := map[string][]byte{}
	for name, agent := range map[string]*owner.Agent{"alice": alice, "bob": bob} {
		c, err := sys.Jobs().WireCredential(context.Background(), agent)
		if err != nil {
			f.Fatal(err)
		}
		creds[name] = c
	}
	var cancels, reads atomic.Int64
	done := make(chan job.Outcome, 1)
	var once sync.Once
	spec := job.Spec{Kind: "bash", Label: "alice's job", Owner: alice, Run: func() (job.Hooks, error) {
		return job.Hooks{
			Cancel: func(string) error {
				cancels.Add(1)
				once.Do(func() { done <- job.Outcome{Status: job.Killed, Detail: "signal: SIGTERM"} })
				return nil
			},
			ReadOutput: func() (string, error) { reads.Add(1); return "alice's output", nil },
			Done:       done,
		}, nil
	}}
	if _, err := sys.Jobs().Start(context.Background(), spec); err != nil { // bash-1 of alice, live
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
		session, cred := credentialOf(req)
		switch {
		case bytes.Equal(cred, aliceCredential):
			setCredential(req, creds["alice"])
		case bytes.Equal(cred, bobCredential):
			setCredential(req, creds["bob"])
		}
		session, cred = credentialOf(req)
		// The oracle: authenticated from the request and the credentials minted.
		want, known := creds[session]
		authenticated := session == "" || (known && bytes.Equal(cred, want))
		cancelsBefore, readsBefore := cancels.Load(), reads.Load()

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
		if !authenticated && e.GetCode() != string(messages.CodeUnauthenticated) {
			t.Fatalf("%T %v: unauthenticated request answered %v, want job/unauthenticated", req, req, e)
		}
		if authenticated && e.GetCode() == string(messages.CodeUnauthenticated) {
			t.Fatalf("%T %v: authenticated request refused: %v", req, req, e)
		}
		aliceJob := session == "alice" && authenticated
		if leak := leaked(reply); leak != "" && !aliceJob {
			t.Fatalf("%T %v as %q (authenticated %v): got %s of alice's job", req, req, session, authenticated, leak)
		}
		kill, isKill := req.(*messages.KillRequest)
		if cancels.Load() != cancelsBefore && !(aliceJob && isKill && kill.GetJobId() == "bash-1") {
			t.Fatalf("%T %v: the producer's Cancel ran", req, req)
		}
		read, isRead := req.(*messages.ReadRequest)
		if reads.Load() != readsBefore && !(aliceJob && isRead && read.GetJobId() == "bash-1") {
			t.Fatalf("%T %v: the producer's ReadOutput ran", req, req)
		}
	})
}

// leaked describes what of alice's job (bash-1) a reply carries, or "".
func leaked(reply any) string {
	var snaps []*messages.JobSnapshot
	switch r := reply.(type) {
	case *messages.GetReply:
		snaps = append(snaps, r.GetSnapshot())
	case *messages.ListReply:
		snaps = r.GetJobs()
	case *messages.ReadReply:
		if r.GetText() != "" {
			return "output " + strconv.Quote(r.GetText())
		}
		snaps = append(snaps, r.GetSnapshot())
	case *messages.KillReply:
		snaps = append(snaps, r.GetSnapshot())
	case *messages.WaitReply:
		snaps = append(snaps, r.GetSnapshot())
	}
	for _, s := range snaps {
		if s.GetOwnerSession() == "alice" {
			return "a snapshot"
		}
	}
	return ""
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
