package web_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/web"
)

func TestWebU38_ListenIsLoopbackUnlessAskedOtherwise(t *testing.T) {
	e := newEnv(t, envOpts{})
	srv, err := web.Listen(e.h, web.ListenConfig{})
	require.NoError(t, err)
	port := srv.Addr().(*net.TCPAddr).Port
	require.Equal(t, fmt.Sprintf("http://127.0.0.1:%d/t/%s/", port, strings.TrimSuffix(strings.TrimPrefix(e.h.LaunchPath(), "/t/"), "/")), srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	resp, _ := get(t, srv.URL())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for _, addr := range []string{"localhost:0", "[::1]:0"} {
		h2 := newEnv(t, envOpts{}).h
		s, err := web.Listen(h2, web.ListenConfig{Addr: addr})
		if err != nil && strings.Contains(err.Error(), "cannot assign requested address") {
			continue // no IPv6 loopback on this host: the address was accepted, the OS refused it
		}
		require.NoError(t, err, addr)
		require.NoError(t, s.Close(ctx))
	}
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", "192.0.2.7:0"} {
		s, err := web.Listen(e.h, web.ListenConfig{Addr: addr})
		require.Nil(t, s)
		require.EqualError(t, err, fmt.Sprintf("web: refusing to listen on non-loopback address %q (set ListenConfig.AllowRemote to expose the task list)", addr))
	}
	require.NoError(t, srv.Close(ctx))
}

func TestWebU39_TheTokenIsRequiredEverywhereAndNeverLogged(t *testing.T) {
	e := newEnv(t, envOpts{})
	p := e.prod(t)
	p.CancelErr = fmt.Errorf("boom")
	_, err := e.sys.Jobs().Start(bg, p.Spec(e.a))
	require.NoError(t, err)
	lp := e.h.LaunchPath()
	require.Regexp(t, `^/t/[A-Za-z0-9_-]{43}/$`, lp)
	h2, err := web.New(e.sys, e.ctl, web.Config{Sessions: func() []web.Session { return nil }})
	require.NoError(t, err)
	require.NotEqual(t, lp, h2.LaunchPath())

	token := lp[3 : len(lp)-1]
	flip := []byte(token)
	if flip[10] == 'A' {
		flip[10] = 'B'
	} else {
		flip[10] = 'A'
	}
	bad := "/t/" + string(flip) + "/"
	paths := []string{"/", "/t/", "/app.js", "/events", "/api/kill"}
	for _, rest := range []string{"", "app.js", "app.css", "api/sessions", "events?session=s1", "api/kill", "nope"} {
		paths = append(paths, bad+rest)
	}
	for _, path := range paths {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(`{"sessionId":"s1","jobId":"bash-1"}`))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			resp, body := do(t, req)
			require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
			require.Equal(t, "404 page not found\n", body, path)
			require.Empty(t, resp.Header.Values("Set-Cookie"))
		}
	}
	require.Equal(t, web.StreamCounts{}, e.h.Streams(), "no controller stream was opened")
	require.Empty(t, p.Cancels(), "no cancel was called")
	// A failing kill is logged; the log holds no token.
	resp, _ := e.kill(t, "s1", "bash-1")
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	require.Contains(t, e.logs.String(), "web: kill failed")
	require.NotContains(t, e.logs.String(), token)
}

func rawRequest(t *testing.T, addr, request string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(budget)))
	_, err = io.WriteString(c, request)
	require.NoError(t, err)
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	return strings.TrimSpace(line)
}

