package web

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// ListenConfig configures Listen.
type ListenConfig struct {
	// Addr is the address to listen on; default "127.0.0.1:0" (an ephemeral port).
	Addr string
	// AllowRemote permits a non-loopback Addr. Even then the Host check refuses
	// every Host but loopback and Config.AllowedHosts; TLS is the embedder's.
	AllowRemote bool
}

// Server is a Handler listening on its own socket (Listen).
type Server struct {
	h    *Handler
	ln   net.Listener
	srv  *http.Server
	done chan error
}

// Listen serves h on cfg.Addr (loopback only unless AllowRemote).
func Listen(h *Handler, cfg ListenConfig) (*Server, error) {
	addr := cfg.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("web: bad listen address %q: %w", addr, err)
	}
	if !cfg.AllowRemote && host != "127.0.0.1" && host != "::1" && host != "localhost" {
		return nil, fmt.Errorf("web: refusing to listen on non-loopback address %q (set ListenConfig.AllowRemote to expose the task list)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	s := &Server{h: h, ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, done: make(chan error, 1)}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// URL is the launch URL, http://<addr>/t/<token>/.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() + s.h.LaunchPath() }

// Close ends the handler's streams (bye), then stops the server. Idempotent.
func (s *Server) Close(ctx context.Context) error {
	err := s.h.Close(ctx)
	if e := s.srv.Shutdown(ctx); e != nil && err == nil {
		err = e
	}
	if e := <-s.done; e != nil && !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	s.done <- http.ErrServerClosed
	return err
}
