// Package session persists continuable child sessions (SPEC §6.8, DESIGN
// "Persistence"): a header, the session log (model history and log-only events such
// as the descriptor) and the inbox journal of accepted messages.
//
// The contract every Store keeps:
//  1. A write is acknowledged only once it is durable (a synced commit; concurrent
//     writers may share one commit).
//  2. Activate takes a new epoch from the session record; every later write carries
//     the epoch it was activated with, and a write with a stale epoch is refused
//     (ErrStaleEpoch) in the same transaction — a stale activation can never append.
//  3. Entries and inbox messages keep their order of acceptance (sequence numbers).
package session

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/troupe-rt/troupe/messages"
)

// HeaderVersion is the header format version this package writes.
const HeaderVersion = 1

// ParentSubagent is Header.ParentKind for a parent that is a continuable child.
const ParentSubagent = "subagent"

// Header is a child session's record.
type Header struct {
	ID            string `json:"id"`
	ParentSession string `json:"parentSession"`
	// ParentKind is the namespace ParentSession lives in: "" for a top-level agent,
	// ParentSubagent for a continuable child's own agent. A child id and a top-level
	// session id may be the same string; authority over this session needs both to
	// match (docs/THREAT-MODEL.md), so neither can speak for the other.
	ParentKind      string `json:"parentKind,omitempty"`
	Origin          string `json:"origin"` // "subagent"
	DelegationDepth int    `json:"delegationDepth"`
	SeedLength      int    `json:"seedLength,omitempty"` // log entries inherited from a fork seed
	Cwd             string `json:"cwd,omitempty"`
	CreatedAt       int64  `json:"createdAt"` // Unix milliseconds
	Version         int    `json:"version"`
	Epoch           uint64 `json:"epoch"` // bumped by every activation
}

// Block is a content block.
type Block struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// Entry kinds of the session log.
const (
	EntryMessage     = "message"             // model history
	EntryDescriptor  = "subagent/descriptor" // log-only
	EntryTurnStart   = "turn/start"          // a turn took an inbox message
	EntryTurnEnd     = "turn/end"            // the turn ended (stop reason)
	EntryTurnAborted = "turn/aborted-by-crash"
	EntryDiscarded   = "inbox/discarded" // a disposal dropped the accepted message unrun
	// EntryProviderState is a turn runner's opaque state (subagent.TurnResult.State),
	// log-only: it never enters model history; the latest one is handed to every turn.
	EntryProviderState = "provider/state"
)

// Entry is one event of the session log.
type Entry struct {
	Seq        uint64          `json:"seq"`
	Kind       string          `json:"kind"`
	Role       string          `json:"role,omitempty"`
	Content    []Block         `json:"content,omitempty"`
	Descriptor json.RawMessage `json:"descriptor,omitempty"`
	InboxID    string          `json:"inboxId,omitempty"`
	StopReason string          `json:"stopReason,omitempty"`
	State      json.RawMessage `json:"state,omitempty"` // EntryProviderState only
}

// Source says who wrote an inbox message (it grants nothing).
type Source struct {
	Kind            string `json:"kind"`
	Form            string `json:"form,omitempty"`
	SenderSessionID string `json:"senderSessionId,omitempty"`
}

// InboxMessage is an accepted message.
type InboxMessage struct {
	ID         string  `json:"id"`
	Seq        uint64  `json:"seq"`
	Content    []Block `json:"content"`
	Source     Source  `json:"source"`
	AcceptedAt int64   `json:"acceptedAt"`
	// Quiet marks a message that joined the queue without waking it (an injected
	// notice): it runs with the next turn, or is discarded when the child settles.
	Quiet bool `json:"quiet,omitempty"`
}

// Snapshot is a session as stored.
type Snapshot struct {
	Header Header
	Log    []Entry
	Inbox  []InboxMessage
}

