package subagenttool

import (
	"errors"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/subagent"
)

// Model-visible texts of SPEC §5.4 (verbatim), and the job kind.
const (
	JobKind = "subagent"

	TextBackgroundDisabled = "run_in_background is disabled for this tool instance (enableRunInBackground: false)"
	TextNoAgent            = "subagent tool requires a calling agent (exec.agent was undefined)"
	// TextNoJobs is rule 23's verbatim prefix followed by troupe's hint.
	TextNoJobs = "background jobs unavailable: give the subagent tool troupe's job registry (subagenttool.Deps.Jobs = System.Jobs()) and mount the job tools in the agent's scope (jobtools.MountIn)"
	// TextContinuationUnavailable is CONTINUATION_UNAVAILABLE's text (SPEC §6.1).
	TextContinuationUnavailable = "continuable subagents require the agents service"

	startedBackground  = "started background subagent job "
	startedContinuable = "started subagent "
	diagnosticPrefix   = "\nDiagnostic: "
	partialPrefix      = "\nPartial output before the run ended:\n"

	// killReasonDefault is the cause of a kill without a reason (SPEC §1.3 rule 21).
	killReasonDefault = "background subagent task killed"
)

// Headline is the first line of a foreground run's errored result for a stop
// reason other than completed.
func Headline(stopReason string) string {
	switch stopReason {
	case subagent.StopAborted:
		return "subagent run was cancelled"
	case subagent.StopError:
		return "subagent run failed"
	case subagent.StopMaxTokens:
		return "subagent run hit its token limit before finishing"
	case subagent.StopRefusal:
		return "subagent declined the task"
	}
	return "subagent run ended abnormally (" + stopReason + ")"
}

// FailureText is a foreground run's errored message:
// `<headline>[\nDiagnostic: <d>][\nPartial output before the run ended:\n<text>]`.
func FailureText(res subagent.Result) string {
	msg := Headline(res.StopReason)
	if res.Diagnostic != "" {
		msg += diagnosticPrefix + res.Diagnostic
	}
	if t := res.Text(); t != "" {
		msg += partialPrefix + t
	}
	return msg
}

// RunDisposeError is the foreground double failure (SPEC §1.3 rule 16): the run's
// result and its dispose both failed. It is an AggregateError: it unwraps to both.
type RunDisposeError struct {
	Run, Dispose error
}

func (e *RunDisposeError) Error() string {
	return "subagent run failed: " + e.Run.Error() + "; dispose failed: " + e.Dispose.Error()
}

// Unwrap returns both errors.
func (e *RunDisposeError) Unwrap() []error { return []error{e.Run, e.Dispose} }

// errText renders an error the way DSH's String(err) does in model-visible text
// (SPEC §1.3 rule 15).
func errText(err error) string { return "Error: " + err.Error() }

// Outcome maps a background run's end to its job outcome (SPEC §5.4): the result
// (or the error that rejected it), then the dispose error, if any.
func Outcome(res subagent.Result, resErr, disposeErr error) job.Outcome {
	var o job.Outcome
	switch {
	case resErr != nil:
		o = job.Outcome{Status: job.Failed, Detail: errText(resErr)}
	case res.StopReason == subagent.StopCompleted:
		o = job.Outcome{Status: job.Completed, Output: res.Text()}
	case res.StopReason == subagent.StopAborted:
		o = job.Outcome{Status: job.Killed}
	default:
		d := res.StopReason
		if res.Diagnostic != "" {
			d += "; diagnostic: " + res.Diagnostic
		}
		o = job.Outcome{Status: job.Failed, Detail: d}
	}
	if disposeErr != nil {
		d := "dispose failed: " + errText(disposeErr)
		if o.Detail != "" {
			d = o.Detail + "; " + d
		}
		o = job.Outcome{Status: job.Failed, Detail: d}
	}
	return o
}

// StartFailure maps a provider start that failed to its job outcome: killed when
// the job's context was cancelled and the error is not an AggregateError (a clean
// kill), failed otherwise (a rollback that failed after cancellation included).
func StartFailure(cancelled bool, err error) job.Outcome {
	if _, aggregate := err.(interface{ Unwrap() []error }); cancelled && !aggregate {
		return job.Outcome{Status: job.Killed}
	}
	return job.Outcome{Status: job.Failed, Detail: errText(err)}
}

// killCause is the job context's cancel cause for a kill reason.
func killCause(reason string) error {
	if reason == "" {
		reason = killReasonDefault
	}
	return errors.New(reason)
}
