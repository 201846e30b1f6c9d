package job

import (
	"strings"

	"github.com/troupe-rt/troupe/messages"
)

// Meta is the immutable part of a job's record, fixed at registration. Its kind is
// not stored: an id is "<kind>-<n>", so Kind reads it off the id (16 B less per
// record, live or settled).
type Meta struct {
	ID               string // "<kind>-<n>"
	Label            string
	OutputLimitBytes *int64  // present only when the spec gave it
	OwnerSession     *string // present only for owned jobs
	StartedAt        int64   // Unix milliseconds
}

// Kind returns the job's kind: its id up to the last '-' (a kind may contain '-';
// the counter after it does not).
func (m *Meta) Kind() string {
	if i := strings.LastIndexByte(m.ID, '-'); i >= 0 {
		return m.ID[:i]
	}
	return m.ID
}

// Snapshot builds a fresh snapshot (SPEC §2.12). detail and finishedAt are
// presence-tracked: nil means the key is absent.
func (m *Meta) Snapshot(status Status, detail *string, finishedAt *int64, reported bool) *messages.JobSnapshot {
	s := &messages.JobSnapshot{}
	m.Fill(s, status, detail, finishedAt, reported)
	return s
}

// Fill writes the snapshot Snapshot would build into s, a fresh (zero)
// JobSnapshot: for a caller that allocates it together with what detail and
// finishedAt point to (one allocation where there were up to three).
func (m *Meta) Fill(s *messages.JobSnapshot, status Status, detail *string, finishedAt *int64, reported bool) {
	s.Id = m.ID
	s.Kind = m.Kind()
	s.Label = m.Label
	s.OutputLimitBytes = m.OutputLimitBytes
	s.OwnerSession = m.OwnerSession
	s.Status = status
	s.Detail = detail
	s.StartedAt = m.StartedAt
	s.FinishedAt = finishedAt
	s.Reported = reported
}
