package activationsuites

import (
	"fmt"

	"github.com/anishathalye/porcupine"

	"github.com/troupe-rt/troupe/harness"
)

// opKind is what an observed operation was.
type opKind uint8

const (
	opAcquire opKind = iota // the store's Activate of a session: a new activation, at epoch
	opRelease               // that activation's child agent disposed: the activation is gone
	opTurn                  // a RunTurn call, started by the activation at epoch
	opEnqueue               // a Start or Followup that was accepted (msgID; seq from the store)
	opSpawn                 // a child agent made for a materialization at epoch
	opTurnEnd               // a RunTurn call returning (splitTurns)
)

func (k opKind) String() string {
	return [...]string{"acquire", "release", "turn", "enqueue", "spawn", "turn end"}[k]
}

// splitTurns replaces each turn by two instants, its entry and its return, so the
// directory model checks that the turn's own Activation (at the turn's epoch) was
// the live one both when the turn began and when it returned.
func splitTurns(ops []opRec) []opRec {
	out := make([]opRec, 0, len(ops))
	for _, o := range ops {
		if o.kind != opTurn {
			out = append(out, o)
			continue
		}
		begin, end := o, o
		begin.ret = o.call
		end.kind, end.call = opTurnEnd, o.ret
		out = append(out, begin, end)
	}
	return out
}

// opRec is one observed operation, timed by the world's logical clock.
type opRec struct {
	session   string
	kind      opKind
	epoch     uint64
	text      string
	msgID     string
	seq       uint64
	restart   bool // an acquire by a restarted Activation (no agent was spawned for it)
	call, ret int64
}

func (o opRec) String() string {
	switch o.kind {
	case opEnqueue:
		return fmt.Sprintf("%s enqueue %q → %s seq %d", o.session, o.text, o.msgID, o.seq)
	case opTurn, opTurnEnd:
		return fmt.Sprintf("%s %s %q at epoch %d", o.session, o.kind, o.text, o.epoch)
	}
	if o.restart {
		return fmt.Sprintf("%s %s epoch %d (restart)", o.session, o.kind, o.epoch)
	}
	return fmt.Sprintf("%s %s epoch %d", o.session, o.kind, o.epoch)
}

// classifyAcquires marks the acquires no agent was spawned for: a restarted
// Activation re-activating its session (it keeps its agent).
func classifyAcquires(ops []opRec) []opRec {
	spawned := map[string]bool{}
	for _, o := range ops {
		if o.kind == opSpawn {
			spawned[o.session+"\x00"+fmt.Sprint(o.epoch)] = true
		}
	}
	out := append([]opRec(nil), ops...)
	for i, o := range out {
		if o.kind == opAcquire {
			out[i].restart = !spawned[o.session+"\x00"+fmt.Sprint(o.epoch)]
		}
	}
	return out
}

func partitionBySession(ops []porcupine.Operation) [][]porcupine.Operation {
	idx := map[string]int{}
	var out [][]porcupine.Operation
	for _, op := range ops {
		s := op.Input.(opRec).session
		i, ok := idx[s]
		if !ok {
			i = len(out)
			idx[s] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], op)
	}
	return out
}

// directoryModel is harness.DirectoryModel over the suite's records: at most one
// live Activation per session, epochs only grow, turns run under the live one.
func directoryModel() porcupine.Model {
	return adapt(harness.DirectoryModel(), func(o opRec) any {
		kind := map[opKind]harness.DirectoryOpKind{
			opAcquire: harness.Acquire, opRelease: harness.Release, opTurn: harness.TurnBegin, opTurnEnd: harness.TurnEnd,
		}[o.kind]
		if o.kind == opAcquire && o.restart {
			kind = harness.Restart
		}
		return harness.DirectoryOp{Session: o.session, Kind: kind, Epoch: o.epoch, Note: o.text}
	})
}

// fifoModel is harness.FIFOModel over the suite's records: a turn is a dequeue
// observed at its RunTurn entry.
func fifoModel() porcupine.Model {
	return adapt(harness.FIFOModel(), func(o opRec) any {
		if o.kind == opEnqueue {
			return harness.FIFOOp{Session: o.session, Kind: harness.Enqueue, Text: o.text, Seq: o.seq}
		}
		return harness.FIFOOp{Session: o.session, Kind: harness.Dequeue, Text: o.text}
	})
}

// adapt runs model on the suite's opRec inputs, converted by conv; an operation of
// a kind the model does not know is filtered out by check before it gets here.
func adapt(model porcupine.Model, conv func(opRec) any) porcupine.Model {
	return porcupine.Model{
		Partition: partitionBySession,
		Init:      model.Init,
		Step: func(state, input, output any) (bool, any) {
			return model.Step(state, conv(input.(opRec)), output)
		},
		DescribeOperation: func(input, _ any) string { return input.(opRec).String() },
		DescribeState:     model.DescribeState,
	}
}

// check runs porcupine on ops (those of the given kinds; a turn is checked as an
// instant at its entry when instantTurns) with harness.Check: on a violation the
// error has the history and, under $TROUPE_ARTIFACTS, porcupine's HTML timeline.
func check(name string, model porcupine.Model, ops []opRec, instantTurns bool, kinds ...opKind) error {
	var hist []porcupine.Operation
	for _, o := range ops {
		want := false
		for _, k := range kinds {
			want = want || o.kind == k
		}
		if !want {
			continue
		}
		ret := o.ret
		if instantTurns && o.kind == opTurn {
			ret = o.call
		}
		hist = append(hist, porcupine.Operation{ClientId: clientOf(o), Input: o, Call: o.call, Output: nil, Return: ret})
	}
	if err := harness.Check(name, model, hist); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// clientOf gives each kind of operation its own row in porcupine's timeline.
func clientOf(o opRec) int { return int(o.kind) }
