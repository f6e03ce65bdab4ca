package fastpath

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Buffers of the fast path (doc.go).
const (
	// ReadBufSize is each connection's read buffer: the largest request
	// line plus header block the fast path takes; larger ones go to
	// net/http.
	ReadBufSize = 8 << 10
	// MaxBody is the largest body of a BodyRead or BodyLent plan: one that
	// leaves with its head in one write.
	MaxBody = 64 << 10
	// SendfileMin is the smallest body of a BodyFile plan. Measured on the
	// 15 KB corpus (bench/BENCHMARKS.md, 2026-11-22 session 2): sendfile of
	// a small body saved about 1 µs of CPU per GET at 20 connections but
	// cost throughput and latency at 1–5 connections (head and body are
	// two system calls), so it starts where the body would not fit the
	// write buffer.
	SendfileMin = MaxBody + 1
	// writeBufSize is the pooled write buffer: one small body, its head,
	// and the heads of a few pipelined answers.
	writeBufSize = MaxBody + 16<<10
	// flushAt: a pending batch longer than this is written before the
	// next answer is added.
	flushAt = writeBufSize - 4<<10
	// closeLinger bounds how long a closing connection drains what the
	// client still sends after its last answer (net/http waits 500 ms
	// too): closing with unread bytes would reset the connection and
	// could destroy the answer in flight.
	closeLinger = 500 * time.Millisecond
)

// ErrBadConfig is returned (wrapped) by Config.Validate and New.
var ErrBadConfig = errors.New("fastpath: bad config")

// Config configures a Server.
type Config struct {
	// Planner decides the answers. Required.
	Planner Planner
	// Fallback is the net/http server the connections are handed off to;
	// the first Serve starts its Serve on the hand-off listener. Required.
	Fallback *http.Server
	// Logger receives accept errors. Default: discard.
	Logger *slog.Logger
	// ReadHeaderTimeout bounds the time from the first byte of a request
	// (for the first request of a connection: from accept) to the end of
	// its header block. Default 0: none.
	ReadHeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next request. Default 0: none.
	IdleTimeout time.Duration
	// WriteTimeout is how long a write may make no progress: the write
	// deadline is pushed this far out as a body progresses. Default 0:
	// none.
	WriteTimeout time.Duration
	// MaxHeaderBytes bounds the request line plus header block taken (at
	// most ReadBufSize); larger ones are handed off. Default 0: ReadBufSize.
	MaxHeaderBytes int
	// DisableSendfile keeps BodyFile plans off (Plan.CanSendFile false).
	// Default false.
	DisableSendfile bool
	// TLS, if set, makes Serve serve HTTPS: it runs each connection's
	// handshake with this configuration (tls.go). Give it the NextProtos
	// the Fallback serves ("h2", "http/1.1"); a connection that negotiates
	// another protocol than HTTP/1.1 goes to the Fallback whole, which
	// then needs a copy of this configuration in its TLSConfig to serve
	// HTTP/2 (a copy: net/http writes to its TLSConfig as it starts).
	// Default nil: plain HTTP.
	TLS *tls.Config
}

// DefaultConfig returns a Config with its optional fields at their
// defaults; Planner and Fallback must still be set.
func DefaultConfig() Config { return Config{} }

// Validate reports a Config New would refuse, wrapping ErrBadConfig.
func (c Config) Validate() error {
	switch {
	case c.Planner == nil:
		return fmt.Errorf("%w: Planner is required", ErrBadConfig)
	case c.Fallback == nil:
		return fmt.Errorf("%w: Fallback is required", ErrBadConfig)
	case c.ReadHeaderTimeout < 0 || c.IdleTimeout < 0 || c.MaxHeaderBytes < 0:
		return fmt.Errorf("%w: negative timeout or size", ErrBadConfig)
	}
	return nil
}

// Connection states, for Shutdown.
const (
	connActive int32 = iota // reading or answering a request
	connIdle                // waiting for a request or the rest of its head
)

// Server serves connections with the fast path and hands them off to its
// Fallback. Its methods are safe for concurrent use.
type Server struct {
	cfg       Config
	planner   Planner
	log       *slog.Logger
	limit     int // the largest request head taken
	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	shutdown  atomic.Bool

	handoff   *handoffListener
	startOnce sync.Once

	served, handedOff, sentFile, sentLent atomic.Int64

	date  dateCache
	rbufs sync.Pool // *[ReadBufSize]byte
	wbufs sync.Pool // *[]byte of cap writeBufSize
	conn  sync.Pool // *conn
}