func TestWebU40_HostIsCheckedFirst(t *testing.T) {
	e := newEnv(t, envOpts{hosts: []string{"devbox.lan:7777"}})
	u, _ := url.Parse(e.srv.URL)
	port := u.Port()
	for _, rest := range []string{"", "app.js", "api/sessions", "events?session=s1", "nope"} {
		req, _ := http.NewRequest(http.MethodGet, e.url(rest), nil)
		req.Host = "evil.example:" + port
		resp, body := do(t, req)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, rest)
		require.Equal(t, "web/bad-host", decode(t, body)["code"])
	}
	line := rawRequest(t, u.Host, "GET "+e.h.LaunchPath()+" HTTP/1.0\r\n\r\n")
	require.Equal(t, "HTTP/1.0 403 Forbidden", line, "no Host")
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port, "devbox.lan:7777"} {
		req, _ := http.NewRequest(http.MethodGet, e.url("api/sessions"), nil)
		req.Host = host
		resp, _ := do(t, req)
		require.Equal(t, http.StatusOK, resp.StatusCode, host)
	}
	req, _ := http.NewRequest(http.MethodGet, e.url(""), nil)
	req.Host = "devbox.lan:7778"
	resp, _ := do(t, req)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}

func TestWebU41_OriginAndFetchMetadataGuardTheAPIAndTheStream(t *testing.T) {
	e := newEnv(t, envOpts{})
	p := e.prod(t)
	id, err := e.sys.Jobs().Start(bg, p.Spec(e.a))
	require.NoError(t, err)
	u, _ := url.Parse(e.srv.URL)
	port := u.Port()
	bad := []map[string]string{
		{"Origin": "http://evil.example"}, {"Origin": "null"}, {"Origin": "http://localhost:" + port},
		{"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"},
	}
	for _, hdr := range bad {
		for _, route := range []string{"events?session=s1", "api/sessions", "api/kill"} {
			method := http.MethodGet
			if route == "api/kill" {
				method = http.MethodPost
			}
			req, _ := http.NewRequest(method, e.url(route), strings.NewReader(`{"sessionId":"s1","jobId":"`+id+`"}`))
			req.Header.Set("Content-Type", "application/json")
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			resp, body := do(t, req)
			require.Equal(t, http.StatusForbidden, resp.StatusCode, "%v %s", hdr, route)
			require.Equal(t, "web/bad-origin", decode(t, body)["code"])
		}
	}
	require.Empty(t, p.Cancels(), "a refused kill never reaches the producer")
	good := []map[string]string{
		{"Origin": "http://127.0.0.1:" + port}, {"Sec-Fetch-Site": "same-origin"}, {"Sec-Fetch-Site": "none"}, {},
	}
	for _, hdr := range good {
		req, _ := http.NewRequest(http.MethodGet, e.url("api/sessions"), nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, _ := do(t, req)
		require.Equal(t, http.StatusOK, resp.StatusCode, hdr)
		s := open(t, e.url("events?session=s1"), hdr)
		s.next("hello")
		s.close()
	}
	req, _ := http.NewRequest(http.MethodPost, e.url("api/kill"), strings.NewReader(`{"sessionId":"s1","jobId":"`+id+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "http://127.0.0.1:"+port)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, body := do(t, req)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, []string{"cancelled by the user"}, p.Cancels())
}

func TestWebU42_TheKillEndpointIsCSRFSafe(t *testing.T) {
	e := newEnv(t, envOpts{})
	p := e.prod(t)
	id, err := e.sys.Jobs().Start(bg, p.Spec(e.a))
	require.NoError(t, err)
	body := `{"sessionId":"s1","jobId":"` + id + `"}`
	send := func(method, ctype, b string) *http.Response {
		req, _ := http.NewRequest(method, e.url("api/kill"), strings.NewReader(b))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, _ := do(t, req)
		require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
		return resp
	}
	resp := send(http.MethodGet, "", "")
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	require.Equal(t, "POST", resp.Header.Get("Allow"))
	resp = send(http.MethodOptions, "", "")
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	for k := range resp.Header {
		require.False(t, strings.HasPrefix(k, "Access-Control-"), k)
	}
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
		require.Equal(t, http.StatusUnsupportedMediaType, send(http.MethodPost, ct, body).StatusCode, ct)
	}
	big := `{"sessionId":"s1","jobId":"` + id + `","pad":"` + strings.Repeat("x", 4097) + `"}`
	require.Equal(t, http.StatusRequestEntityTooLarge, send(http.MethodPost, "application/json", big[:4097]).StatusCode)
	for _, b := range []string{`{"sessionId":"s1","jobId":"` + id + `","x":1}`, `{"sessionId":"s1"}`, `{"sessionId":"s1","jobId":""}`, `{`, `[]`} {
		req, _ := http.NewRequest(http.MethodPost, e.url("api/kill"), strings.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		resp, rb := do(t, req)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, b)
		require.Equal(t, "web/bad-request", decode(t, rb)["code"], b)
	}
	require.Empty(t, p.Cancels(), "no refused kill called cancel")
	resp = send(http.MethodPost, "application/json; charset=utf-8", body)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, []string{"cancelled by the user"}, p.Cancels())
}

