package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/controller"
	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/troupetest"
)

func ptr[T any](v T) *T { return &v }

func TestWebU01_RowsStreamFromHelloThroughAHumanKill(t *testing.T) {
	e := newEnv(t, envOpts{})
	p := e.prod(t)
	p.Label = "sleep 60"
	spec := p.Spec(e.a)
	spec.OutputLimitBytes = ptr(int64(1024))
	id, err := e.sys.Jobs().Start(bg, spec)
	require.NoError(t, err)
	require.Equal(t, "bash-1", id)

	s := open(t, e.url("events?session=s1"), nil)
	hello := s.next("hello")
	require.Equal(t, "1000", hello.Retry, "the stream begins with retry: 1000")
	require.JSONEq(t, `{"v":1,"session":"s1"}`, hello.Data)
	first := rowsOf(t, s.next("rows"))
	require.Len(t, first.Jobs, 1)
	keys := []string{}
	for k := range first.Jobs[0] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	require.Equal(t, []string{"id", "kind", "label", "startedAt", "status"}, keys)
	require.Equal(t, "running", first.Jobs[0]["status"])

	resp, body := e.kill(t, "s1", "bash-1")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, `{"outcome":"requested"}`, body)
	var frames []ev
	stopping := s.rowsUntil(func(r rowsJSON) bool { return status(r, "bash-1") == "stopping" })
	require.NotNil(t, stopping)
	p.Settle(job.Outcome{Status: job.Killed, Detail: "signal: SIGTERM"})
	for {
		f := s.skipTo("rows")
		frames = append(frames, f)
		r := rowsOf(t, f)
		if status(r, "bash-1") == "killed" {
			j := r.Jobs[0]
			require.Equal(t, "signal: SIGTERM; cancelled by the user", j["detail"])
			require.GreaterOrEqual(t, j["finishedAt"].(float64), j["startedAt"].(float64))
			break
		}
	}
	for _, f := range append(frames, first2(hello, first)...) {
		for _, banned := range []string{"ownerSession", "reported", "outputLimitBytes"} {
			require.NotContains(t, f.Data, banned)
		}
	}
}

func first2(h ev, r rowsJSON) []ev {
	b, _ := json.Marshal(r)
	return []ev{h, {Event: "rows", Data: string(b)}}
}

func TestWebU02_ABurstOfStartsIsOneRowsFrameAndOutputIsNone(t *testing.T) {
	e := newEnv(t, envOpts{flush: 200 * time.Millisecond})
	s := open(t, e.url("events?session=s1"), nil)
	s.next("hello")
	require.Empty(t, rowsOf(t, s.next("rows")).Jobs)
	rec := job.NewRecord()
	var ps []*troupetest.Producer
	for i := range 5 {
		p := e.prod(t)
		p.Label = fmt.Sprintf("job %d", i)
		if i == 2 {
			p.Record = rec
		}
		_, err := e.sys.Jobs().Start(bg, p.Spec(e.a))
		require.NoError(t, err)
		ps = append(ps, p)
	}
	five := rowsOf(t, s.next("rows"))
	require.Equal(t, []string{"bash-1", "bash-2", "bash-3", "bash-4", "bash-5"}, ids(five))
	for i := range 100 {
		rec.Append(fmt.Sprintf("chunk %d\n", i), job.AppendOptions{Channel: "stdout"})
	}
	_, err := e.sys.Jobs().Start(bg, e.prod(t).Spec(e.a))
	require.NoError(t, err)
	six := rowsOf(t, s.next("rows"))
	require.Len(t, six.Jobs, 6, "no frame arrived between the five-job and the six-job frames")
}