// Store persists sessions. Implementations: Bolt (the embedded default), Memory
// (tests) and session/postgres (for several nodes), which keeps the same
// contract with the epoch check in each write's statement. One test suite,
// session/storetest, runs against all three. Bolt and session/postgres keep a
// restore index in every write's transaction (the open inbox messages with their
// status, the history's length, the latest provider state), so Resume costs the
// same for a session of ten turns and one of ten thousand.
type Store interface {
	// Create writes a new session with its first log entries (a fork seed, the
	// descriptor). It fails with DUPLICATE_CHILD if the id exists.
	Create(ctx context.Context, h Header, entries []Entry) error
	// Activate takes the next epoch and returns the session as stored, at that epoch.
	Activate(ctx context.Context, id string) (Snapshot, error)
	// Resume is Activate for an Activation: it takes the next epoch and returns
	// what the session's next turn needs (Resumed) — not its log — at a cost
	// independent of the log's length. The model history is read with History.
	Resume(ctx context.Context, id string) (Resumed, error)
	// ResumeAccept is Resume and then Accept of m at the new epoch, in one
	// transaction: either the session has the new epoch and m in its inbox
	// (assigned Seq, the last of the returned Resumed's ToRun), or neither. An
	// Activation restored cold by a followup takes its epoch and accepts that
	// followup with it, one durable commit instead of two.
	//
	// start, if not empty, is m's turn start: the entries an Activation appends
	// when m's turn starts (EntryTurnStart naming m, then m's content as a user
	// EntryMessage). If m is then the session's only open message (nothing else
	// to run, nothing cut off), so its turn is the one to start at once, the store
	// appends start in the same transaction (as Append would, at the new epoch)
	// and reports started: the followup's acceptance and its turn start are one
	// durable commit, answered before the turn is run (SPEC §1.3 rule 35). The
	// returned Resumed is as of before start (m among ToRun). A store may always
	// decline (started false, nothing appended): the Activation then records the
	// turn start itself.
	//
	// check, if not nil, is the caller's decision on the session's head (as Head
	// returns it: the header before the new epoch, the descriptor), made in the
	// same transaction before anything is written: if it returns an error, nothing
	// is written and ResumeAccept returns that error as is. A followup's cold
	// restore authorises against the persisted header this way (SPEC §6.3) without
	// a read of its own. check runs inside the store's transaction, perhaps on
	// another goroutine and perhaps more than once (a store may retry its
	// transaction): it must decide from its argument and values fixed before the
	// call, and never block.
	ResumeAccept(ctx context.Context, id string, m InboxMessage, start []Entry, check func(Head) error) (r Resumed, accepted InboxMessage, started bool, err error)
	// History reads the session's model history: its EntryMessage entries with seq
	// <= upTo, in order.
	History(ctx context.Context, id string, upTo uint64) ([]Entry, error)
	// Load reads a session without activating it.
	Load(ctx context.Context, id string) (Snapshot, error)
	// Head reads a session's header and descriptor, not its log or inbox: what
	// routing, authorisation and listing need, at a cost independent of its length.
	Head(ctx context.Context, id string) (Head, error)
	// Accept appends to the inbox journal (assigning Seq) if epoch is current.
	Accept(ctx context.Context, id string, epoch uint64, m InboxMessage) (InboxMessage, error)
	// Append appends log entries (assigning Seq) if epoch is current.
	Append(ctx context.Context, id string, epoch uint64, entries ...Entry) error
	// Delete removes a session (the rollback of a start that failed before acceptance).
	Delete(ctx context.Context, id string) error
	// IDs lists the stored session ids.
	IDs(ctx context.Context) ([]string, error)
	Close() error
}

// Errors of the store.
var (
	ErrStaleEpoch = errors.New("session: write refused: the activation's epoch is stale")
	ErrNotFound   = errors.New("session: not found")
)

// duplicate is DUPLICATE_CHILD (SPEC §6.2 step 5).
func duplicate(id string) error {
	return messages.Errorf("DUPLICATE_CHILD", "subagent %q already exists", id)
}

// DuplicateError is the error Create returns for an id that exists
// (DUPLICATE_CHILD), for the stores outside this package.
func DuplicateError(id string) error { return duplicate(id) }

