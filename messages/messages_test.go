package messages_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/troupe-rt/troupe/messages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sentinels lists every sentinel with its code; each must match only its own code.
var sentinels = []struct {
	code Code
	err  error
}{
	{messages.CodeNoController, messages.ErrNoController},
	{messages.CodeInvalidSpec, messages.ErrInvalidSpec},
	{messages.CodeNoAgentRegistry, messages.ErrNoAgentRegistry},
	{messages.CodeOwnerNotLive, messages.ErrOwnerNotLive},
	{messages.CodeCapacity, messages.ErrCapacity},
	{messages.CodeRunFailed, messages.ErrRunFailed},
	{messages.CodeNotFound, messages.ErrNotFound},
	{messages.CodeForeign, messages.ErrForeign},
	{messages.CodeInvalidWaitTimeout, messages.ErrInvalidWaitTimeout},
	{messages.CodeWaitAborted, messages.ErrWaitAborted},
	{messages.CodeCancelFailed, messages.ErrCancelFailed},
	{messages.CodeReadFailed, messages.ErrReadFailed},
	{messages.CodeDisposed, messages.ErrDisposed},
	{messages.CodeInvalidConfig, messages.ErrInvalidConfig},
	{messages.CodeScopeDisposed, messages.ErrScopeDisposed},
	{messages.CodeStopped, messages.ErrStopped},
	{messages.CodeRegistryFailed, messages.ErrRegistryFailed},
}

type Code = messages.Code

func TestErrorIsMatchesByCodeOnly(t *testing.T) {
	seen := map[Code]bool{}
	for _, s := range sentinels {
		require.False(t, seen[s.code], "duplicate code %q", s.code)
		seen[s.code] = true
		require.NotEmpty(t, s.code)
	}
	for _, s := range sentinels {
		t.Run(string(s.code), func(t *testing.T) {
			err := messages.Errorf(s.code, "some %s text", "formatted")
			require.Equal(t, "some formatted text", err.Error())
			for _, other := range sentinels {
				require.Equal(t, other.code == s.code, errors.Is(err, other.err),
					"errors.Is(%q error, sentinel %q)", s.code, other.code)
			}
			// Wrapped errors still match by code.
			wrapped := fmt.Errorf("start: %w", err)
			require.ErrorIs(t, wrapped, s.err)
			require.Equal(t, s.code, messages.CodeOf(wrapped))
		})
	}
}

func TestErrorIsIgnoresMessageAndDetails(t *testing.T) {
	a := &messages.Error{Code: messages.CodeCapacity, Message: "a", Details: map[string]string{"k": "v"}}
	b := &messages.Error{Code: messages.CodeCapacity, Message: "b"}
	require.ErrorIs(t, a, b)
	require.ErrorIs(t, b, a)
	require.NotErrorIs(t, a, &messages.Error{Code: messages.CodeForeign, Message: "a"})
	require.NotErrorIs(t, a, errors.New("a"), "a plain error never matches by code")
	require.False(t, a.Is(nil))
}

func TestErrorAsAndCodeOf(t *testing.T) {
	err := fmt.Errorf("outer: %w", messages.Errorf(messages.CodeNotFound, "unknown job %s", "bash-9"))
	var e *messages.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, messages.CodeNotFound, e.Code)
	require.Equal(t, "unknown job bash-9", e.Message)

	require.Equal(t, Code(""), messages.CodeOf(errors.New("plain")))
	require.Equal(t, Code(""), messages.CodeOf(nil))
}

