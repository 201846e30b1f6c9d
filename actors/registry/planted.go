//go:build troupe_mutation

package registry

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/internal/fault"
)

// The planted bugs of the registry (TESTING.md's mutation check). This file is
// compiled only into troupe_mutation builds (planted_off.go is its no-op twin in
// every other build); even there each bug is inert until a test plants it.

// plantedReceive handles the registry's planted-bug messages: true if m was one.
func (r *registryActor) plantedReceive(m any) bool {
	if m, ok := m.(*job.PlantedEarlyOutcome); ok {
		r.plantedAnnounce(m)
		return true
	}
	return false
}

// PlantedDoubleSlotRelease names a planted bug (TESTING.md's mutation check). It is
// inert: only a test that installs a fault injector with
// fault.Plant(PlantedDoubleSlotRelease) turns it on. A cleanup added to the
// registry's handling of a job actor's termination frees the job's admission slot
// "in case it was never freed" — but the settlement commit already freed it, and
// the cleanup ignores the record's slot flag. Every settled job then frees its slot
// twice, and its owner's bucket admits one job more than its limit for each.
// test/settle catches it.
const PlantedDoubleSlotRelease = "double-slot-release"

// plantedReleaseOnTerminated is PlantedDoubleSlotRelease's cleanup, for a job whose
// actor terminated: it acts once the job's settlement was committed.
func (r *registryActor) plantedReleaseOnTerminated(rec *record) {
	if !rec.live() && fault.Planted(PlantedDoubleSlotRelease) {
		r.adm.Release(rec.ownerKey()) // the bug: the commit already released it
	}
}

// The registry's half of job.PlantedNoticeBeforeCommit: the announcement made from
// the Done watcher's early outcome, and the commit that then stays silent. Only
// tests that plant the bug store here; plantedAnnounceAny keeps the commit's check
// at one atomic load otherwise.
var (
	plantedAnnounced   sync.Map // plantedKey → true: announced early, not yet committed
	plantedAnnounceAny atomic.Bool
)

type plantedKey struct {
	r  *registryActor
	id string
}

// plantedAnnounce announces a live job's settlement from the producer's outcome
// and the record as it stands (its claim so far), before anything is committed.
func (r *registryActor) plantedAnnounce(m *job.PlantedEarlyOutcome) {
	rec := r.idx.get(m.ID)
	if rec == nil || !rec.live() || r.closed {
		return
	}
	plantedAnnounceAny.Store(true)
	plantedAnnounced.Store(plantedKey{r, m.ID}, true)
	var detail *string
	if d := m.Outcome.Detail; d != "" {
		detail = &d
	}
	who := ownerOf(rec.owner)
	for _, layer := range r.layersFor(rec.owner) {
		for _, reg := range r.layers[layer] {
			if reg.kind != regJobDone {
				continue
			}
			at := m.At
			snap := rec.Snapshot(m.Outcome.Status, detail, &at, rec.reported())
			if err := job.Protect(func() error { reg.done(snap, who); return nil }); err != nil {
				r.cfg.Logger.Warn(fmt.Sprintf("jobs: onJobDone listener threw for %s: %s", rec.ID, err.Error()))
			}
		}
	}
}

// plantedAlreadyAnnounced reports (once) whether id's settlement was announced
// early: its commit then does not announce it again.
func (r *registryActor) plantedAlreadyAnnounced(id string) bool {
	if !plantedAnnounceAny.Load() {
		return false
	}
	_, ok := plantedAnnounced.LoadAndDelete(plantedKey{r, id})
	return ok
}
