package workflow_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/tools/workflowtool"
)

// sink is a record sink; failType makes the first append of that type fail, and
// atRunEnd is called when a run-end is appended.
type sink struct {
	mu       sync.Mutex
	recs     []workflowtool.Record
	sessions []string
	failType string
	failed   bool
	atRunEnd func()
}

func (s *sink) Append(session string, rec workflowtool.Record) error {
	if rec.Type == workflowtool.RecordRunEnd && s.atRunEnd != nil {
		s.atRunEnd()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec.Type == s.failType && !s.failed {
		s.failed = true
		return errors.New("injected " + rec.Type + " failure")
	}
	s.recs = append(s.recs, rec)
	s.sessions = append(s.sessions, session)
	return nil
}

func (s *sink) all() []workflowtool.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]workflowtool.Record(nil), s.recs...)
}

const memberScript = "return await agent('p', { label: 'member' })"

func TestWorkflowW60_DurableRecords(t *testing.T) {
	e := newEnv(t)
	sk := &sink{}
	var disposedAtEnd []int
	sk.atRunEnd = func() {
		for _, r := range e.stub.Runs() {
			disposedAtEnd = append(disposedAtEnd, e.stub.Disposes(r))
		}
	}
	tool := e.mount(workflowtool.Config{}, false, func(d *workflowtool.Deps) { d.Records = sk }).Tool()
	res := e.call(testCtx(t), tool, toolArgs(memberScript, auditMeta))
	require.False(t, res.IsError, res.Content)
	id := res.Value.(workflowtool.Value).RunID
	childID := e.stub.Runs()[0].ID
	require.Equal(t, []workflowtool.Record{
		{Type: workflowtool.RecordRunStart, RunID: id, Name: "audit"},
		{Type: workflowtool.RecordAgentStart, RunID: id, Seq: 1, Label: "member", ChildID: childID},
		{Type: workflowtool.RecordAgentEnd, RunID: id, Seq: 1, Outcome: "completed"},
		{Type: workflowtool.RecordRunEnd, RunID: id, StopReason: "completed"},
	}, sk.all())
	require.Equal(t, []string{"A", "A", "A", "A"}, sk.sessions)
	require.Equal(t, []int{1}, disposedAtEnd, "run-end only after the children were disposed")
	require.NoError(t, workflowtool.CheckRecords(sk.all()))
	b, err := json.Marshal(sk.all()[1])
	require.NoError(t, err)
	require.Equal(t, `{"type":"tool-workflow/agent-start","data":{"runId":"`+id+`","seq":1,"label":"member","childId":"`+childID+`"}}`, string(b))

	// two concurrent runs, one with no member: independent run-ends
	sk2 := &sink{}
	tool2 := e.mount(workflowtool.Config{}, false, func(d *workflowtool.Deps) { d.Records = sk2 }).Tool()
	a := e.callAsync(testCtx(t), tool2, toolArgs(memberScript, auditMeta))
	z := e.callAsync(testCtx(t), tool2, toolArgs("return 0", auditMeta))
	ra, rz := recv(t, a), recv(t, z)
	require.False(t, ra.IsError)
	require.False(t, rz.IsError)
	require.NoError(t, workflowtool.CheckRecords(sk2.all()))
	ends := map[string]string{}
	for _, r := range sk2.all() {
		if r.Type == workflowtool.RecordRunEnd {
			ends[r.RunID] = r.StopReason
		}
	}
	require.Equal(t, map[string]string{ra.Value.(workflowtool.Value).RunID: "completed", rz.Value.(workflowtool.Value).RunID: "completed"}, ends)

	// a failing append disables the record for that run, once, and changes nothing else
	types := []string{workflowtool.RecordRunStart, workflowtool.RecordAgentStart, workflowtool.RecordAgentEnd, workflowtool.RecordRunEnd}
	for i, typ := range types {
		f := &sink{failType: typ}
		tool := e.mount(workflowtool.Config{}, false, func(d *workflowtool.Deps) { d.Records = f }).Tool()
		res := e.call(testCtx(t), tool, toolArgs(memberScript, auditMeta))
		require.Equal(t, "workflow \"audit\" completed (1 agent).\nReturn value:\n\"stub reply\"", resultText(t, res, false), typ)
		got := f.all()
		require.Len(t, got, i, typ)
		for j, r := range got {
			require.Equal(t, types[j], r.Type)
		}
		require.NoError(t, workflowtool.CheckRecords(got), "a legal prefix")
		warn := "tool-workflow: disabled durable record after " + typ + " append failed: injected " + typ + " failure"
		n := 0
		for _, l := range e.logs.Lines() {
			if strings.Contains(l, warn) {
				n++
			}
		}
		require.Equal(t, 1, n, "one warning for %s", typ)
	}
	for _, r := range e.stub.Runs() {
		require.Equal(t, 1, e.stub.Disposes(r), "cleanup unchanged")
	}

	// CheckRecords
	err = workflowtool.CheckRecords([]workflowtool.Record{{Type: workflowtool.RecordRunStart, RunID: "r"}, {Type: workflowtool.RecordAgentEnd, RunID: "r", Seq: 1}})
	require.EqualError(t, err, "tool-workflow/agent-end has no matching member seq 1 in run r")
	require.NoError(t, workflowtool.CheckRecords([]workflowtool.Record{{Type: workflowtool.RecordRunStart, RunID: "r"}, {Type: workflowtool.RecordAgentStart, RunID: "r", Seq: 1}}))
}