func TestWebU03_UnownedChangesFanOutAndForeignJobsStayHidden(t *testing.T) {
	e := newEnv(t, envOpts{})
	a2, _ := e.agent(t, "s2")
	streams := map[string]*stream{}
	for _, session := range []string{"s1", "s2", ""} {
		s := open(t, e.url("events?session="+session), nil)
		s.next("hello")
		s.next("rows")
		streams[session] = s
	}
	p := e.prod(t)
	p.Label = "open to every caller"
	u1, err := e.sys.Jobs().Start(bg, p.Spec(nil))
	require.NoError(t, err)
	for session, s := range streams {
		r := rowsOf(t, s.next("rows"))
		require.Contains(t, ids(r), u1, session)
	}
	b2, err := e.sys.Jobs().Start(bg, e.prod(t).Spec(a2))
	require.NoError(t, err)
	require.Equal(t, "bash-2", b2)
	u2, err := e.sys.Jobs().Start(bg, e.prod(t).Spec(nil))
	require.NoError(t, err)
	streams["s2"].rowsUntil(func(r rowsJSON) bool { return slices.Contains(ids(r), b2) })
	for _, session := range []string{"s1", ""} {
		r := streams[session].rowsUntil(func(r rowsJSON) bool { return slices.Contains(ids(r), u2) })
		require.NotContains(t, ids(r), b2, session)
	}
}

func TestWebU25_KillIsRequestedAndTheModelIsToldWhy(t *testing.T) {
	e := newEnv(t, envOpts{})
	p := e.prod(t)
	p.Label = "sleep 60"
	id, err := e.sys.Jobs().Start(bg, p.Spec(e.a))
	require.NoError(t, err)
	resp, body := e.kill(t, "s1", id)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, `{"outcome":"requested"}`, body)
	require.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Equal(t, controller.ReasonUser, p.NextCancel(t))
	require.Equal(t, []string{"cancelled by the user"}, p.Cancels())
	p.Settle(job.Outcome{Status: job.Killed, Detail: "signal: SIGTERM"})
	snap := troupetest.Settled(t, e.sys, id, registry.AsAgent(e.a))
	require.Equal(t, "signal: SIGTERM; cancelled by the user", snap.GetDetail())
	require.False(t, snap.Reported)
	require.Equal(t, "background job bash-1 (bash: sleep 60) finished [status: killed, signal: SIGTERM; cancelled by the user]. Read its output with job_output.",
		e.in.next(t).Text)
}

func TestWebU26_KillOutcomesForFinishedUnknownForeignAndUnownedJobs(t *testing.T) {
	e := newEnv(t, envOpts{})
	a2, _ := e.agent(t, "s2")
	done := e.prod(t)
	id1, err := e.sys.Jobs().Start(bg, done.Spec(e.a))
	require.NoError(t, err)
	done.Settle(job.Outcome{Status: job.Completed, Detail: "exit code: 0"})
	troupetest.Settled(t, e.sys, id1, registry.AsAgent(e.a))
	foreign := e.prod(t)
	id2, err := e.sys.Jobs().Start(bg, foreign.Spec(a2))
	require.NoError(t, err)
	unowned := e.prod(t)
	id3, err := e.sys.Jobs().Start(bg, unowned.Spec(nil))
	require.NoError(t, err)
	require.Equal(t, []string{"bash-1", "bash-2", "bash-3"}, []string{id1, id2, id3})

	resp, body := e.kill(t, "s1", "bash-1")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, `{"outcome":"already-finished"}`, body)
	require.Empty(t, done.Cancels())

	resp, body = e.kill(t, "s1", "bash-7")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, `{"code":"job/not-found","message":"unknown job bash-7","details":{"sessionId":"s1","jobId":"bash-7"}}`, body)

	resp, body = e.kill(t, "s1", "bash-2")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	m := decode(t, body)
	require.Equal(t, "job/not-found", m["code"])
	require.Equal(t, "job bash-2 belongs to another session", m["message"])
	require.Empty(t, foreign.Cancels())

	resp, body = e.kill(t, "s1", "bash-3")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, `{"outcome":"requested"}`, body)
	require.Equal(t, controller.ReasonUser, unowned.NextCancel(t))
}

func TestWebKillCancelFailureIsReportedAsIs(t *testing.T) {
	e := newEnv(t, envOpts{})
	p := e.prod(t)
	p.CancelErr = fmt.Errorf("cannot signal the process")
	id, err := e.sys.Jobs().Start(bg, p.Spec(e.a))
	require.NoError(t, err)
	resp, body := e.kill(t, "s1", id)
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	m := decode(t, body)
	require.NotEmpty(t, m["code"])
	require.Contains(t, m["message"], "cannot signal the process")
	require.NotContains(t, e.logs.String(), strings.Trim(e.h.LaunchPath(), "/t"), "the log never holds the token")
}

