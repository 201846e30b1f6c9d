package acp

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/subagent"
)

// State is the provider state a continuable child's turns record
// (subagent.TurnResult.State): the ACP session and its directory.
type State struct {
	SessionID string `json:"acpSessionId"`
	Cwd       string `json:"cwd"`
}

func (s State) raw() json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// runner runs continuable children's turns: one agent process per resident child
// (per residency epoch), session/new for a child that never opened a session,
// session/load of the recorded one after a cold resume or a restart (docs/INTEROP.md
// section 1.8). Its lock guards only the session → process map (a leaf).
type runner struct {
	p  *Provider
	mu sync.Mutex
	by map[string]*agent
}

// TurnRunner is the runner of the provider's continuable children (only with
// Config.Continuable: the continuation manager's runner is then
// subagent.Route(rt, embedderRunner)).
func (c continuable) TurnRunner() subagent.TurnRunner { return c.Provider.runner }

func (r *runner) live(session string) *agent {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.by[session]
	if a != nil && (isClosed(a.stopped) || isClosed(a.conn.Done())) {
		delete(r.by, session)
		go a.stop() // reap a process that died between turns
		return nil
	}
	return a
}

func (r *runner) failed(diag string, st State) (subagent.TurnResult, error) {
	return subagent.TurnResult{StopReason: subagent.StopError, Diagnostic: subagent.BoundDiagnostic(diag), State: st.raw()}, nil
}

// RunTurn runs one turn of a continuable child on its live session, or starts the
// process (session/new or session/load) for the first turn of an epoch.
func (r *runner) RunTurn(ctx context.Context, turn subagent.Turn) (subagent.TurnResult, error) {
	p := r.p
	text := turn.Input.Text()
	var st State
	if turn.State != nil {
		if err := json.Unmarshal(turn.State, &st); err != nil {
			return r.failed("acp child "+turn.Session+" has unreadable provider state: "+err.Error(), st)
		}
	}
	if text == "" {
		return r.failed("acp: invalid prompt: expected non-empty text", st)
	}
	a := r.live(turn.Session)
	if a == nil {
		if turn.State == nil && turn.History.Len() > 0 {
			return r.failed("acp child "+turn.Session+" has history but no recorded ACP session", st)
		}
		// The recorded directory (the session's), else Config.Cwd, else the header's.
		var cwd string
		var err error
		if st.Cwd != "" {
			cwd, err = st.Cwd, checkDir(st.Cwd)
		} else {
			cwd, err = p.cwd(turn.Cwd)
		}
		if err != nil {
			return r.failed(err.Error(), st)
		}
		st.Cwd = cwd
		if ctx.Err() != nil {
			return subagent.TurnResult{StopReason: subagent.StopAborted, State: st.raw()}, nil
		}
		if a, err = p.spawn(ctx, cwd); err != nil {
			return r.failed(err.Error(), st)
		}
		if err := a.handshake(ctx, st.SessionID, false); err != nil {
			if ctx.Err() != nil {
				return subagent.TurnResult{StopReason: subagent.StopAborted, State: st.raw()}, nil
			}
			return r.failed(loadDiag(err, st.SessionID), st)
		}
		r.mu.Lock()
		r.by[turn.Session] = a
		r.mu.Unlock()
	}
	res := a.prompt(ctx, text)
	st.SessionID = a.sessionID()
	out := subagent.TurnResult{StopReason: res.StopReason, Diagnostic: res.Diagnostic, State: st.raw()}
	if len(res.Output) > 0 {
		out.Messages = []subagent.Message{{Role: "assistant", Content: res.Output}}
	}
	return out, nil
}

// loadDiag words a handshake failure of a resumed child as docs/INTEROP.md
// section 1.8 does: "acp session/load failed: <message> (<code>)".
func loadDiag(err error, load string) string {
	var coded *messages.Error
	if load != "" && asCoded(err, &coded) && coded.Code == CodeHandshakeFailed {
		if _, rest, ok := strings.Cut(coded.Message, ": session/load failed: "); ok {
			return "acp session/load failed: " + rest
		}
	}
	return err.Error()
}

func asCoded(err error, target **messages.Error) bool {
	c, ok := err.(*messages.Error)
	if ok {
		*target = c
	}
	return ok
}

// ReleaseSession stops the child's process (the stop ladder) when its epoch ends.
func (r *runner) ReleaseSession(ctx context.Context, session string) error {
	r.mu.Lock()
	a := r.by[session]
	delete(r.by, session)
	r.mu.Unlock()
	if a == nil {
		return nil
	}
	return a.stop()
}
