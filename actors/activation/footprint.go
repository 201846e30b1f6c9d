package activation

import "context"

// Footprint counts every entry the directory keeps, table by table: what a leak
// check compares against what should be resident (issue 12's zero residue per
// incarnation). With no Activation resident, no drain below a live parent in force
// and no operation waiting, every count is zero.
type Footprint struct {
	Activations int // resident Activations by child id
	Parents     int // parent agents with resident children
	Below       int // drains below exact parents still recorded
	Waits       int // drain callers waiting
	Failures    int // Activations with recent panics recorded
	Causes      int // stop causes kept for the supervision tree
}

type footprintReq struct{ reply chan<- Footprint }

// Footprint returns the directory's table sizes, taken in one message (after every
// message already sent to it). It is a diagnostic for leak checks.
func (m *Manager) Footprint(ctx context.Context) (Footprint, error) {
	reply := make(chan Footprint, 1)
	m.root.Send(m.pid, &footprintReq{reply: reply})
	select {
	case f := <-reply:
		return f, nil
	case <-ctx.Done():
		return Footprint{}, context.Cause(ctx)
	}
}

func (d *directoryActor) footprint() Footprint {
	return Footprint{
		Activations: len(d.acts),
		Parents:     len(d.kids),
		Below:       len(d.below),
		Waits:       len(d.waits),
		Failures:    len(d.failures),
		Causes:      len(d.life.causes),
	}
}
