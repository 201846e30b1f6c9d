package workflowtool

import "strconv"

// Statuses of a run or member view (WORKFLOW.md 5.8).
const (
	StatusRunning     = "running"
	StatusCompleted   = "completed"
	StatusFailed      = "failed"
	StatusCancelled   = "cancelled"
	StatusInterrupted = "interrupted"
)

// Disclosure modes.
const (
	ModeClean    = "clean"
	ModeRunning  = "running"
	ModeAbnormal = "abnormal"
)

// RunView is one run as DSH's chat row shows it.
type RunView struct {
	RunID  string
	Name   string
	Status string
	Mode   string
	Open   bool // starts open exactly when Mode is not clean
	Phases []PhaseView
}

// PhaseView groups a run's members by exact phase identity, in first-member order.
type PhaseView struct {
	Key     string  // "missing" (no phase) or "value:<UTF-16 length>:<phase>"
	Phase   *string // nil: absent
	Mode    string
	Open    bool
	Members []MemberView
}

// MemberView is one agent() call of a run.
type MemberView struct {
	Seq     int
	Label   string
	ChildID string
	Status  string
}

func phaseKey(p *string) string {
	if p == nil {
		return "missing"
	}
	return "value:" + strconv.Itoa(utf16Len(*p)) + ":" + *p
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}

// Fold rebuilds each run's view from a session's records, in run-start order;
// closed says the owning turn ended (an unfinished member or run is then
// interrupted). Records that CheckRecords would reject are skipped.
func Fold(recs []Record, closed bool) []RunView {
	type member struct {
		view    MemberView
		outcome string
		phase   string
	}
	type run struct {
		view    RunView
		end     string
		members []*member
		bySeq   map[int]*member
		phases  []string
		phase   map[string]*string
	}
	var order []*run
	runs := map[string]*run{}
	for _, r := range recs {
		st := runs[r.RunID]
		switch r.Type {
		case RecordRunStart:
			if st == nil {
				st = &run{view: RunView{RunID: r.RunID, Name: r.Name}, bySeq: map[int]*member{}, phase: map[string]*string{}}
				runs[r.RunID] = st
				order = append(order, st)
			}
		case RecordAgentStart:
			if st == nil || st.bySeq[r.Seq] != nil {
				continue
			}
			k := phaseKey(r.Phase)
			if _, ok := st.phase[k]; !ok {
				st.phase[k] = r.Phase
				st.phases = append(st.phases, k)
			}
			m := &member{view: MemberView{Seq: r.Seq, Label: r.Label, ChildID: r.ChildID}, phase: k}
			st.members = append(st.members, m)
			st.bySeq[r.Seq] = m
		case RecordAgentEnd:
			if st != nil && st.bySeq[r.Seq] != nil && st.bySeq[r.Seq].outcome == "" {
				st.bySeq[r.Seq].outcome = r.Outcome
			}
		case RecordRunEnd:
			if st != nil && st.end == "" {
				st.end = r.StopReason
			}
		}
	}
	out := make([]RunView, 0, len(order))
	for _, st := range order {
		v := st.view
		switch st.end {
		case "completed":
			v.Status = StatusCompleted
		case "cancelled":
			v.Status = StatusCancelled
		case "error":
			v.Status = StatusFailed
		case "":
			v.Status = StatusRunning
			if closed {
				v.Status = StatusInterrupted
			}
		default:
			v.Status = StatusFailed
		}
		runMode := statusMode(v.Status)
		for _, k := range st.phases {
			pv := PhaseView{Key: k, Phase: st.phase[k], Mode: ModeClean}
			for _, m := range st.members {
				if m.phase != k {
					continue
				}
				mv := m.view
				switch {
				case m.outcome != "":
					mv.Status = m.outcome
				case st.end == "" && closed:
					mv.Status = StatusInterrupted
				default:
					mv.Status = StatusRunning
				}
				pv.Members = append(pv.Members, mv)
				pv.Mode = worse(pv.Mode, statusMode(mv.Status))
			}
			pv.Open = pv.Mode != ModeClean
			runMode = worse(runMode, pv.Mode)
			v.Phases = append(v.Phases, pv)
		}
		v.Mode = runMode
		v.Open = runMode != ModeClean
		out = append(out, v)
	}
	return out
}

func statusMode(s string) string {
	switch s {
	case StatusFailed, StatusCancelled, StatusInterrupted:
		return ModeAbnormal
	case StatusRunning:
		return ModeRunning
	}
	return ModeClean
}

func worse(a, b string) string {
	rank := map[string]int{ModeClean: 0, ModeRunning: 1, ModeAbnormal: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}