var wantHeaders = map[string]string{
	"Content-Security-Policy":      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"Referrer-Policy":              "no-referrer",
	"X-Content-Type-Options":       "nosniff",
	"X-Frame-Options":              "DENY",
	"Cache-Control":                "no-store",
	"Cross-Origin-Opener-Policy":   "same-origin",
	"Cross-Origin-Resource-Policy": "same-origin",
}

func TestWebU43_HeadersContentTypesAndSelfContainedAssets(t *testing.T) {
	e := newEnv(t, envOpts{})
	check := func(resp *http.Response, what string) {
		for k, v := range wantHeaders {
			require.Equal(t, []string{v}, resp.Header.Values(k), "%s: %s", what, k)
		}
		require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	files := map[string]string{}
	for rest, ct := range map[string]string{"": "text/html; charset=utf-8", "app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"} {
		resp, body := get(t, e.url(rest))
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, ct, resp.Header.Get("Content-Type"), rest)
		check(resp, "asset "+rest)
		files[rest] = body
	}
	resp, _ := get(t, e.url("nope"))
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	check(resp, "404 under a valid token")
	req, _ := http.NewRequest(http.MethodGet, e.url(""), nil)
	req.Host = "evil.example"
	resp, _ = do(t, req)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	check(resp, "403")
	s := open(t, e.url("events?session=s1"), nil)
	check(s.resp, "the stream")
	s.close()

	total := 0
	for _, b := range files {
		total += len(b)
	}
	require.LessOrEqual(t, total, 100<<10, "the assets stay within 100 KiB")
	html := files[""]
	require.NotRegexp(t, `<script(\s[^>]*)?>[^<]+</script>`, html, "no inline script body")
	require.NotRegexp(t, `(?i)\sstyle\s*=`, html)
	require.NotRegexp(t, `(?i)\son[a-z]+\s*=`, html)
	scheme := regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s"'()]*`)
	for name, b := range files {
		for _, m := range scheme.FindAllString(b, -1) {
			require.Equal(t, "http://www.w3.org/2000/svg", m, "%s holds an absolute URL", name)
		}
		for _, pos := range regexp.MustCompile(`(?i)(?:src|href|action)\s*=\s*["']?([^"'\s>]+)|url\(\s*["']?([^"')]+)|@import\s+["']([^"']+)|import\s*\(\s*["']([^"']+)`).FindAllStringSubmatch(b, -1) {
			for _, v := range pos[1:] {
				if v == "" {
					continue
				}
				if i := strings.Index(v, ":"); i > 0 && !strings.ContainsAny(v[:i], "/.?#") {
					require.True(t, strings.HasPrefix(strings.ToLower(v), "data:"), "%s: %q has a scheme", name, v)
				}
			}
		}
	}
	for _, banned := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
		require.NotContains(t, files["app.js"], banned)
	}
}

