package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/actors/controller"
	"github.com/troupe-rt/troupe/messages"
)

//go:embed assets/index.html assets/app.js assets/app.css
var assets embed.FS

// Session is one session a viewer may watch: its id ("" is the unowned jobs) and
// the label the page shows for it (the id when empty; "Unowned jobs" for "").
type Session struct {
	ID    string
	Label string
}

// Child is a continuable child of a session as the page shows it: Status is
// running, idle (resident, waiting) or ready (no Activation); Diagnostic, when set,
// is corrupt, unsupported or unavailable. Epoch and Queued are the resident
// Activation's, when it is resident.
type Child struct {
	ID         string
	Label      string
	Status     string
	Diagnostic string
	Epoch      uint64
	Queued     int
}

// ChildLister lists the direct continuable children of a session. It is called
// from the handler's stream goroutines, concurrently.
type ChildLister interface {
	Children(ctx context.Context, session string) ([]Child, error)
}

// Config configures a Handler.
type Config struct {
	// Sessions is the start grant: the sessions the launch URL may watch, in the
	// order the page lists them. Required. It is evaluated on each request.
	Sessions func() []Session
	// Children, if set, lists each session's continuable children (the Subagents list).
	Children ChildLister
	// AllowedHosts are extra exact Host header values accepted besides loopback
	// (for example "devbox.lan:7777").
	AllowedHosts []string
	// Logger receives the handler's records (paths appear as /t/…/, never a token).
	// Nil: slog.Default().
	Logger *slog.Logger
	// Now is the clock of the page's server side (keepalives and polls use real
	// timers regardless). Nil: time.Now.
	Now func() time.Time
}

// Timings of the live channel (WEB.md §5.1, §5.3).
const (
	keepaliveEvery  = 15 * time.Second
	pollEvery       = 1000 * time.Millisecond
	maxQueuedOutput = 8 << 20
	maxKillBody     = 4096
	unownedLabel    = "Unowned jobs"
)

// StreamCounts are the controller streams a Handler holds open.
type StreamCounts struct {
	Rosters, Follows int
}

// grant is one token and the sessions it may watch.
type grant struct {
	token    string
	sessions func() []Session
	revoked  chan struct{}
	once     sync.Once
}

// Handler is the task list: an http.Handler serving the page, its live channel and
// its kill endpoint under /t/<token>/. Create it with New; end it with Close.
type Handler struct {
	sys  *troupe.System
	ctrl *controller.Controller
	cfg  Config
	log  *slog.Logger
	// grants is copy-on-write: readers load it, Grant and revoke swap a new map.
	grants atomic.Pointer[map[string]*grant]
	start  *grant

	rosters, follows atomic.Int64
	active           atomic.Int64 // live-channel requests in flight
	closing          chan struct{}
	closeOnce        sync.Once
}

