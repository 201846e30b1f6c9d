package registry

import (
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/messages"
)

// Routing the job requests (read, kill, wait): the session fence first, then to
// the live job actor, or answered from the settled record (index.go).

// access is the unknown-id check, then the session fence (SPEC §2.5).
func (r *registryActor) access(id, caller string) (*record, error) {
	if r.disposed {
		return nil, errDisposed()
	}
	r.sweep()
	rec := r.idx.get(id)
	if rec == nil {
		// The id is the caller's (the model's job_id): echoed bounded and valid.
		id = job.CleanID(id)
		return nil, &messages.Error{Code: messages.CodeNotFound, Message: "unknown job " + id,
			Details: map[string]string{"jobId": id, "sessionId": caller}}
	}
	if rec.owner != nil && rec.owner.session != caller {
		return nil, &messages.Error{Code: messages.CodeForeign, Message: "job " + id + " belongs to another session",
			Details: map[string]string{"jobId": id, "sessionId": caller}}
	}
	return rec, nil
}

// read answers m, or routes it to the live job's actor. own: m came from this
// registry's Client (serveAs), so the registry is its only holder, and an answer
// sent here frees it for the Client's next read (job.ReadResult.Free); a read a
// job actor forwarded back is answered unfreed.
func (r *registryActor) read(c actor.Context, m *job.Read, own bool) {
	rec, err := r.access(m.ID, m.Caller)
	if err != nil {
		answerRead(m, own, job.ReadResult{Err: err})
		return
	}
	if rec.live() {
		if rec.readOutput == nil {
			// A kill, teardown or forced failure went to the job actor: its Cancel may
			// be running, so reads wait behind it there, and only the job actor calls
			// ReadOutput until the job settles. Its answer does not free m.
			c.Send(rec.pid, r.shared.Stamp(m))
			return
		}
		r.readLive(rec, m, own)
		return
	}
	if m.Ctx != nil && m.Ctx.Err() != nil {
		// As a live read: one whose ctx ended before it was taken up (a read handed
		// to the worker, handOff, or queued behind others) reads and claims nothing.
		answerRead(m, own, job.ReadResult{Err: job.Aborted(m.Ctx)})
		return
	}
	text := rec.output
	if rec.stream() {
		if err := job.Protect(func() (e error) { text, e = rec.readOutput(); return }); err != nil {
			answerRead(m, own, job.ReadResult{Err: &messages.Error{Code: messages.CodeReadFailed, Message: job.ErrorText(err), Cause: err}})
			return
		}
		text = job.ValidText(text)
	}
	rec.setReported(true)
	answerRead(m, own, job.ReadResult{Text: text, Snapshot: rec.snapshot()})
}

// readLive answers a read of a live job in one hop, from the record: the live
// output is "" for a final-output kind (liveFinalOutput), and a stream kind's delta
// comes from its ReadOutput, called here while no message that may start the
// producer's Cancel has gone to the job actor (toHooks): ReadOutput stays one call at a time and
// never together with Cancel. The snapshot is the record's: status and claim are
// what the job actor committed (StopRequested), and a live read claims nothing. A
// read whose ctx already ended reads nothing (a stream's delta stays).
func (r *registryActor) readLive(rec *record, m *job.Read, own bool) {
	if m.Ctx != nil && m.Ctx.Err() != nil {
		answerRead(m, own, job.ReadResult{Err: job.Aborted(m.Ctx)})
		return
	}
	var text string
	if err := job.Protect(func() (e error) { text, e = rec.readOutput(); return }); err != nil {
		answerRead(m, own, job.ReadResult{Err: &messages.Error{Code: messages.CodeReadFailed, Message: job.ErrorText(err), Cause: err}})
		return
	}
	answerRead(m, own, job.ReadResult{Text: job.ValidText(text), Snapshot: rec.snapshot()})
}

// answerRead sends m its one answer, freed when own (read): the send is the
// registry's last touch of m and of its Reply.
func answerRead(m *job.Read, own bool, res job.ReadResult) {
	res.Free = own
	m.Reply <- res
}

// liveFinalOutput is the live record's readOutput of a final-output kind: its
// output is "" until it settles (SPEC §2.6). It is static: it costs no job anything.
func liveFinalOutput() (string, error) { return "", nil }

// toHooks sends the live job's actor a message that may start its producer's
// Cancel (a kill, a teardown, a forced failure). From then until the job settles,
// reads of the job are routed to its actor, where they wait behind a Cancel and
// the actor alone calls ReadOutput (the settlement hands it back: Settled).
func (r *registryActor) toHooks(c actor.Context, rec *record, msg job.Routable) {
	rec.readOutput = nil
	c.Send(rec.pid, r.shared.Stamp(msg))
}

// kill answers m, or routes it to the live job's actor. own: m came from this
// registry's Client (serveAs), so an answer sent here frees it for the Client's
// next kill (job.KillResult.Free); once routed, the answer that frees it is
// stopRequested's.
func (r *registryActor) kill(c actor.Context, m *job.Kill, own bool) {
	rec, err := r.access(m.ID, m.Caller)
	if err != nil {
		m.Reply <- job.KillResult{Err: err, Free: own}
		return
	}
	if rec.live() {
		// Cleaned once, here: the producer's Cancel and the recorded reason get the
		// same valid, bounded text (job.MaxReasonBytes).
		m.Reason = job.CleanReason(m.Reason)
		r.toHooks(c, rec, m)
		return
	}
	if !m.NoClaim {
		rec.setReported(true)
	}
	m.Reply <- job.KillResult{Result: messages.KillResult_KILL_RESULT_ALREADY_FINISHED, Snapshot: rec.snapshot(), Free: own}
}

func (r *registryActor) wait(c actor.Context, m *job.Wait) {
	rec, err := r.access(m.ID, m.Caller)
	if err != nil {
		m.Reply <- job.WaitResult{Err: err}
		return
	}
	if m.Timeout <= 0 {
		m.Reply <- job.WaitResult{Err: messages.Errorf(messages.CodeInvalidWaitTimeout,
			"invalid wait timeout: expected a positive number of milliseconds, got %s", jsonMillis(m.Timeout))}
		return
	}
	if rec.live() {
		c.Send(rec.pid, r.shared.Stamp(m))
		return
	}
	rec.setReported(true)
	m.Reply <- job.WaitResult{Snapshot: rec.snapshot()}
}

// jsonMillis renders a duration in milliseconds as JSON.stringify renders the number.
func jsonMillis(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64)
}

func (r *registryActor) stopRequested(c actor.Context, m *job.StopRequested) {
	rec := r.idx.get(m.ID)
	if rec == nil {
		if m.Settled != nil {
			r.settled(c, m.Settled)
		}
		return
	}
	if rec.live() {
		rec.status = job.Stopping
		rec.setReported(m.Reported)
		r.stopLanded(rec.ID, stopCause(m))
	}
	// SPEC §2.7: set stopping, fire onJobsChanged, then return requested — the
	// change is announced before the killer learns of it (as start's is). The
	// snapshot is the one this message committed (§1.3 rule 6).
	snap := rec.snapshot()
	r.fireChanged(rec.owner)
	if m.Settled != nil {
		// Settled in the job actor's same step: committed now, before the killer
		// learns of the stop, so its reply is the last thing this step does (a caller
		// waiting on the settlement next finds it committed).
		r.settled(c, m.Settled)
	}
	if m.Kill != nil {
		// The job actor let go of the Kill when it sent this: the answer frees it.
		m.Kill.Reply <- job.KillResult{Result: messages.KillResult_KILL_RESULT_REQUESTED, Snapshot: snap, Free: true}
	}
}
