// Package protocol checks that the job registry serves its wire protocol: protobuf
// requests from any actor (as a remote node would send them) get protobuf replies.
package protocol

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/troupetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const requestTimeout = 5 * time.Second

func request[R proto.Message](t *testing.T, f func() (any, error)) R {
	t.Helper()
	v, err := f()
	require.NoError(t, err)
	r, ok := v.(R)
	require.Truef(t, ok, "reply is %T", v)
	return r
}

func TestProtocolRequestsGetProtoReplies(t *testing.T) {
	sys, _ := troupetest.Served(t)
	alice := troupetest.Agent(t, sys, "alice")
	p := troupetest.NewProducer()
	p.Stream = true
	p.Emit("hello")
	id, err := sys.Jobs().Start(context.Background(), p.Spec(alice))
	require.NoError(t, err)
	root, pid := sys.Actors().Root, sys.Jobs().PID()
	ask := func(msg proto.Message) func() (any, error) {
		return func() (any, error) { return root.RequestFuture(pid, msg, requestTimeout).Result() }
	}
	// Each session's requests carry its registered instance's wire credential.
	cred, err := sys.Jobs().WireCredential(context.Background(), alice)
	require.NoError(t, err)
	bobCred, err := sys.Jobs().WireCredential(context.Background(), troupetest.Agent(t, sys, "bob"))
	require.NoError(t, err)

	got := request[*messages.GetReply](t, ask(&messages.GetRequest{JobId: id, CallerSession: "alice", CallerCredential: cred}))
	require.Nil(t, got.Error)
	require.Equal(t, job.Running, got.Snapshot.Status)

	foreign := request[*messages.GetReply](t, ask(&messages.GetRequest{JobId: id, CallerSession: "bob", CallerCredential: bobCred}))
	require.Equal(t, string(messages.CodeForeign), foreign.Error.GetCode())
	require.Equal(t, "job "+id+" belongs to another session", foreign.Error.GetMessage())

	unknown := request[*messages.ReadReply](t, ask(&messages.ReadRequest{JobId: "bash-99"}))
	require.Equal(t, string(messages.CodeNotFound), unknown.Error.GetCode())
	require.Equal(t, "unknown job bash-99", unknown.Error.GetMessage())

	read := request[*messages.ReadReply](t, ask(&messages.ReadRequest{JobId: id, CallerSession: "alice", CallerCredential: cred}))
	require.Nil(t, read.Error)
	require.Equal(t, "hello", read.Text)

	list := request[*messages.ListReply](t, ask(&messages.ListRequest{CallerSession: "alice", CallerCredential: cred}))
	require.Len(t, list.Jobs, 1)
	require.Equal(t, id, list.Jobs[0].Id)

	timedOut := request[*messages.WaitReply](t, ask(&messages.WaitRequest{JobId: id, CallerSession: "alice", CallerCredential: cred, TimeoutMs: 5}))
	require.Nil(t, timedOut.Error)
	require.Equal(t, job.Running, timedOut.Snapshot.Status)
	require.False(t, timedOut.Snapshot.Reported)

	bad := request[*messages.WaitReply](t, ask(&messages.WaitRequest{JobId: id, CallerSession: "alice", CallerCredential: cred, TimeoutMs: 0}))
	require.Equal(t, "invalid wait timeout: expected a positive number of milliseconds, got 0", bad.Error.GetMessage())

	p.OnCancel = &job.Outcome{Status: job.Killed, Detail: "signal: SIGTERM"}
	kill := request[*messages.KillReply](t, ask(&messages.KillRequest{JobId: id, CallerSession: "alice", CallerCredential: cred, Reason: "cancelled by the user", NoClaim: true}))
	require.Nil(t, kill.Error)
	require.Equal(t, messages.KillResult_KILL_RESULT_REQUESTED, kill.Result)
	require.Equal(t, job.Stopping, kill.Snapshot.Status)
	require.False(t, kill.Snapshot.Reported)

	settled := request[*messages.WaitReply](t, ask(&messages.WaitRequest{JobId: id, CallerSession: "alice", CallerCredential: cred, TimeoutMs: 5000}))
	require.Nil(t, settled.Error)
	require.Equal(t, job.Killed, settled.Snapshot.Status)
	require.Equal(t, "signal: SIGTERM; cancelled by the user", settled.Snapshot.GetDetail())
	require.True(t, settled.Snapshot.Reported)
}