// New makes the task list over sys and its job controller ctrl
// (sys.StartController). It refuses a nil Config.Sessions.
func New(sys *troupe.System, ctrl *controller.Controller, cfg Config) (*Handler, error) {
	if cfg.Sessions == nil {
		return nil, errors.New("web: Config.Sessions is required (the sessions a viewer may watch)")
	}
	if sys == nil || ctrl == nil {
		return nil, errors.New("web: a System and its job controller are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	h := &Handler{sys: sys, ctrl: ctrl, cfg: cfg, log: cfg.Logger, closing: make(chan struct{})}
	h.start = &grant{token: newToken(), sessions: cfg.Sessions, revoked: make(chan struct{})}
	h.grants.Store(&map[string]*grant{h.start.token: h.start})
	return h, nil
}

// newToken is 32 bytes from crypto/rand, base64url without padding (43 characters).
func newToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("web: crypto/rand failed: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// LaunchPath is the start grant's path, "/t/<token>/".
func (h *Handler) LaunchPath() string { return "/t/" + h.start.token + "/" }

// Grant makes a second viewer scoped to exactly the sessions ids: its path, and a
// revoke that ends its streams with bye {"reason":"revoked"} and retires its token.
func (h *Handler) Grant(ids ...string) (path string, revoke func()) {
	list := make([]Session, len(ids))
	for i, id := range ids {
		list[i] = Session{ID: id}
	}
	g := &grant{token: newToken(), sessions: func() []Session { return list }, revoked: make(chan struct{})}
	h.swapGrants(func(m map[string]*grant) { m[g.token] = g })
	return "/t/" + g.token + "/", func() {
		g.once.Do(func() {
			h.swapGrants(func(m map[string]*grant) { delete(m, g.token) })
			close(g.revoked)
		})
	}
}

func (h *Handler) swapGrants(edit func(map[string]*grant)) {
	for {
		old := h.grants.Load()
		next := make(map[string]*grant, len(*old)+1)
		for k, v := range *old {
			next[k] = v
		}
		edit(next)
		if h.grants.CompareAndSwap(old, &next) {
			return
		}
	}
}

// lookup finds the grant of token, comparing in constant time against each.
func (h *Handler) lookup(token string) *grant {
	var found *grant
	for t, g := range *h.grants.Load() {
		if subtle.ConstantTimeCompare([]byte(t), []byte(token)) == 1 {
			found = g
		}
	}
	return found
}

// Streams reports the controller streams open now.
func (h *Handler) Streams() StreamCounts {
	return StreamCounts{Rosters: int(h.rosters.Load()), Follows: int(h.follows.Load())}
}

// Close ends every live stream with bye {"reason":"shutdown"} and waits until
// they are gone (or ctx ends); from then on every request with a valid token is
// 503 web/shutting-down. Idempotent.
func (h *Handler) Close(ctx context.Context) error {
	h.closeOnce.Do(func() { close(h.closing) })
	// Each stream sees closing at once, sends bye and returns; wait for the last.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for h.active.Load() > 0 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

func (h *Handler) closed() bool {
	select {
	case <-h.closing:
		return true
	default:
		return false
	}
}

// securityHeaders are sent on every response (WEB.md §6.5).
var securityHeaders = [][2]string{
	{"Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
	{"Referrer-Policy", "no-referrer"},
	{"X-Content-Type-Options", "nosniff"},
	{"X-Frame-Options", "DENY"},
	{"Cache-Control", "no-store"},
	{"Cross-Origin-Opener-Policy", "same-origin"},
	{"Cross-Origin-Resource-Policy", "same-origin"},
}

// ServeHTTP checks Host, then the token, then (for api/* and events) Origin and
// fetch metadata, and serves the route.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	for _, kv := range securityHeaders {
		hdr.Set(kv[0], kv[1])
	}
	if !h.hostAllowed(r.Host) {
		writeError(w, http.StatusForbidden, "web/bad-host", "request Host is not allowed", nil)
		return
	}
	token, rest, ok := splitTokenPath(r.URL.Path)
	var g *grant
	if ok {
		g = h.lookup(token)
	}
	if g == nil {
		http.NotFound(w, r)
		return
	}
	api := rest == "events" || strings.HasPrefix(rest, "api/")
	if api && !originAllowed(r) {
		writeError(w, http.StatusForbidden, "web/bad-origin", "cross-origin request refused", nil)
		return
	}
	if h.closed() {
		writeError(w, http.StatusServiceUnavailable, "web/shutting-down", "the task list is shutting down", nil)
		return
	}
	switch rest {
	case "":
		h.asset(w, r, "assets/index.html", "text/html; charset=utf-8")
	case "app.js":
		h.asset(w, r, "assets/app.js", "text/javascript; charset=utf-8")
	case "app.css":
		h.asset(w, r, "assets/app.css", "text/css; charset=utf-8")
	case "api/sessions":
		if !allowMethod(w, r, http.MethodGet) {
			return
		}
		h.sessions(w, g)
	case "api/kill":
		h.kill(w, r, g)
	case "events":
		if !allowMethod(w, r, http.MethodGet) {
			return
		}
		h.events(w, r, g)
	default:
		writeError(w, http.StatusNotFound, "web/not-found", "no such route", nil)
	}
}

// splitTokenPath splits "/t/<token>/<rest>".
func splitTokenPath(p string) (token, rest string, ok bool) {
	after, found := strings.CutPrefix(p, "/t/")
	if !found {
		return "", "", false
	}
	token, rest, found = strings.Cut(after, "/")
	if !found || token == "" {
		return "", "", false
	}
	return token, rest, true
}

// hostAllowed: 127.0.0.1, localhost or [::1] with any port, or an exact AllowedHosts entry.
func (h *Handler) hostAllowed(host string) bool {
	if host == "" {
		return false
	}
	if slices.Contains(h.cfg.AllowedHosts, host) {
		return true
	}
	name := host
	if hn, _, err := net.SplitHostPort(host); err == nil {
		name = hn
	} else if strings.HasPrefix(host, "[") {
		return false
	}
	return name == "127.0.0.1" || name == "localhost" || name == "::1"
}

// originAllowed: Origin, if present, is exactly this scheme and Host; Sec-Fetch-Site,
// if present, is same-origin or none.
func originAllowed(r *http.Request) bool {
	if o, ok := r.Header["Origin"]; ok {
		scheme := "http://"
		if r.TLS != nil {
			scheme = "https://"
		}
		if len(o) != 1 || o[0] != scheme+r.Host {
			return false
		}
	}
	if s, ok := r.Header["Sec-Fetch-Site"]; ok {
		if len(s) != 1 || (s[0] != "same-origin" && s[0] != "none") {
			return false
		}
	}
	return true
}

func allowMethod(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method || (method == http.MethodGet && r.Method == http.MethodHead) {
		return true
	}
	w.Header().Set("Allow", method)
	writeError(w, http.StatusMethodNotAllowed, "web/method-not-allowed", "method "+r.Method+" not allowed", nil)
	return false
}

func (h *Handler) asset(w http.ResponseWriter, r *http.Request, name, ctype string) {
	if !allowMethod(w, r, http.MethodGet) {
		return
	}
	b, err := assets.ReadFile(name)
	if err != nil {
		writeError(w, http.StatusNotFound, "web/not-found", "no such route", nil)
		return
	}
	w.Header().Set("Content-Type", ctype)
	_, _ = w.Write(b)
}

// visible returns the grant's sessions, labelled.
func visible(g *grant) []Session {
	list := g.sessions()
	out := make([]Session, 0, len(list))
	for _, s := range list {
		if s.Label == "" {
			s.Label = s.ID
			if s.ID == "" {
				s.Label = unownedLabel
			}
		}
		out = append(out, s)
	}
	return out
}

func granted(g *grant, session string) bool {
	for _, s := range g.sessions() {
		if s.ID == session {
			return true
		}
	}
	return false
}

func (h *Handler) sessions(w http.ResponseWriter, g *grant) {
	type item struct {
		ID    string `json:"id"`
		Label string `json:"label"`
	}
	out := struct {
		Sessions []item `json:"sessions"`
	}{Sessions: []item{}}
	for _, s := range visible(g) {
		out.Sessions = append(out.Sessions, item{s.ID, s.Label})
	}
	writeJSON(w, http.StatusOK, out)
}

// killBody is the strict body of POST api/kill.
type killBody struct {
	SessionID *string `json:"sessionId"`
	JobID     string  `json:"jobId"`
}

func (h *Handler) kill(w http.ResponseWriter, r *http.Request, g *grant) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "web/method-not-allowed", "method "+r.Method+" not allowed", nil)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "web/unsupported-media-type", "a kill takes Content-Type application/json", nil)
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxKillBody+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, "web/bad-request", "unreadable body", nil)
		return
	}
	if len(raw) > maxKillBody {
		writeError(w, http.StatusRequestEntityTooLarge, "web/too-large", "a kill body holds at most 4096 bytes", nil)
		return
	}
	var body killBody
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || dec.More() {
		writeError(w, http.StatusBadRequest, "web/bad-request", "malformed kill body", nil)
		return
	}
	if body.SessionID == nil || body.JobID == "" {
		writeError(w, http.StatusBadRequest, "web/bad-request", "a kill names a sessionId and a non-empty jobId", nil)
		return
	}
	session := *body.SessionID
	if !granted(g, session) {
		writeError(w, http.StatusNotFound, string(messages.CodeNotFound), "job "+body.JobID+" is not visible to this viewer",
			map[string]string{"sessionId": session, "jobId": body.JobID})
		return
	}
	outcome, err := h.ctrl.Kill(r.Context(), session, body.JobID)
	if err != nil {
		var e *messages.Error
		switch {
		case errors.As(err, &e) && e.Code == messages.CodeNotFound:
			writeError(w, http.StatusNotFound, string(e.Code), e.Message, e.Details)
		case errors.As(err, &e) && e.Code != "":
			h.log.Warn("web: kill failed", "path", "/t/…/api/kill", "job", body.JobID, "error", e.Message)
			writeError(w, http.StatusInternalServerError, string(e.Code), e.Message, e.Details)
		default:
			h.log.Warn("web: kill failed", "path", "/t/…/api/kill", "job", body.JobID, "error", err.Error())
			writeError(w, http.StatusInternalServerError, "web/kill-failed", err.Error(), nil)
		}
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Outcome string `json:"outcome"`
	}{outcome.Name()})
}

// details is an error's named details, sessionId and jobId first, the rest sorted.
type details map[string]string

func (d details) MarshalJSON() ([]byte, error) {
	keys := make([]string, 0, len(d))
	for k := range d {
		if k != "sessionId" && k != "jobId" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range []string{"jobId", "sessionId"} {
		if _, ok := d[k]; ok {
			keys = append([]string{k}, keys...)
		}
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		vb, _ := json.Marshal(d[k])
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

type errorBody struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Details details `json:"details,omitempty"`
}

func writeError(w http.ResponseWriter, status int, code, msg string, d map[string]string) {
	writeJSON(w, status, errorBody{Code: code, Message: msg, Details: d})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"code":"web/internal","message":"encoding failed"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