func TestCheckRecordsRejectsEachViolation(t *testing.T) {
	rs := func(t string, seq int) workflowtool.Record { return workflowtool.Record{Type: t, RunID: "r", Seq: seq} }
	start, as, ae, end := workflowtool.RecordRunStart, workflowtool.RecordAgentStart, workflowtool.RecordAgentEnd, workflowtool.RecordRunEnd
	for want, recs := range map[string][]workflowtool.Record{
		"tool-workflow/run-start repeats run r":                                       {rs(start, 0), rs(start, 0)},
		"tool-workflow/agent-start has no matching tool-workflow/run-start for run r": {rs(as, 1)},
		"tool-workflow/agent-start appears after tool-workflow/run-end for run r":     {rs(start, 0), rs(end, 0), rs(as, 1)},
		"tool-workflow member seq must be a positive safe integer":                    {rs(start, 0), rs(as, 0)},
		"tool-workflow/agent-start repeats member seq 1 in run r":                     {rs(start, 0), rs(as, 1), rs(as, 1)},
		"tool-workflow/agent-end repeats member seq 1 in run r":                       {rs(start, 0), rs(as, 1), rs(ae, 1), rs(ae, 1)},
		"tool-workflow/run-end leaves member seq 1, 3 open in run r":                  {rs(start, 0), rs(as, 1), rs(as, 2), rs(as, 3), rs(ae, 2), rs(end, 0)},
	} {
		require.EqualError(t, workflowtool.CheckRecords(recs), want)
	}
}

func TestWorkflowW61_FoldDerivesStatusAndDisclosure(t *testing.T) {
	empty := ""
	recs := []workflowtool.Record{
		{Type: workflowtool.RecordRunStart, RunID: "r", Name: "audit"},
		{Type: workflowtool.RecordAgentStart, RunID: "r", Seq: 1, Label: "one", Phase: &empty, ChildID: "c1"},
		{Type: workflowtool.RecordAgentStart, RunID: "r", Seq: 2, Label: "two", ChildID: "c2"},
		{Type: workflowtool.RecordAgentStart, RunID: "r", Seq: 3, Label: "three", Phase: &empty, ChildID: "c3"},
		{Type: workflowtool.RecordAgentEnd, RunID: "r", Seq: 1, Outcome: "failed"},
		{Type: workflowtool.RecordAgentEnd, RunID: "r", Seq: 2, Outcome: "completed"},
	}
	v := workflowtool.Fold(recs, false)
	require.Len(t, v, 1)
	run := v[0]
	require.Equal(t, "running", run.Status)
	require.Equal(t, "abnormal", run.Mode)
	require.True(t, run.Open)
	require.Len(t, run.Phases, 2)
	require.Equal(t, "value:0:", run.Phases[0].Key)
	require.Equal(t, &empty, run.Phases[0].Phase)
	require.Equal(t, []workflowtool.MemberView{{Seq: 1, Label: "one", ChildID: "c1", Status: "failed"}, {Seq: 3, Label: "three", ChildID: "c3", Status: "running"}}, run.Phases[0].Members)
	require.Equal(t, "abnormal", run.Phases[0].Mode)
	require.True(t, run.Phases[0].Open)
	require.Equal(t, "missing", run.Phases[1].Key)
	require.Nil(t, run.Phases[1].Phase)
	require.Equal(t, []workflowtool.MemberView{{Seq: 2, Label: "two", ChildID: "c2", Status: "completed"}}, run.Phases[1].Members)
	require.Equal(t, "clean", run.Phases[1].Mode)
	require.False(t, run.Phases[1].Open)

	closed := workflowtool.Fold(recs, true)[0]
	require.Equal(t, "interrupted", closed.Status)
	require.Equal(t, "interrupted", closed.Phases[0].Members[1].Status)

	more := append(append([]workflowtool.Record(nil), recs...),
		workflowtool.Record{Type: workflowtool.RecordAgentEnd, RunID: "r", Seq: 3, Outcome: "cancelled"},
		workflowtool.Record{Type: workflowtool.RecordRunEnd, RunID: "r", StopReason: "cancelled"})
	for _, c := range []bool{false, true} {
		r := workflowtool.Fold(more, c)[0]
		require.Equal(t, "cancelled", r.Status)
		require.Equal(t, "cancelled", r.Phases[0].Members[1].Status)
	}

	zero := workflowtool.Fold([]workflowtool.Record{
		{Type: workflowtool.RecordRunStart, RunID: "z", Name: "n"},
		{Type: workflowtool.RecordRunEnd, RunID: "z", StopReason: "completed"}}, false)[0]
	require.Equal(t, "completed", zero.Status)
	require.Equal(t, "clean", zero.Mode)
	require.False(t, zero.Open)
	require.Empty(t, zero.Phases)

	failed := workflowtool.Fold([]workflowtool.Record{
		{Type: workflowtool.RecordRunStart, RunID: "f", Name: "n"},
		{Type: workflowtool.RecordRunEnd, RunID: "f", StopReason: "error"}}, false)[0]
	require.Equal(t, "failed", failed.Status)
	require.Equal(t, "abnormal", failed.Mode)
}
