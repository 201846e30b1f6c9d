package harness

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// DirectoryOpKind is what a directory operation observed.
type DirectoryOpKind uint8

const (
	// Acquire is a materialization taking the session: its Activation is live at
	// Epoch (its nonce) from now on.
	Acquire DirectoryOpKind = iota
	// Restart is the live Activation restarting in place at a new Epoch (a crash
	// restart re-activates the session; the old epoch is fenced).
	Restart
	// Release is the live Activation (the one acquired at Epoch) going away.
	Release
	// TurnBegin and TurnEnd are a turn's entry and return, run at Epoch.
	TurnBegin
	TurnEnd
)

func (k DirectoryOpKind) String() string {
	return [...]string{"acquire", "restart", "release", "turn begin", "turn end"}[k]
}

// DirectoryOp is one observed operation on a session's directory entry.
type DirectoryOp struct {
	Session string
	Kind    DirectoryOpKind
	Epoch   uint64
	Note    string // free text for the timeline (a turn's input)
}

func (o DirectoryOp) String() string {
	s := fmt.Sprintf("%s %s epoch %d", o.Session, o.Kind, o.Epoch)
	if o.Note != "" {
		s += fmt.Sprintf(" %q", o.Note)
	}
	return s
}

// DirectoryState is the directory model's state for one session: the live
// Activation's nonce (the epoch it was acquired at; 0: none), the epoch it runs at
// now (a restart takes a new one) and the last epoch ever handed out.
type DirectoryState struct{ Live, Current, Last uint64 }

// DirectoryStep is the directory model's transition: at most one live Activation per
// session. An acquire takes the next epoch (one above the last) only when none is
// live, and that epoch is its nonce; a restart of the live one takes the next epoch
// in place; a release ends the live one (matched by nonce); every turn begins and
// ends under the live Activation at its current epoch — so epochs only grow and
// turns of two Activations never interleave.
func DirectoryStep(s DirectoryState, op DirectoryOp) (bool, DirectoryState) {
	switch op.Kind {
	case Acquire:
		if op.Epoch != s.Last+1 {
			return false, s
		}
		return s.Live == 0, DirectoryState{Live: op.Epoch, Current: op.Epoch, Last: op.Epoch}
	case Restart:
		if op.Epoch != s.Last+1 {
			return false, s
		}
		return s.Live != 0, DirectoryState{Live: s.Live, Current: op.Epoch, Last: op.Epoch}
	case Release:
		return s.Live != 0 && s.Live == op.Epoch, DirectoryState{Last: s.Last}
	case TurnBegin, TurnEnd:
		return s.Live != 0 && s.Current == op.Epoch, s
	}
	return false, s
}

// DirectoryModel is DirectoryStep as a porcupine model, partitioned by session.
// Operation inputs are DirectoryOp; outputs are unused.
func DirectoryModel() porcupine.Model {
	return porcupine.Model{
		Partition: partitionBy(func(op porcupine.Operation) string { return op.Input.(DirectoryOp).Session }),
		Init:      func() any { return DirectoryState{} },
		Step: func(state, input, _ any) (bool, any) {
			return DirectoryStep(state.(DirectoryState), input.(DirectoryOp))
		},
		DescribeOperation: func(input, _ any) string { return input.(DirectoryOp).String() },
		DescribeState: func(state any) string {
			s := state.(DirectoryState)
			return fmt.Sprintf("live activation %d at epoch %d, last epoch %d", s.Live, s.Current, s.Last)
		},
	}
}

// CheckDirectory checks ops (inputs DirectoryOp) against DirectoryModel (see Check).
func CheckDirectory(name string, ops []porcupine.Operation) error {
	return Check(name, DirectoryModel(), ops)
}

// partitionBy splits a history into independent sub-histories by key, in order of
// first appearance.
func partitionBy(key func(porcupine.Operation) string) func([]porcupine.Operation) [][]porcupine.Operation {
	return func(ops []porcupine.Operation) [][]porcupine.Operation {
		idx := map[string]int{}
		var out [][]porcupine.Operation
		for _, op := range ops {
			k := key(op)
			i, ok := idx[k]
			if !ok {
				i = len(out)
				idx[k] = i
				out = append(out, nil)
			}
			out[i] = append(out[i], op)
		}
		return out
	}
}
