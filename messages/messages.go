package messages

import (
	"errors"
	"fmt"
)

// Name is the status as SPEC writes it: running, stopping, completed, killed, failed.
func (s JobStatus) Name() string {
	switch s {
	case JobStatus_JOB_STATUS_RUNNING:
		return "running"
	case JobStatus_JOB_STATUS_STOPPING:
		return "stopping"
	case JobStatus_JOB_STATUS_COMPLETED:
		return "completed"
	case JobStatus_JOB_STATUS_KILLED:
		return "killed"
	case JobStatus_JOB_STATUS_FAILED:
		return "failed"
	}
	return s.String()
}

// Terminal reports whether s is one of completed, killed, failed.
func (s JobStatus) Terminal() bool {
	return s == JobStatus_JOB_STATUS_COMPLETED || s == JobStatus_JOB_STATUS_KILLED || s == JobStatus_JOB_STATUS_FAILED
}

// Name is the kill result as SPEC writes it: requested or already-finished.
func (r KillResult) Name() string {
	switch r {
	case KillResult_KILL_RESULT_REQUESTED:
		return "requested"
	case KillResult_KILL_RESULT_ALREADY_FINISHED:
		return "already-finished"
	}
	return r.String()
}

// Code is a stable error code. Codes never change meaning; new ones are added.
type Code string

// The error codes of the job runtime.
const (
	CodeNoController       Code = "job/no-controller"     // no attached controller serves the owner (SPEC §2.10)
	CodeInvalidSpec        Code = "job/invalid-spec"      // empty or malformed kind, empty label, bad outputLimitBytes, nil Run or hooks
	CodeNoAgentRegistry    Code = "job/no-agent-registry" // an owned start without a mounted agent registry
	CodeOwnerNotLive       Code = "job/owner-not-live"    // the owner is not the registered, live agent instance
	CodeCapacity           Code = "job/capacity"          // the owner's bucket is full
	CodeRunFailed          Code = "job/run-failed"        // the producer's Run returned an error or panicked
	CodeNotFound           Code = "job/not-found"         // unknown job id (and, for job.kill, a foreign one)
	CodeForeign            Code = "job/foreign"           // the job belongs to another session
	CodeInvalidWaitTimeout Code = "job/invalid-wait-timeout"
	CodeWaitAborted        Code = "job/wait-aborted"     // the caller's context ended a pending wait
	CodeCancelFailed       Code = "job/cancel-failed"    // the producer's Cancel returned an error or panicked
	CodeReadFailed         Code = "job/read-failed"      // the producer's ReadOutput returned an error or panicked
	CodeDisposed           Code = "job/disposed"         // the jobs service has been disposed
	CodeInvalidConfig      Code = "config/invalid"       // a Config value failed Validate
	CodeScopeDisposed      Code = "scope/disposed"       // registration into a disposed Scope
	CodeStopped            Code = "troupe/stopped"       // the system is shut down
	CodeRegistryFailed     Code = "job/registry-failed"  // the registry panicked handling the request (a bug); nothing was changed
	CodeAborted            Code = "job/aborted"          // the caller's ctx ended before the answer (errors.Is ctx's error too)
	CodeShutdownTimeout    Code = "job/shutdown-timeout" // Shutdown's deadline passed with jobs still live: forced failed
	// CodeInvalidSession: an agent with the empty session id (NewAgent, owner.Spawn,
	// RegisterAgent). "" is the "no caller" identity of the access calls, never an agent's.
	CodeInvalidSession Code = "agent/invalid-session"
	// CodeUnauthenticated: a wire request names a session but carries no credential
	// of that session's registered incarnation (docs/THREAT-MODEL.md).
	CodeUnauthenticated Code = "job/unauthenticated"
	// CodeAgentRegistered: another live incarnation is registered for the session;
	// only a replace that holds that incarnation's handle may displace it.
	CodeAgentRegistered Code = "job/agent-registered"
)

// Error is troupe's one error type: a stable Code, the message text (SPEC's wording),
// optional named details, and the underlying cause where there is one (a producer's
// own error). Compare with errors.Is against the sentinels below; they match by code.
type Error struct {
	Code    Code
	Message string
	Details map[string]string
	Cause   error
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the producer's own error, if this error carries one.
func (e *Error) Unwrap() error { return e.Cause }

// Is matches any *Error with the same code, so errors.Is(err, ErrCapacity) works.
func (e *Error) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Code == e.Code
	}
	return false
}

// Proto is the wire form of e (the cause travels only as its text in Message).
func (e *Error) Proto() *ErrorInfo {
	if e == nil {
		return nil
	}
	return &ErrorInfo{Code: string(e.Code), Message: e.Message, Details: e.Details}
}

// FromProto turns a wire error back into an *Error; nil stays nil.
func FromProto(p *ErrorInfo) error {
	if p == nil {
		return nil
	}
	return &Error{Code: Code(p.Code), Message: p.Message, Details: p.Details}
}

// Errorf builds an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Sentinels for errors.Is.
var (
	ErrNoController       = &Error{Code: CodeNoController}
	ErrInvalidSpec        = &Error{Code: CodeInvalidSpec}
	ErrNoAgentRegistry    = &Error{Code: CodeNoAgentRegistry}
	ErrOwnerNotLive       = &Error{Code: CodeOwnerNotLive}
	ErrCapacity           = &Error{Code: CodeCapacity}
	ErrRunFailed          = &Error{Code: CodeRunFailed}
	ErrNotFound           = &Error{Code: CodeNotFound}
	ErrForeign            = &Error{Code: CodeForeign}
	ErrInvalidWaitTimeout = &Error{Code: CodeInvalidWaitTimeout}
	ErrWaitAborted        = &Error{Code: CodeWaitAborted}
	ErrCancelFailed       = &Error{Code: CodeCancelFailed}
	ErrReadFailed         = &Error{Code: CodeReadFailed}
	ErrDisposed           = &Error{Code: CodeDisposed}
	ErrInvalidConfig      = &Error{Code: CodeInvalidConfig}
	ErrScopeDisposed      = &Error{Code: CodeScopeDisposed}
	ErrStopped            = &Error{Code: CodeStopped}
	ErrRegistryFailed     = &Error{Code: CodeRegistryFailed}
	ErrAborted            = &Error{Code: CodeAborted}
	ErrShutdownTimeout    = &Error{Code: CodeShutdownTimeout}
	ErrInvalidSession     = &Error{Code: CodeInvalidSession}
)

// CodeOf returns the code of err if it is (or wraps) an *Error, else "".
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// PublicOf projects a snapshot to its public form (no owner, claim or limit).
func PublicOf(s *JobSnapshot) *PublicJob {
	return &PublicJob{Id: s.Id, Kind: s.Kind, Label: s.Label, Status: s.Status, Detail: s.Detail,
		StartedAt: s.StartedAt, FinishedAt: s.FinishedAt}
}
