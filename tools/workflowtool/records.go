package workflowtool

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/workflow"
)

// The durable record types (WORKFLOW.md 5.7).
const (
	RecordRunStart   = "tool-workflow/run-start"
	RecordAgentStart = "tool-workflow/agent-start"
	RecordAgentEnd   = "tool-workflow/agent-end"
	RecordRunEnd     = "tool-workflow/run-end"
)

// Record is one durable, log-only record of a run in its caller's session. It
// marshals to {"type": Type, "data": <DSH's data shape for Type>}: run-start
// {runId, name}; agent-start {runId, seq, label, phase?, childId}; agent-end
// {runId, seq, outcome}; run-end {runId, stopReason}.
type Record struct {
	Type       string
	RunID      string
	Name       string  // run-start
	Seq        int     // agent-start, agent-end
	Label      string  // agent-start
	Phase      *string // agent-start (nil: absent)
	ChildID    string  // agent-start
	Outcome    string  // agent-end
	StopReason string  // run-end
}

// MarshalJSON is the record's data shape.
func (r Record) MarshalJSON() ([]byte, error) {
	var data any
	switch r.Type {
	case RecordRunStart:
		data = struct {
			RunID string `json:"runId"`
			Name  string `json:"name"`
		}{r.RunID, r.Name}
	case RecordAgentStart:
		data = struct {
			RunID   string  `json:"runId"`
			Seq     int     `json:"seq"`
			Label   string  `json:"label"`
			Phase   *string `json:"phase,omitempty"`
			ChildID string  `json:"childId"`
		}{r.RunID, r.Seq, r.Label, r.Phase, r.ChildID}
	case RecordAgentEnd:
		data = struct {
			RunID   string `json:"runId"`
			Seq     int    `json:"seq"`
			Outcome string `json:"outcome"`
		}{r.RunID, r.Seq, r.Outcome}
	case RecordRunEnd:
		data = struct {
			RunID      string `json:"runId"`
			StopReason string `json:"stopReason"`
		}{r.RunID, r.StopReason}
	default:
		return nil, fmt.Errorf("workflowtool: unknown record type %q", r.Type)
	}
	return json.Marshal(struct {
		Type string `json:"type"`
		Data any    `json:"data"`
	}{r.Type, data})
}

// RecordSink receives a run's durable records for the calling agent's session. It
// is called on the workflow engine actor (run-start, member records) and on the
// tool's goroutine (run-end, after the run is disposed): it must not block.
type RecordSink interface {
	Append(session string, rec Record) error
}

// runState is one call's run: the narration record (job mode), the durable
// records and the state both need. Its fields are written before Launch; after
// that only the engine actor (observe) and then, once Dispose returned, the
// collecting goroutine (runEnd) touch it, so off is the only shared flag.
type runState struct {
	m       *Mount
	session string
	owner   *owner.Agent
	name    string
	record  *job.Record
	off     atomic.Bool // the first failed append disabled the durable record
}

// observe is the run's Request.Observe: job-record narration and durable records.
func (rs *runState) observe(ev workflow.Event) {
	rs.narrate(ev)
	switch ev.Type {
	case workflow.EventStart:
		rs.append(Record{Type: RecordRunStart, RunID: ev.Run.ID, Name: ev.Run.Meta.Name})
	case workflow.EventAgentStart:
		rs.append(Record{Type: RecordAgentStart, RunID: ev.Run.ID, Seq: ev.Agent.Seq, Label: ev.Agent.Label,
			Phase: ev.Agent.Phase, ChildID: ev.Agent.ChildID})
	case workflow.EventAgentEnd:
		rs.append(Record{Type: RecordAgentEnd, RunID: ev.Run.ID, Seq: ev.Agent.Seq, Outcome: string(ev.Outcome)})
	}
}

// runEnd is appended only once the result exists and Dispose returned.
func (rs *runState) runEnd(runID string, res workflow.Result) {
	rs.append(Record{Type: RecordRunEnd, RunID: runID, StopReason: string(res.StopReason)})
}

func (rs *runState) append(rec Record) {
	sink := rs.m.deps.Records
	if sink == nil || rs.off.Load() {
		return
	}
	err := safeAppend(sink, rs.session, rec)
	if err != nil && rs.off.CompareAndSwap(false, true) {
		rs.m.logger.Warn("tool-workflow: disabled durable record after " + rec.Type + " append failed: " + err.Error())
	}
}

func safeAppend(sink RecordSink, session string, rec Record) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%v", v)
		}
	}()
	return sink.Append(session, rec)
}

// CheckRecords is DSH's invariant over one session's records (WORKFLOW.md 5.7): it returns
// the first violation. A missing tail (no member end, no run end) is valid.
func CheckRecords(recs []Record) error {
	type run struct {
		ended   bool
		members map[int]bool // seq → ended
		order   []int
	}
	runs := map[string]*run{}
	for _, r := range recs {
		if r.Type == RecordRunStart {
			if runs[r.RunID] != nil {
				return fmt.Errorf("tool-workflow/run-start repeats run %s", r.RunID)
			}
			runs[r.RunID] = &run{members: map[int]bool{}}
			continue
		}
		st := runs[r.RunID]
		if st == nil {
			return fmt.Errorf("%s has no matching tool-workflow/run-start for run %s", r.Type, r.RunID)
		}
		if st.ended {
			return fmt.Errorf("%s appears after tool-workflow/run-end for run %s", r.Type, r.RunID)
		}
		switch r.Type {
		case RecordAgentStart, RecordAgentEnd:
			if r.Seq < 1 || r.Seq > maxSafeInteger {
				return fmt.Errorf("tool-workflow member seq must be a positive safe integer")
			}
			ended, seen := st.members[r.Seq]
			if r.Type == RecordAgentStart {
				if seen {
					return fmt.Errorf("tool-workflow/agent-start repeats member seq %d in run %s", r.Seq, r.RunID)
				}
				st.members[r.Seq] = false
				st.order = append(st.order, r.Seq)
				continue
			}
			if !seen {
				return fmt.Errorf("tool-workflow/agent-end has no matching member seq %d in run %s", r.Seq, r.RunID)
			}
			if ended {
				return fmt.Errorf("tool-workflow/agent-end repeats member seq %d in run %s", r.Seq, r.RunID)
			}
			st.members[r.Seq] = true
		case RecordRunEnd:
			var open []string
			for _, seq := range st.order {
				if !st.members[seq] {
					open = append(open, strconv.Itoa(seq))
				}
			}
			if len(open) > 0 {
				return fmt.Errorf("tool-workflow/run-end leaves member seq %s open in run %s", strings.Join(open, ", "), r.RunID)
			}
			st.ended = true
		default:
			return fmt.Errorf("%s is not a tool-workflow record type", r.Type)
		}
	}
	return nil
}
