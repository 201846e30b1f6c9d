package activation

import (
	"context"
	"encoding/json"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/session"
	"github.com/troupe-rt/troupe/subagent"
)

// CodeActivationFailed answers a message whose handling crashed the Activation;
// the Activation restarts from the store (the message may have been journaled).
const CodeActivationFailed messages.Code = "ACTIVATION_FAILED"

// Authority is who asks for an interrupt (SPEC §6.4): a user holding the durable
// parent address (ParentSession), or a live ancestor agent (Ancestor).
type Authority struct {
	ParentSession string
	Ancestor      *owner.Agent
}

// The directory's messages.
type (
	startReq struct {
		ctx        context.Context
		parent     *owner.Agent
		id         string
		label      string
		descriptor json.RawMessage
		seed       []subagent.Message
		req        subagent.Request
		content    []session.Block
		reply      chan<- startRes
	}
	startRes struct {
		childID, messageID string
		err                error
	}
	// followupReq is a followup to child id. Its submit (ctx, parent, content,
	// source and the caller's answer channel) is the one the directory forwards to
	// the child's Activation, parentKind set: one allocation per followup for both.
	followupReq struct {
		submit
		id string
	}
	interruptReq struct {
		target string
		auth   Authority
		reply  chan<- error
	}
	reportReq struct {
		child   *owner.Agent
		content []session.Block
		quiet   bool
		reply   chan<- acceptRes
	}
	// liveReq asks for the resident entries of ids (one lookup each).
	liveReq struct {
		ids   []string
		reply chan<- map[string]liveEntry
	}
	drainReq struct {
		reply chan<- struct{}
	}
	drainChildrenReq struct {
		parent *owner.Agent
		ids    []string
		reply  chan<- error
	}
	drainBelowReq struct {
		parents []*owner.Agent
		reply   chan<- struct{}
	}
	firstAccepted struct {
		id  string
		res acceptRes
	}
	settled  struct{ id string }
	refused  struct{ id string }
	disposed struct {
		id       string
		err      error
		notice   *owner.Message
		runID    string
		provider string
		stop     string
		last     string
	}
	gaugeReq struct{ reply chan<- int }
	// inspectReq runs fn on the directory's goroutine, between two messages (the
	// package's tests read its indexes with it).
	inspectReq struct{ fn func(*directoryActor) }
)

// liveEntry is a resident Activation as the directory reports it.
type liveEntry struct {
	pid     *actor.PID
	agent   *owner.Agent
	closing bool
}

// entry is a live activation as the directory knows it. It holds its actor's
// carry (one allocation for both): the carry's identity fields (label, agent — whose
// session is the child id —, parent, up, and the header's parent of record,
// namespace, depth and cwd) are written before the spawn and never after, so the
// directory reads them as its own; the rest of the carry is the actor's (the
// directory reads its turn's quiet and cancel only once the actor has crashed, see
// HandleFailure), and the fields below are the directory's alone.
type entry struct {
	carry               // what its actor keeps; label, agent, parent, up, rec, depth
	pid      *actor.PID // the Activation's
	starting *pending   // the first acceptance is in flight: later operations wait
	waiting  *[]any     // operations that arrived while starting or closing (nil: none)
	closing  bool       // the disposal transaction is open: admission is closed
	forced   bool       // a drain disposes it, whatever it proposed
	// kidAt is its index in its parent's directory.kids list: a list with each
	// entry's index, not a map by child id (≈ 10 B per child, not ≈ 55 at half load),
	// and still no scan to remove one (unindex moves the last one into its place).
	kidAt int32
}

// directoryActor maps child session ids to at most one live Activation, spawns and
// disposes them, and routes every operation to the child's mailbox. It never waits
// on an Activation (a crashed one could not answer); continuations come back as
// messages, and operations on a child that is starting or closing wait in its entry
// (the per-child lock, SPEC §1.3 rule 38).
//
// Its indexes are kept in step by index and unindex, the only places that add or
// remove an entry: every step that finds an entry by its Activation, its child
// agent or its parent agent is a map lookup, never a scan of every entry (by its
// Activation: the child id is read off the PID's name, see byActivation; by its
// child agent: that agent's session is the child id, see agentEntry).
type directoryActor struct {
	m        *Manager
	acts     map[string]*entry
	kids     map[string][]*entry // parent agent PID Id → the entries it started (entry.kidAt)
	draining bool
	below    map[string]belowDrain // parent PID Id → its drain: drains below exact parents
	waits    []*drainWait
	spawned  uint64 // Activations spawned, for their unique names
	// named is what every Activation's PID Id starts with, its name after it (the
	// directory's own Id and "/"): byActivation reads the child id off a PID with it.
	named    string
	props    *actor.Props // every Activation's (activationProps)
	spawning spawning     // the Activation being spawned, for its producer only
	life     lifecycle
	// failures holds each Activation's recent panics (by PID Id, which a restart
	// keeps), for the restart-intensity decision (supervision.Decide).
	failures map[string][]time.Time
}

func (d *directoryActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *startReq:
		d.start(c, m)
	case *firstAccepted:
		d.firstAccepted(c, m)
	case *followupReq:
		d.followup(c, m)
	case *interruptReq:
		d.interrupt(c, m)
	case *reportReq:
		e := d.entryOf(m.child)
		if e == nil || e.closing || !d.m.live(context.Background(), m.child) {
			m.reply <- acceptRes{err: unauthorized("agent %q is not a live continuable subagent and cannot report", m.child.Session())}
			return
		}
		reply := m.reply
		c.Send(e.pid, &report{to: d.recipient(e.parentSes(), e.parentKind()), content: m.content, quiet: m.quiet,
			reply: func(r acceptRes) { reply <- r }})
	case *liveReq:
		out := make(map[string]liveEntry, len(m.ids))
		for _, id := range m.ids {
			if e := d.acts[id]; e != nil {
				out[id] = liveEntry{pid: e.pid, agent: e.agent, closing: e.closing}
			}
		}
		m.reply <- out
	case *settled:
		d.settled(c, m.id)
	case *refused:
		if e := d.acts[m.id]; e != nil && e.closing && !e.forced {
			e.closing = false
			d.redispatch(c, e)
		}
	case *disposed:
		d.release(c, m)
	case *retire:
		d.retire(c, m.pid)
	case *restartAfterTurn:
		d.restartAfterTurn(m)
	case *drainReq:
		d.draining = true
		for id, e := range d.acts {
			if d.entryOf(e.parent) == nil { // not nested
				d.disposeTree(c, id, true)
			}
		}
		reply := m.reply
		d.wait(nil, func() { reply <- struct{}{} })
	case *drainChildrenReq:
		d.drainChildren(c, m)
	case *drainBelowReq:
		d.drainBelow(c, m)
	case *gaugeReq:
		m.reply <- len(d.acts)
	case *footprintReq:
		m.reply <- d.footprint()
	case *belowOver:
		delete(d.below, m.pid)
	case *inspectReq:
		m.fn(d)
	case *actor.Terminated:
		d.terminated(c, m.Who)
		d.activationStopped(c, m.Who)
	case *actor.Started, *actor.Stopping, *actor.Stopped:
		d.ownLifecycle(c)
	}
}