// Pending derives the restore plan of a snapshot: the accepted messages whose turns
// never started and that no disposal discarded (to run, in order), and those whose
// turn started but never ended (cut off by a crash: logged as aborted, not re-run).
func (s Snapshot) Pending() (toRun []InboxMessage, cutOff []InboxMessage) {
	started, ended, discarded := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, e := range s.Log {
		switch e.Kind {
		case EntryTurnStart:
			started[e.InboxID] = true
		case EntryTurnEnd, EntryTurnAborted:
			ended[e.InboxID] = true
		case EntryDiscarded:
			discarded[e.InboxID] = true
		}
	}
	for _, m := range s.Inbox {
		switch {
		case discarded[m.ID]:
		case !started[m.ID]:
			toRun = append(toRun, m)
		case !ended[m.ID]:
			cutOff = append(cutOff, m)
		}
	}
	return toRun, cutOff
}

// Head is a session's header and descriptor (see Store.Head).
type Head struct {
	Header Header
	// Descriptor is the session's first descriptor after its fork seed
	// (Snapshot.FirstDescriptor); nil if it has none.
	Descriptor json.RawMessage
}

// Head is s's header and descriptor.
func (s Snapshot) Head() Head { return Head{Header: s.Header, Descriptor: s.FirstDescriptor()} }

// FirstDescriptor returns the first descriptor in the child's own suffix (the
// entries after the fork seed), or nil.
func (s Snapshot) FirstDescriptor() json.RawMessage {
	for i, e := range s.Log {
		if i >= s.Header.SeedLength && e.Kind == EntryDescriptor {
			return e.Descriptor
		}
	}
	return nil
}

// Resumed is what Store.Resume returns: a session at its new epoch without its
// log. It equals the Snapshot's Resumed at that epoch.
type Resumed struct {
	Header Header
	// Descriptor is the first descriptor after the fork seed (Head.Descriptor).
	Descriptor json.RawMessage
	// State is the latest EntryProviderState's state; nil: none.
	State json.RawMessage
	// ToRun and CutOff are the restore plan (Snapshot.Pending).
	ToRun, CutOff []InboxMessage
	// LogSeq is the seq of the log's last entry (0: an empty log): History(…, LogSeq)
	// reads the model history as of this activation.
	LogSeq uint64
	// Messages counts the EntryMessage entries: the model history's length.
	Messages int
}

// Resumed derives Store.Resume's answer from a whole snapshot: what a store that
// keeps no index computes, and what every store's index must agree with.
func (s Snapshot) Resumed() Resumed {
	r := Resumed{Header: s.Header, Descriptor: s.FirstDescriptor()}
	r.ToRun, r.CutOff = s.Pending()
	for _, e := range s.Log {
		switch e.Kind {
		case EntryMessage:
			r.Messages++
		case EntryProviderState:
			r.State = e.State
		}
		r.LogSeq = e.Seq
	}
	return r
}

// MessagesUpTo returns the snapshot's EntryMessage entries with seq <= upTo, in
// order (Store.History of a whole snapshot).
func (s Snapshot) MessagesUpTo(upTo uint64) []Entry {
	var out []Entry
	for _, e := range s.Log {
		if e.Seq > upTo {
			break
		}
		if e.Kind == EntryMessage {
			out = append(out, e)
		}
	}
	return out
}

// Inbox statuses, as a store's restore index keeps them per accepted message:
// each entry naming the message raises its status (never lowers it), so the
// pending set is exactly Snapshot.Pending's for messages accepted before the
// entries that name them (the only order an Activation writes).
const (
	inboxOpen     byte = 0 // accepted, its turn never started: to run
	inboxStarted  byte = 1 // its turn started and never ended: cut off
	inboxResolved byte = 2 // its turn ended or was aborted, or it was discarded
)

// inboxStatus is the status an entry of kind k gives the message it names, and
// whether it names one.
func inboxStatus(k string) (byte, bool) {
	switch k {
	case EntryTurnStart:
		return inboxStarted, true
	case EntryTurnEnd, EntryTurnAborted, EntryDiscarded:
		return inboxResolved, true
	}
	return 0, false
}

// InboxStatus is inboxStatus for the stores outside this package: 1 for a turn
// start, 2 for an entry that resolves the message, ok false for any other kind.
func InboxStatus(kind string) (status int, ok bool) {
	st, ok := inboxStatus(kind)
	return int(st), ok
}
