package harness

import (
	"fmt"
	"strings"

	"github.com/anishathalye/porcupine"
)

// FIFOOpKind is what an inbox operation observed.
type FIFOOpKind uint8

const (
	// Enqueue is a message accepted into a session's inbox with sequence number Seq
	// (recorded from the send's call to its acknowledgement).
	Enqueue FIFOOpKind = iota
	// Dequeue is a turn taking message Text (recorded as an instant at the turn's start).
	Dequeue
)

func (k FIFOOpKind) String() string { return [...]string{"enqueue", "dequeue"}[k] }

// FIFOOp is one observed inbox operation. Texts must be unique per session.
type FIFOOp struct {
	Session string
	Kind    FIFOOpKind
	Text    string
	Seq     uint64 // Enqueue only: the sequence number the inbox gave the message
}

func (o FIFOOp) String() string {
	if o.Kind == Enqueue {
		return fmt.Sprintf("%s enqueue %q seq %d", o.Session, o.Text, o.Seq)
	}
	return fmt.Sprintf("%s dequeue %q", o.Session, o.Text)
}

// FIFOState is the FIFO model's state for one session: the next sequence number to
// be accepted and the accepted messages not yet taken by a turn, in order (joined
// by \x00, so states are comparable and porcupine can cache them).
type FIFOState struct {
	Next  uint64
	Queue string
}

// FIFOStep is the FIFO model's transition: a message is accepted with the next
// sequence number (so acceptance is linearizable with the senders' real-time
// order), and turns take messages strictly in acceptance order, each once.
func FIFOStep(s FIFOState, op FIFOOp) (bool, FIFOState) {
	switch op.Kind {
	case Enqueue:
		if op.Seq != s.Next {
			return false, s
		}
		q := op.Text
		if s.Queue != "" {
			q = s.Queue + "\x00" + op.Text
		}
		return true, FIFOState{Next: s.Next + 1, Queue: q}
	case Dequeue:
		head, rest, _ := strings.Cut(s.Queue, "\x00")
		if s.Queue == "" || head != op.Text {
			return false, s
		}
		return true, FIFOState{Next: s.Next, Queue: rest}
	}
	return false, s
}

// FIFOModel is FIFOStep as a porcupine model, partitioned by session, starting at
// sequence number 1. Operation inputs are FIFOOp; outputs are unused.
func FIFOModel() porcupine.Model {
	return porcupine.Model{
		Partition: partitionBy(func(op porcupine.Operation) string { return op.Input.(FIFOOp).Session }),
		Init:      func() any { return FIFOState{Next: 1} },
		Step: func(state, input, _ any) (bool, any) {
			return FIFOStep(state.(FIFOState), input.(FIFOOp))
		},
		DescribeOperation: func(input, _ any) string { return input.(FIFOOp).String() },
		DescribeState: func(state any) string {
			s := state.(FIFOState)
			return fmt.Sprintf("next seq %d, queue [%s]", s.Next, strings.ReplaceAll(s.Queue, "\x00", ", "))
		},
	}
}

// CheckFIFO checks ops (inputs FIFOOp) against FIFOModel (see Check).
func CheckFIFO(name string, ops []porcupine.Operation) error {
	return Check(name, FIFOModel(), ops)
}
