// Command troupe-mcp serves troupe's job tools to an MCP client (INTEROP.md section 2):
// over stdio by default (one session, ended by EOF), or over streamable HTTP on a
// loopback address with --http, behind a bearer token.
//
//	troupe-mcp [--shell] [--session ID] [--verbose]
//	troupe-mcp --http 127.0.0.1:PORT --token-file F [--shell] [--idle-timeout D] [--verbose]
//
// --shell enables job_start (arbitrary commands as this user). With --http the
// token is TROUPE_MCP_TOKEN if set (at least 32 bytes), else random per start; it
// is written, mode 0600, to --token-file, and the first stderr line is
// "troupe-mcp: listening on http://127.0.0.1:<port>/mcp". SIGTERM and SIGINT close
// the server, then shut the System down (every job's processes are stopped), then
// exit.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/troupe-rt/troupe"
	"github.com/troupe-rt/troupe/interop/mcpserver"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// shutdownTimeout bounds the close of the server and the System's shutdown.
const shutdownTimeout = 30 * time.Second

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("troupe-mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	httpAddr := fs.String("http", "", "serve streamable HTTP on this loopback address (host:port) instead of stdio")
	tokenFile := fs.String("token-file", "", "with --http: write the bearer token to this file (mode 0600)")
	shell := fs.Bool("shell", false, "enable job_start: run shell commands as background jobs")
	idle := fs.Duration("idle-timeout", 0, "with --http: end a session idle this long (default 10m)")
	session := fs.String("session", "", "stdio only: the troupe session id (default mcp-<16 hex>)")
	verbose := fs.Bool("verbose", false, "log each session's start (with its protocol version) on stderr")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg := mcpserver.Config{IdleTimeout: *idle, Logger: logger}
	if *shell {
		cfg.Shell = &mcpserver.Shell{}
	}
	if *httpAddr != "" {
		if *session != "" {
			fmt.Fprintln(stderr, "troupe-mcp: --session is for stdio only")
			return 2
		}
		if *tokenFile == "" {
			fmt.Fprintln(stderr, "troupe-mcp: --http needs --token-file")
			return 2
		}
		cfg.Token = os.Getenv("TROUPE_MCP_TOKEN")
		if cfg.Token == "" {
			cfg.Token = mcpserver.NewToken()
		}
	} else {
		cfg.SessionID = *session
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	sys, err := troupe.New(troupe.Config{Logger: logger})
	if err != nil {
		fmt.Fprintln(stderr, "troupe-mcp:", err)
		return 1
	}
	code := serve(ctx, sys, cfg, *httpAddr, *tokenFile, stdin, stdout, stderr)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := sys.Shutdown(sctx); err != nil {
		fmt.Fprintln(stderr, "troupe-mcp: shutdown:", err)
		return 1
	}
	return code
}

func serve(ctx context.Context, sys *troupe.System, cfg mcpserver.Config, addr, tokenFile string,
	stdin io.Reader, stdout, stderr io.Writer) int {
	if _, err := sys.Jobs().MountAgents(ctx, sys.Scope()); err != nil {
		fmt.Fprintln(stderr, "troupe-mcp:", err)
		return 1
	}
	srv, err := mcpserver.New(sys, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "troupe-mcp:", err)
		return 1
	}
	closeServer := func() {
		cctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if err := srv.Close(cctx); err != nil {
			fmt.Fprintln(stderr, "troupe-mcp: close:", err)
		}
	}
	if addr == "" {
		served := make(chan error, 1)
		go func() { served <- srv.ServeStdio(ctx, stdin, stdout) }()
		select {
		case err = <-served:
		case <-ctx.Done():
			// A blocked read of stdin may not end with the session: the System's
			// shutdown, after this, stops the session's jobs in any case.
		}
		closeServer()
		if err != nil {
			fmt.Fprintln(stderr, "troupe-mcp:", err)
			return 1
		}
		return 0
	}

	ln, err := mcpserver.Listen(addr)
	if err != nil {
		fmt.Fprintln(stderr, "troupe-mcp:", err)
		return 1
	}
	if err := os.WriteFile(tokenFile, []byte(cfg.Token+"\n"), 0o600); err != nil {
		_ = ln.Close()
		fmt.Fprintln(stderr, "troupe-mcp: token file:", err)
		return 1
	}
	_ = os.Chmod(tokenFile, 0o600) // an existing file keeps its mode under WriteFile
	handler, err := srv.Handler()
	if err != nil {
		_ = ln.Close()
		fmt.Fprintln(stderr, "troupe-mcp:", err)
		return 1
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", handler)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "troupe-mcp: listening on http://%s/mcp\n", hostPort(ln.Addr()))
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err = <-served:
	case <-ctx.Done():
	}
	closeServer() // 503 for new sessions, then every session ends and is torn down
	hctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	_ = hs.Shutdown(hctx)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(stderr, "troupe-mcp:", err)
		return 1
	}
	return 0
}

func hostPort(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok && t.IP.To4() == nil {
		return fmt.Sprintf("[%s]:%d", t.IP, t.Port)
	}
	return a.String()
}
