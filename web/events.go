package web

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-rt/troupe/actors/controller"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/supervision"
)

// Wire shapes of the live channel (WEB.md §5.3). Optional fields are omitted,
// never null.
type (
	rowJob struct {
		ID         string  `json:"id"`
		Kind       string  `json:"kind"`
		Label      string  `json:"label"`
		Status     string  `json:"status"`
		Detail     string  `json:"detail,omitempty"`
		StartedAt  int64   `json:"startedAt"`
		FinishedAt *int64  `json:"finishedAt,omitempty"`
		Output     *bounds `json:"output,omitempty"`
	}
	bounds struct {
		Earliest int64 `json:"earliest"`
		Total    int64 `json:"total"`
	}
	rowChild struct {
		ID         string  `json:"id"`
		Label      string  `json:"label,omitempty"`
		Status     string  `json:"status"`
		Diagnostic string  `json:"diagnostic,omitempty"`
		Epoch      *uint64 `json:"epoch,omitempty"`
		Queued     *int    `json:"queued,omitempty"`
	}
	rowsFrame struct {
		Session  string      `json:"session"`
		Jobs     []rowJob    `json:"jobs"`
		Children *[]rowChild `json:"children,omitempty"`
	}
	chunkJSON struct {
		Offset    int64  `json:"offset"`
		Text      string `json:"text"`
		Channel   string `json:"channel,omitempty"`
		GapBefore bool   `json:"gapBefore,omitempty"`
	}
	outputFrame struct {
		JobID  string      `json:"jobId"`
		Chunks []chunkJSON `json:"chunks"`
		Next   int64       `json:"next"`
		Lossy  bool        `json:"lossy,omitempty"`
	}
	openedFrame struct {
		JobID     string `json:"jobId"`
		Job       rowJob `json:"job"`
		HasRecord bool   `json:"hasRecord"`
		Earliest  int64  `json:"earliest"`
		Total     int64  `json:"total"`
		From      int64  `json:"from"`
	}
	statusFrame struct {
		JobID string `json:"jobId"`
		Job   rowJob `json:"job"`
	}
	problemFrame struct {
		Scope   string `json:"scope"`
		JobID   string `json:"jobId,omitempty"`
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	treeNode struct {
		Kind     string `json:"kind"`
		ID       string `json:"id"`
		Depth    int    `json:"depth"`
		Status   string `json:"status,omitempty"`
		Session  string `json:"session,omitempty"`
		Restarts int    `json:"restarts,omitempty"`
		Jobs     int    `json:"jobs,omitempty"`
	}
	treeFrame struct {
		Seq   uint64     `json:"seq"`
		Nodes []treeNode `json:"nodes"`
	}
)

// rowOf is the public projection of a job; output bounds are added by the caller.
func rowOf(j *messages.PublicJob) rowJob {
	return rowJob{ID: j.Id, Kind: j.Kind, Label: j.Label, Status: j.Status.Name(), Detail: j.GetDetail(),
		StartedAt: j.StartedAt, FinishedAt: j.FinishedAt}
}

// conn is one live channel: one roster, at most one follow, polls of the child
// lister and the supervision tree. Only its own goroutine touches it.
type conn struct {
	h       *Handler
	g       *grant
	ctx     context.Context
	session string
	out     *bufio.Writer
	rc      *http.ResponseController

	jobs     []*messages.PublicJob
	children *[]rowChild
	bounds   map[string]*bounds // settled rows' record bounds, read once each
	lastRows []byte
	treeSeq  uint64
	treeSent bool

	followID string
	cursor   int64
}

// parseResume reads Last-Event-ID "<jobId>@<n>" for the followed job.
func parseResume(id, follow string) (int64, bool) {
	job, n, ok := strings.Cut(id, "@")
	if !ok || follow == "" || job != follow {
		return 0, false
	}
	v, err := strconv.ParseInt(n, 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

func (h *Handler) events(w http.ResponseWriter, r *http.Request, g *grant) {
	q := r.URL.Query()
	if !q.Has("session") {
		writeError(w, http.StatusBadRequest, "web/bad-request", "events needs a session parameter", nil)
		return
	}
	session := q.Get("session")
	if !granted(g, session) {
		writeError(w, http.StatusNotFound, "web/session-not-visible", "session "+strconv.Quote(session)+" is not visible to this viewer", nil)
		return
	}
	followID := q.Get("follow")
	var from int64
	if q.Has("from") {
		v, err := strconv.ParseInt(q.Get("from"), 10, 64)
		if err != nil || v < 0 {
			writeError(w, http.StatusBadRequest, "web/bad-request", "from is a byte offset (a non-negative integer)", nil)
			return
		}
		from = v
	}
	if v, ok := parseResume(r.Header.Get("Last-Event-ID"), followID); ok {
		from = v
	}
	h.active.Add(1)
	defer h.active.Add(-1)
	if h.closed() {
		writeError(w, http.StatusServiceUnavailable, "web/shutting-down", "the task list is shutting down", nil)
		return
	}

	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	c := &conn{h: h, g: g, ctx: r.Context(), session: session, out: bufio.NewWriterSize(w, 32<<10),
		rc: http.NewResponseController(w), bounds: map[string]*bounds{}, followID: followID, cursor: from}
	c.raw("retry: 1000\n")
	c.event("hello", "", struct {
		V       int    `json:"v"`
		Session string `json:"session"`
	}{1, session})
	c.flush()

	roster := h.ctrl.List(session)
	h.rosters.Add(1)
	defer func() { roster.Close(); h.rosters.Add(-1) }()

	// The first rows frame comes before anything of the follow.
	select {
	case f, ok := <-roster.Frames:
		if !ok {
			return
		}
		c.listChildren()
		c.roster(f)
	case <-c.ctx.Done():
		return
	}
	c.tree()
	c.flush()

	var follow *controller.Stream[*messages.JobFollowFrame]
	var followFrames <-chan *messages.JobFollowFrame
	endFollow := func() {
		if follow != nil {
			follow.Close()
			h.follows.Add(-1)
			follow, followFrames = nil, nil
		}
	}
	defer endFollow()
	if followID != "" {
		start := from
		follow = h.ctrl.Follow(session, followID, &start)
		h.follows.Add(1)
		followFrames = follow.Frames
	}

	poll := time.NewTicker(pollEvery)
	defer poll.Stop()
	keepalive := time.NewTicker(keepaliveEvery)
	defer keepalive.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-h.closing:
			c.bye("shutdown")
			return
		case <-g.revoked:
			c.bye("revoked")
			return
		case f, ok := <-roster.Frames:
			if !ok {
				c.event("problem", "", problemFrame{Scope: "rows", Code: "web/roster-ended", Message: "the job controller stopped"})
				c.flush()
				return
			}
			// Queued rosters are whole sets: the newest wins.
			for more := true; more; {
				select {
				case n, ok := <-roster.Frames:
					if ok {
						f = n
					} else {
						more = false
					}
				default:
					more = false
				}
			}
			c.listChildren()
			c.roster(f)
		case f, ok := <-followFrames:
			if !ok {
				endFollow()
				break
			}
			queued := c.followFrame(f)
			// Write what is already queued in one go; past 8 MiB end the response
			// (the page resumes from its cursor).
			for more := followFrames != nil; more; {
				select {
				case n, ok := <-followFrames:
					if !ok {
						endFollow()
						more = false
						break
					}
					queued += c.followFrame(n)
					if queued > maxQueuedOutput {
						c.flush()
						return
					}
				default:
					more = false
				}
			}
			if f.GetStatus() != nil || f.GetError() != nil {
				endFollow()
			}
		case <-poll.C:
			if c.listChildren() {
				c.sendRows()
			}
			c.tree()
		case <-keepalive.C:
			c.raw(": keepalive\n\n")
		}
		if !c.flush() {
			return
		}
	}
}

func (c *conn) raw(s string) { _, _ = c.out.WriteString(s) }

// event writes one SSE event; data is JSON, which holds no raw newline.
func (c *conn) event(name, id string, v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	c.raw("event: " + name + "\n")
	if id != "" {
		c.raw("id: " + id + "\n")
	}
	c.raw("data: ")
	_, _ = c.out.Write(b)
	c.raw("\n\n")
	return len(b)
}

func (c *conn) flush() bool {
	if c.out.Flush() != nil {
		return false
	}
	return c.rc.Flush() == nil
}

func (c *conn) bye(reason string) {
	c.event("bye", "", struct {
		Reason string `json:"reason"`
	}{reason})
	c.flush()
}

func (c *conn) roster(f *messages.JobRoster) {
	if f.Error != nil {
		c.event("problem", "", problemFrame{Scope: "rows", Code: f.Error.Code, Message: f.Error.Message})
		return
	}
	c.jobs = f.Jobs
	c.sendRows()
}

// sendRows sends the rows frame unless it equals the last one sent.
func (c *conn) sendRows() {
	frame := rowsFrame{Session: c.session, Jobs: make([]rowJob, 0, len(c.jobs)), Children: c.children}
	seen := make(map[string]bool, len(c.jobs))
	for _, j := range c.jobs {
		row := rowOf(j)
		if j.Status.Terminal() {
			row.Output = c.boundsOf(j.Id)
			seen[j.Id] = true
		}
		frame.Jobs = append(frame.Jobs, row)
	}
	for id := range c.bounds {
		if !seen[id] {
			delete(c.bounds, id)
		}
	}
	b, err := json.Marshal(frame)
	if err != nil || bytes.Equal(b, c.lastRows) {
		return
	}
	c.lastRows = b
	c.raw("event: rows\ndata: ")
	_, _ = c.out.Write(b)
	c.raw("\n\n")
}

// boundsOf reads a settled job's record bounds once (a settled record no longer
// changes); nil when it has none.
func (c *conn) boundsOf(id string) *bounds {
	if b, ok := c.bounds[id]; ok {
		return b
	}
	e, t, has, err := c.h.ctrl.RecordBounds(c.ctx, c.session, id)
	var b *bounds
	if has {
		b = &bounds{Earliest: e, Total: t}
	}
	if err == nil {
		c.bounds[id] = b
	}
	return b
}

// listChildren re-lists the session's children; it reports whether they changed.
// A failing lister is logged and the last good list kept.
func (c *conn) listChildren() bool {
	if c.h.cfg.Children == nil {
		return false
	}
	list, err := c.h.cfg.Children.Children(c.ctx, c.session)
	if err != nil {
		if c.ctx.Err() == nil {
			c.h.log.Warn("web: child lister failed", "path", "/t/…/events", "session", c.session, "error", err.Error())
		}
		if c.children == nil {
			empty := []rowChild{}
			c.children = &empty
			return true
		}
		return false
	}
	rows := make([]rowChild, 0, len(list))
	for _, ch := range list {
		r := rowChild{ID: ch.ID, Label: ch.Label, Status: ch.Status, Diagnostic: ch.Diagnostic}
		if ch.Status == "running" || ch.Status == "idle" {
			epoch, queued := ch.Epoch, ch.Queued
			r.Epoch, r.Queued = &epoch, &queued
		}
		rows = append(rows, r)
	}
	changed := c.children == nil || !equalChildren(*c.children, rows)
	c.children = &rows
	return changed
}

func equalChildren(a, b []rowChild) bool {
	ab, _ := json.Marshal(a)
	bb, _ := json.Marshal(b)
	return bytes.Equal(ab, bb)
}

// followFrame writes one follow frame; it returns the bytes of text it held.
func (c *conn) followFrame(f *messages.JobFollowFrame) int {
	id := c.followID
	switch {
	case f.GetOpened() != nil:
		o := f.GetOpened()
		c.event("opened", "", openedFrame{JobID: id, Job: rowOf(o.Job), HasRecord: o.HasRecord,
			Earliest: o.Earliest, Total: o.Total, From: c.cursor})
	case f.GetOutput() != nil:
		o := f.GetOutput()
		frame := outputFrame{JobID: id, Chunks: make([]chunkJSON, 0, len(o.Chunks)), Next: o.Next, Lossy: o.Lossy}
		for _, ch := range o.Chunks {
			frame.Chunks = append(frame.Chunks, chunkJSON{Offset: ch.Offset, Text: ch.Text, Channel: ch.Channel, GapBefore: ch.GapBefore})
		}
		c.cursor = max(c.cursor, o.Next)
		return c.event("output", id+"@"+strconv.FormatInt(c.cursor, 10), frame)
	case f.GetStatus() != nil:
		c.event("status", id+"@"+strconv.FormatInt(c.cursor, 10), statusFrame{JobID: id, Job: rowOf(f.GetStatus())})
	case f.GetError() != nil:
		e := f.GetError()
		c.event("problem", "", problemFrame{Scope: "follow", JobID: id, Code: e.Code, Message: e.Message})
	}
	return 0
}

// tree sends the supervision tree when it changed (polled once per pollEvery; the
// inspector's Stats tell whether it moved before a snapshot is taken): every node
// but the jobs (which the list shows), each registry node counting its live jobs.
func (c *conn) tree() {
	tr := c.h.sys.Tree()
	if tr == nil {
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, pollEvery)
	defer cancel()
	if st, err := tr.Stats(ctx); err != nil || (c.treeSent && st.Applied == c.treeSeq) {
		return
	}
	snap, err := tr.Snapshot(ctx)
	if err != nil || (c.treeSent && snap.Seq == c.treeSeq) {
		return
	}
	c.treeSent, c.treeSeq = true, snap.Seq
	depth := map[supervision.Ref]int{}
	frame := treeFrame{Seq: snap.Seq, Nodes: []treeNode{}}
	index := map[supervision.Ref]int{}
	for _, n := range snap.Nodes {
		d := 0
		if !n.Parent.IsRoot() {
			d = depth[n.Parent] + 1
		}
		depth[n.Ref] = d
		if n.Kind == supervision.KindJob {
			if i, ok := index[n.Parent]; ok {
				frame.Nodes[i].Jobs++
			}
			continue
		}
		index[n.Ref] = len(frame.Nodes)
		frame.Nodes = append(frame.Nodes, treeNode{Kind: string(n.Kind), ID: n.ID, Depth: d, Status: n.Status,
			Session: n.Session, Restarts: n.Restarts})
	}
	c.event("tree", "", frame)
}