func TestWebU28_FollowStreamsTheRecordLossyFromTheOldestRetainedByte(t *testing.T) {
	e := newEnv(t, envOpts{})
	p := e.prod(t)
	p.Record = job.NewRecord()
	id, err := e.sys.Jobs().Start(bg, p.Spec(e.a))
	require.NoError(t, err)
	line := strings.Repeat("x", 1023) + "\n"
	for range 300 {
		p.Record.Append(line, job.AppendOptions{Channel: "stdout"})
	}
	s := open(t, e.url("events?session=s1&follow="+id), nil)
	s.next("hello")
	s.next("rows")
	opened := decode(t, s.next("opened").Data)
	require.Equal(t, true, opened["hasRecord"])
	require.EqualValues(t, 0, opened["from"])
	require.Greater(t, opened["earliest"].(float64), 0.0)
	require.EqualValues(t, 307200, opened["total"])
	earliest := int64(opened["earliest"].(float64))

	var next int64 = -1
	firstFrame := true
	read := func(o ev) {
		var f struct {
			JobID  string `json:"jobId"`
			Chunks []struct {
				Offset int64  `json:"offset"`
				Text   string `json:"text"`
			} `json:"chunks"`
			Next  int64 `json:"next"`
			Lossy bool  `json:"lossy"`
		}
		require.NoError(t, json.Unmarshal([]byte(o.Data), &f))
		if firstFrame {
			require.True(t, f.Lossy, "the first output frame is lossy")
			firstFrame = false
			next = f.Chunks[0].Offset
			require.GreaterOrEqual(t, next, earliest)
		} else {
			require.False(t, f.Lossy)
		}
		size := 0
		for _, c := range f.Chunks {
			require.Equal(t, next, c.Offset, "offsets are contiguous")
			next += int64(len(c.Text))
			size += len(c.Text)
		}
		require.True(t, size <= 65536 || len(f.Chunks) == 1, "a frame holds at most 64 KiB unless it is one chunk")
		require.Equal(t, next, f.Next)
		require.Equal(t, fmt.Sprintf("%s@%d", id, f.Next), o.ID)
	}
	for next < 307200 {
		read(s.next("output"))
	}
	p.Record.Append("tail", job.AppendOptions{Channel: "stdout"})
	p.Settle(job.Outcome{Status: job.Completed, Detail: "exit code: 0"})
	var sawTail bool
	for {
		o := s.raw()
		if o.Event == "rows" {
			continue
		}
		if o.Event == "status" {
			require.True(t, sawTail, "the tail arrives before the status")
			st := decode(t, o.Data)
			require.Equal(t, "completed", st["job"].(map[string]any)["status"])
			require.Equal(t, fmt.Sprintf("%s@%d", id, 307204), o.ID)
			break
		}
		require.Equal(t, "output", o.Event)
		read(o)
		sawTail = strings.HasSuffix(o.Data, `"text":"tail","channel":"stdout"}],"next":307204}`)
	}
	_, err = e.sys.Jobs().Start(bg, e.prod(t).Spec(e.a))
	require.NoError(t, err)
	for {
		o := s.raw()
		require.NotEqual(t, "output", o.Event, "no output follows the status")
		require.NotEqual(t, "status", o.Event, "exactly one status")
		if o.Event == "rows" && len(rowsOf(t, o).Jobs) == 2 {
			break
		}
	}
}

func TestWebU29_FollowingNeverConsumesTheModelsOutput(t *testing.T) {
	e := newEnv(t, envOpts{})
	var reads atomic.Int64
	rec := job.NewRecord()
	done := make(chan job.Outcome, 1)
	var handed atomic.Bool
	spec := job.Spec{Kind: "bash", Label: "printf", Owner: e.a, Record: rec, Run: func() (job.Hooks, error) {
		return job.Hooks{Done: done, Cancel: func(string) error { return nil }, ReadOutput: func() (string, error) {
			reads.Add(1)
			if handed.CompareAndSwap(false, true) {
				return "a\nb\n", nil
			}
			return "", nil
		}}, nil
	}}
	id, err := e.sys.Jobs().Start(bg, spec)
	require.NoError(t, err)
	rec.Append("a\nb\n", job.AppendOptions{Channel: "stdout"})

	first := open(t, e.url("events?session=s1&follow="+id), nil)
	first.next("hello")
	first.next("rows")
	first.next("opened")
	require.Contains(t, first.next("output").Data, `"text":"a\nb\n"`)
	n, err := e.sys.Jobs().Waiters(bg, id)
	require.NoError(t, err)
	require.Zero(t, n, "a follow never waits on the job")
	done <- job.Outcome{Status: job.Completed, Detail: "exit code: 0"}
	first.skipTo("status")
	first.close()
	// The notice of a job that settled on its own is delivered, follow or not.
	require.Contains(t, e.in.next(t).Text, "background job bash-1 (bash: printf) finished [status: completed, exit code: 0]")

	second := open(t, e.url("events?session=s1&follow="+id), nil)
	second.next("hello")
	second.next("rows")
	second.next("opened")
	require.Contains(t, second.next("output").Data, `"text":"a\nb\n"`)
	second.skipTo("status")
	require.Zero(t, reads.Load(), "the web layer never called ReadOutput")

	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	out := callTool(ctx, e, e.a, "job_output", `{"job_id":"bash-1"}`)
	require.Contains(t, out, "a\nb\n")
	require.Contains(t, out, "completed")
}

