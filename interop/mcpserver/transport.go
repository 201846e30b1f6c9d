package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeStdio serves one MCP session over in and out (newline-delimited JSON-RPC),
// as the incarnation of Config.SessionID (or a minted mcp-<16 hex>), created
// before the first request. It returns when in reaches EOF, the client closes the
// session or ctx ends — and only after the session's teardown: its jobs are
// gone and its incarnation unregistered. in and out are closed when the session
// ends if they are io.Closers.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	id := s.cfg.SessionID
	if id == "" {
		id = newSessionID()
	} else if s.sys.Jobs().RegisteredAgent(ctx, id) != nil {
		return invalid("mcpserver: session %q already has a live agent", id)
	}
	sess := newSession(s, id, "", 0)
	if err := s.admit(sess); err != nil {
		return err
	}
	if _, err := sess.incarnate(); err != nil {
		sess.teardown()
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ss, err := sess.sdk.Connect(ctx, &mcp.IOTransport{Reader: readCloser(in), Writer: writeCloser(out)}, nil)
	if err != nil {
		sess.teardown()
		return err
	}
	_ = sess.bind(ss)
	stop := context.AfterFunc(ctx, func() { _ = ss.Close() })
	defer stop()
	_ = ss.Wait()
	sess.teardown()
	return nil
}

func readCloser(r io.Reader) io.ReadCloser {
	if rc, ok := r.(io.ReadCloser); ok {
		return rc
	}
	return io.NopCloser(r)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func writeCloser(w io.Writer) io.WriteCloser {
	if wc, ok := w.(io.WriteCloser); ok {
		return wc
	}
	return nopWriteCloser{w}
}

// NewToken returns a random bearer token of 32 bytes, hex-encoded.
func NewToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Listen opens a TCP listener on a loopback address: 127.0.0.1, ::1 or localhost
// (port 0 picks a free port). Any other address fails config/invalid.
func Listen(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || !loopback(host) {
		return nil, invalid("mcpserver: refusing to listen on non-loopback address %s", addr)
	}
	return net.Listen("tcp", addr)
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

type holderKey struct{}

// holder carries the session a session-less POST creates, so getServer, which
// the SDK calls more than once per request, creates one.
type holder struct {
	sess     *session
	existing bool // the request names an Mcp-Session-Id
}

// Handler is the streamable HTTP handler (stateful; mount it at /mcp). Every
// request needs Authorization: Bearer <Config.Token>, else 401; a Host other than
// a loopback name or a foreign Origin gets 403; a new session past MaxSessions,
// or while the server closes, gets 503 — except, past MaxSessions, a bare
// server/discover, whose session gets no incarnation and does not count (INTEROP.md
// section 2.3); a body over 4 MiB gets 413. Each new
// session gets its own SDK server and a random 128-bit Mcp-Session-Id, ended by
// DELETE, by IdleTimeout without a request, or by Close.
func (s *Server) Handler() (http.Handler, error) {
	if len(s.cfg.Token) < MinTokenBytes {
		return nil, invalid("mcpserver: the HTTP handler needs a token of at least %d bytes", MinTokenBytes)
	}
	sdk := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		h, ok := r.Context().Value(holderKey{}).(*holder)
		if !ok {
			return nil
		}
		if h.existing {
			return versionProbe
		}
		if h.sess == nil {
			var b [16]byte
			_, _ = rand.Read(b[:])
			h.sess = newSession(s, newSessionID(), hex.EncodeToString(b[:]), s.cfg.MaxSessions)
		}
		return h.sess.sdk
	}, &mcp.StreamableHTTPOptions{SessionTimeout: s.cfg.IdleTimeout})
	protect := http.NewCrossOriginProtection()
	token := []byte("Bearer " + s.cfg.Token)
	inner := protect.Handler(sdk)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, token) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			plainError(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
			closing, full := s.atLimit()
			if full && !closing {
				// a bare server/discover does not count against MaxSessions
				// (its SDK session gets no incarnation): it is served at the limit
				var bare bool
				bare, r.Body = peekDiscover(r.Body)
				full = !bare
			}
			if closing || full {
				msg := errClosing.Error()
				if full {
					err := sessionLimit(s.cfg.MaxSessions)
					msg = err.Error()
					s.log.Warn(msg, "code", string(CodeSessionLimit))
				}
				plainError(w, msg, http.StatusServiceUnavailable)
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), holderKey{}, &holder{}))
		} else {
			// Requests of an existing session: the SDK routes them by Mcp-Session-Id;
			// getServer is consulted only for the protocol-version check.
			r = r.WithContext(context.WithValue(r.Context(), holderKey{}, &holder{existing: true}))
		}
		inner.ServeHTTP(w, r)
	}), nil
}

// discoverPeekBytes bounds what peekDiscover reads of a body: a server/discover
// request is a few hundred bytes.
const discoverPeekBytes = 64 << 10

// peekDiscover reports whether body is one JSON-RPC server/discover request, and
// returns a body that reads the same bytes as the original. It reads at most
// discoverPeekBytes (a longer body is not one); the rest stays unread.
func peekDiscover(body io.ReadCloser) (bool, io.ReadCloser) {
	head, err := io.ReadAll(io.LimitReader(body, discoverPeekBytes))
	replay := struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), body), body}
	if err != nil || len(head) == discoverPeekBytes {
		return false, replay
	}
	var msg struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(head, &msg) != nil {
		return false, replay
	}
	return msg.Method == "server/discover", replay
}

// versionProbe answers the SDK's per-request protocol-version lookup for requests
// of existing sessions (which the SDK routes by Mcp-Session-Id, never to it): it
// is never connected, and supports the versions every session's server does.
var versionProbe = mcp.NewServer(&mcp.Implementation{Name: "troupe-mcp", Version: Version}, nil)

// plainError writes msg as the whole text/plain body (no trailing newline).
func plainError(w http.ResponseWriter, msg string, code int) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg)
}