func TestWebU44_AGrantSeesExactlyItsSessions(t *testing.T) {
	e := newEnv(t, envOpts{})
	a2, _ := e.agent(t, "s2")
	p1 := e.prod(t)
	j1, err := e.sys.Jobs().Start(bg, p1.Spec(e.a))
	require.NoError(t, err)
	p2 := e.prod(t)
	j2, err := e.sys.Jobs().Start(bg, p2.Spec(a2))
	require.NoError(t, err)
	p3 := e.prod(t)
	j3, err := e.sys.Jobs().Start(bg, p3.Spec(nil))
	require.NoError(t, err)
	require.Equal(t, "bash-3", j3)

	path, revoke := e.h.Grant("s1")
	defer revoke()
	_, body := get(t, e.srv.URL+path+"api/sessions")
	require.Equal(t, `{"sessions":[{"id":"s1","label":"s1"}]}`, body)
	for _, q := range []string{"events?session=s2", "events?session="} {
		resp, body := get(t, e.srv.URL+path+q)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, q)
		require.Equal(t, "web/session-not-visible", decode(t, body)["code"])
	}
	resp, body := e.killAt(t, path, `{"sessionId":"s2","jobId":"`+j2+`"}`)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	m := decode(t, body)
	require.Equal(t, "job/not-found", m["code"])
	require.Equal(t, "job "+j2+" is not visible to this viewer", m["message"])
	require.Empty(t, p2.Cancels())

	s := open(t, e.srv.URL+path+"events?session=s1", nil)
	s.next("hello")
	r := rowsOf(t, s.next("rows"))
	require.Equal(t, []string{j1, j3}, ids(r))
	resp, body = e.killAt(t, path, `{"sessionId":"s1","jobId":"bash-3"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, `{"outcome":"requested"}`, body)

	_, body = get(t, e.url("api/sessions"))
	require.Equal(t, `{"sessions":[{"id":"s1","label":"s1"},{"id":"s2","label":"s2"},{"id":"","label":"Unowned jobs"}]}`, body)
	s2 := open(t, e.url("events?session=s2"), nil)
	s2.next("hello")
	require.Equal(t, []string{j2, j3}, ids(rowsOf(t, s2.next("rows"))))

	// revoke ends the grant's streams with bye revoked; its token then 404s; the
	// start grant is unaffected.
	revoke()
	evs := s.ended()
	require.NotEmpty(t, evs)
	require.Equal(t, "bye", evs[len(evs)-1].Event)
	require.JSONEq(t, `{"reason":"revoked"}`, evs[len(evs)-1].Data)
	resp, _ = get(t, e.srv.URL+path)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = get(t, e.url(""))
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestWebCloseEndsStreamsWithByeThen503(t *testing.T) {
	e := newEnv(t, envOpts{})
	p := e.prod(t)
	p.Record = job.NewRecord()
	id, err := e.sys.Jobs().Start(bg, p.Spec(e.a))
	require.NoError(t, err)
	s := open(t, e.url("events?session=s1&follow="+id), nil)
	s.next("hello")
	s.next("rows")
	s.next("opened")
	require.Equal(t, web.StreamCounts{Rosters: 1, Follows: 1}, e.h.Streams())
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	require.NoError(t, e.h.Close(ctx))
	evs := s.ended()
	require.Equal(t, "bye", evs[len(evs)-1].Event)
	require.JSONEq(t, `{"reason":"shutdown"}`, evs[len(evs)-1].Data)
	require.Equal(t, web.StreamCounts{}, e.h.Streams(), "every controller stream was closed")
	resp, body := get(t, e.url("api/sessions"))
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "web/shutting-down", decode(t, body)["code"])
}

func TestWebNewRefusesNilSessions(t *testing.T) {
	e := newEnv(t, envOpts{})
	_, err := web.New(e.sys, e.ctl, web.Config{})
	require.EqualError(t, err, "web: Config.Sessions is required (the sessions a viewer may watch)")
}

func TestWebEventsBadRequests(t *testing.T) {
	e := newEnv(t, envOpts{})
	for q, code := range map[string]string{"events": "web/bad-request", "events?session=s1&from=-1": "web/bad-request",
		"events?session=s1&from=x": "web/bad-request", "events?session=s9": "web/session-not-visible"} {
		resp, body := get(t, e.url(q))
		require.Equal(t, code, decode(t, body)["code"], q)
		require.NotEqual(t, http.StatusOK, resp.StatusCode)
	}
	require.Equal(t, web.StreamCounts{}, e.h.Streams())
}
