package job

import "github.com/troupe-rt/troupe/messages"

// Meta is the immutable part of a job's record, fixed at registration.
type Meta struct {
	ID               string
	Kind             string
	Label            string
	OutputLimitBytes *int64  // present only when the spec gave it
	OwnerSession     *string // present only for owned jobs
	StartedAt        int64   // Unix milliseconds
}

// Snapshot builds a fresh snapshot (SPEC §2.12). detail and finishedAt are
// presence-tracked: nil means the key is absent.
func (m *Meta) Snapshot(status Status, detail *string, finishedAt *int64, reported bool) *messages.JobSnapshot {
	return &messages.JobSnapshot{
		Id:               m.ID,
		Kind:             m.Kind,
		Label:            m.Label,
		OutputLimitBytes: m.OutputLimitBytes,
		OwnerSession:     m.OwnerSession,
		Status:           status,
		Detail:           detail,
		StartedAt:        m.StartedAt,
		FinishedAt:       finishedAt,
		Reported:         reported,
	}
}