func TestWebU30_FollowWithoutARecordAndOfAnUnknownJob(t *testing.T) {
	e := newEnv(t, envOpts{})
	p := e.prod(t)
	p.Kind, p.Label = "subagent", "explore the repo"
	id, err := e.sys.Jobs().Start(bg, p.Spec(e.a))
	require.NoError(t, err)
	s := open(t, e.url("events?session=s1&follow="+id), nil)
	s.next("hello")
	s.next("rows")
	opened := decode(t, s.next("opened").Data)
	require.Equal(t, false, opened["hasRecord"])
	require.EqualValues(t, 0, opened["earliest"])
	require.EqualValues(t, 0, opened["total"])
	p.Settle(job.Outcome{Status: job.Completed})
	for {
		o := s.raw()
		require.NotEqual(t, "output", o.Event)
		if o.Event == "status" {
			break
		}
	}

	u := open(t, e.url("events?session=s1&follow=bash-9"), nil)
	u.next("hello")
	u.next("rows")
	pr := u.next("problem")
	require.Equal(t, `{"scope":"follow","jobId":"bash-9","code":"job/not-found","message":"unknown job bash-9"}`, pr.Data)
	_, err = e.sys.Jobs().Start(bg, e.prod(t).Spec(e.a))
	require.NoError(t, err)
	u.rowsUntil(func(r rowsJSON) bool { return len(r.Jobs) == 2 })
}

func TestWebU33_AReconnectResumesFromLastEventID(t *testing.T) {
	e := newEnv(t, envOpts{})
	p := e.prod(t)
	p.Record = job.NewRecord()
	id, err := e.sys.Jobs().Start(bg, p.Spec(e.a))
	require.NoError(t, err)
	p.Record.Append("hello\n", job.AppendOptions{Channel: "stdout"})
	s := open(t, e.url("events?session=s1&follow="+id), nil)
	s.next("hello")
	s.next("rows")
	s.next("opened")
	o := s.next("output")
	require.Equal(t, "bash-1@6", o.ID)
	s.close()
	p.Record.Append("more", job.AppendOptions{Channel: "stdout"})

	r := open(t, e.url("events?session=s1&follow="+id), map[string]string{"Last-Event-ID": "bash-1@6"})
	r.next("hello")
	r.next("rows")
	opened := decode(t, r.next("opened").Data)
	require.EqualValues(t, 6, opened["from"])
	out := r.next("output")
	require.Equal(t, `{"jobId":"bash-1","chunks":[{"offset":6,"text":"more","channel":"stdout"}],"next":10}`, out.Data)

	for _, last := range []string{"bash-2@5", "x"} {
		w := open(t, e.url("events?session=s1&follow="+id), map[string]string{"Last-Event-ID": last})
		w.next("hello")
		w.next("rows")
		require.EqualValues(t, 0, decode(t, w.next("opened").Data)["from"], last)
		w.close()
	}
	require.Equal(t, messages.JobStatus_JOB_STATUS_RUNNING, mustGet(t, e, id).Status)
}

func mustGet(t *testing.T, e *env, id string) *messages.JobSnapshot {
	t.Helper()
	s, err := e.sys.Jobs().Get(bg, id, registry.AsAgent(e.a))
	require.NoError(t, err)
	return s
}