// New validates cfg and returns a Server; it starts nothing (Serve does).
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, planner: cfg.Planner, log: cfg.Logger, limit: ReadBufSize}
	if cfg.MaxHeaderBytes > 0 {
		s.limit = min(ReadBufSize, cfg.MaxHeaderBytes)
	}
	s.listeners = map[net.Listener]struct{}{}
	s.conns = map[*conn]struct{}{}
	s.handoff = newHandoffListener(handoffAddr{})
	s.rbufs.New = func() any { return new([ReadBufSize]byte) }
	s.wbufs.New = func() any { b := make([]byte, 0, writeBufSize); return &b }
	s.conn.New = func() any { return new(conn) }
	return s, nil
}

// Counts are what a Server did, since New (tests and metrics).
type Counts struct {
	Served    int64 // answers planned and sent (or failed)
	HandedOff int64 // connections handed off to net/http
	SentFile  int64 // answers whose body left with sendfile (BodyFile)
	SentLent  int64 // answers whose body was lent and left with its head (BodyLent)
}

// Counts returns the Server's counts.
func (s *Server) Counts() Counts {
	return Counts{Served: s.served.Load(), HandedOff: s.handedOff.Load(),
		SentFile: s.sentFile.Load(), SentLent: s.sentLent.Load()}
}

// Serve accepts connections on ln and serves them until Shutdown; it
// blocks and returns http.ErrServerClosed after Shutdown, or the accept
// error. It closes ln when it returns.
func (s *Server) Serve(ln net.Listener) error {
	defer ln.Close()
	s.mu.Lock()
	if s.shutdown.Load() {
		s.mu.Unlock()
		return http.ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()
	s.startOnce.Do(func() { go func() { _ = s.cfg.Fallback.Serve(s.handoff) }() })

	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.shutdown.Load() {
				return http.ErrServerClosed
			}
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() {
				// Out of descriptors and the like: back off as net/http does.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", slog.Duration("delay", delay), slog.Any("err", err))
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		fc := s.newConn(c)
		if fc == nil {
			_ = c.Close()
			continue
		}
		go fc.serve()
	}
}

// newConn registers a connection, or returns nil during Shutdown.
func (s *Server) newConn(c net.Conn) *conn {
	fc := s.conn.Get().(*conn)
	fc.s, fc.c = s, c
	fc.peer.c = c
	fc.sink = connSink{c: c}
	fc.dl = DeadlineWriter{W: &fc.sink, Ctl: c, Timeout: s.cfg.WriteTimeout}
	if s.cfg.TLS == nil {
		// Over TLS the bytes go through crypto/tls (startTLS): neither
		// raw socket I/O nor sendfile applies.
		fc.initRawIO(c)
		if !s.cfg.DisableSendfile {
			fc.initFileSender(c)
		}
	}
	fc.rbuf = s.rbufs.Get().(*[ReadBufSize]byte)
	fc.state.Store(connActive)
	s.mu.Lock()
	if s.shutdown.Load() {
		s.mu.Unlock()
		fc.release()
		return nil
	}
	s.conns[fc] = struct{}{}
	s.mu.Unlock()
	return fc
}

// Shutdown stops the fast path: it closes the listeners and the idle
// connections, lets connections answering a request finish it (they
// close afterwards) and waits for them, or for ctx, after which it closes
// the rest and returns ctx's error. Until it returns, connections may
// still be handed off: shut the Fallback down after it, then Close.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shutdown.Store(true)
	for ln := range s.listeners {
		_ = ln.Close()
	}
	s.mu.Unlock()
	wait := time.Millisecond
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		if s.closeIdle() == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			s.mu.Lock()
			for fc := range s.conns {
				_ = fc.c.Close()
			}
			s.mu.Unlock()
			return ctx.Err()
		case <-timer.C:
			wait = min(2*wait, 100*time.Millisecond)
			timer.Reset(wait)
		}
	}
}

// Close closes the hand-off listener, which ends the Fallback's Serve on
// it and closes connections still being handed off. Safe to call more
// than once.
func (s *Server) Close() error { return s.handoff.Close() }

// closeIdle closes the idle connections and returns how many connections
// remain registered.
func (s *Server) closeIdle() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for fc := range s.conns {
		if fc.state.Load() == connIdle {
			_ = fc.c.Close()
		}
	}
	return len(s.conns)
}

// dateCache holds the Date header value, formatted at most once a second.
type dateCache struct {
	p atomic.Pointer[dateValue]
}

type dateValue struct {
	sec int64
	b   []byte
}

// get returns the HTTP date of now; the slice must not be modified.
func (d *dateCache) get(now time.Time) []byte {
	sec := now.Unix()
	if v := d.p.Load(); v != nil && v.sec == sec {
		return v.b
	}
	v := &dateValue{sec: sec, b: now.UTC().AppendFormat(make([]byte, 0, len(http.TimeFormat)), http.TimeFormat)}
	d.p.Store(v)
	return v.b
}