func TestErrorUnwrapCause(t *testing.T) {
	cause := fmt.Errorf("transport: %w", io.ErrUnexpectedEOF)
	err := &messages.Error{Code: messages.CodeCancelFailed, Message: cause.Error(), Cause: cause}
	require.Same(t, cause, errors.Unwrap(err))
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "the cause chain is searched")
	require.ErrorIs(t, err, messages.ErrCancelFailed)

	// A coded cause is reachable too: the outer code matches through Is, the inner through Unwrap.
	inner := messages.Errorf(messages.CodeReadFailed, "read")
	outer := &messages.Error{Code: messages.CodeRunFailed, Message: "run", Cause: inner}
	require.ErrorIs(t, outer, messages.ErrRunFailed)
	require.ErrorIs(t, outer, messages.ErrReadFailed)
	require.Equal(t, messages.CodeRunFailed, messages.CodeOf(outer), "CodeOf reports the outermost code")

	require.NoError(t, errors.Unwrap(messages.Errorf(messages.CodeCapacity, "x")))
}

func TestErrorProtoRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		in   *messages.Error
	}{
		{"no details", &messages.Error{Code: messages.CodeCapacity, Message: "background job limit reached for this owner (limit: 10)"}},
		{"details", &messages.Error{Code: messages.CodeNotFound, Message: "unknown job bash-1", Details: map[string]string{"sessionId": "s1", "jobId": "bash-1"}}},
		{"empty", &messages.Error{}},
		{"unicode", &messages.Error{Code: messages.CodeForeign, Message: "job ☃-1 belongs to another session"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Through the wire encoding, not just the struct.
			raw, err := proto.Marshal(tc.in.Proto())
			require.NoError(t, err)
			var info messages.ErrorInfo
			require.NoError(t, proto.Unmarshal(raw, &info))

			back := messages.FromProto(&info)
			var e *messages.Error
			require.ErrorAs(t, back, &e)
			require.Equal(t, tc.in.Code, e.Code)
			require.Equal(t, tc.in.Message, e.Message)
			require.Equal(t, len(tc.in.Details), len(e.Details))
			for k, v := range tc.in.Details {
				require.Equal(t, v, e.Details[k])
			}
			require.NoError(t, e.Cause)
			require.ErrorIs(t, back, tc.in, "round trip keeps the code")
		})
	}
}

func TestErrorProtoDropsCause(t *testing.T) {
	cause := errors.New("boom")
	in := &messages.Error{Code: messages.CodeRunFailed, Message: "Error: boom", Cause: cause}
	back := messages.FromProto(in.Proto())
	require.NotErrorIs(t, back, cause, "the cause travels only as text")
	require.Equal(t, "Error: boom", back.Error())
}

func TestErrorProtoNil(t *testing.T) {
	var e *messages.Error
	require.Nil(t, e.Proto())
	err := messages.FromProto(nil)
	require.True(t, err == nil, "FromProto(nil) must be an untyped nil error, got %#v", err)
}

func TestJobStatusNameAndTerminal(t *testing.T) {
	cases := []struct {
		s        messages.JobStatus
		name     string
		terminal bool
	}{
		{messages.JobStatus_JOB_STATUS_RUNNING, "running", false},
		{messages.JobStatus_JOB_STATUS_STOPPING, "stopping", false},
		{messages.JobStatus_JOB_STATUS_COMPLETED, "completed", true},
		{messages.JobStatus_JOB_STATUS_KILLED, "killed", true},
		{messages.JobStatus_JOB_STATUS_FAILED, "failed", true},
		{messages.JobStatus_JOB_STATUS_UNSPECIFIED, "JOB_STATUS_UNSPECIFIED", false},
		{messages.JobStatus(42), "42", false},
		{messages.JobStatus(-1), "-1", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.name, tc.s.Name())
			require.Equal(t, tc.terminal, tc.s.Terminal())
		})
	}
}

func TestKillResultName(t *testing.T) {
	cases := []struct {
		r    messages.KillResult
		name string
	}{
		{messages.KillResult_KILL_RESULT_REQUESTED, "requested"},
		{messages.KillResult_KILL_RESULT_ALREADY_FINISHED, "already-finished"},
		{messages.KillResult_KILL_RESULT_UNSPECIFIED, "KILL_RESULT_UNSPECIFIED"},
		{messages.KillResult(7), "7"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.name, tc.r.Name())
		})
	}
}
