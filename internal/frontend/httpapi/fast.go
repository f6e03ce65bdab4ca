package httpapi

import (
	"net/netip"

	"bytes"
	"context"
	"errors"
	"github.com/cairn-fs/cairn/internal/access/rules"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Buffers of the fast path (see doc.go, "Fast path").
const (
	// fastReadBufSize is each connection's read buffer: the largest request
	// line plus header block the fast path takes; larger ones go to net/http.
	fastReadBufSize = 8 << 10
	// fastMaxBody is the largest body read into the write buffer and sent
	// with its header in one write; larger ones go out with WriteRangeTo.
	fastMaxBody = 64 << 10
	// fastWriteBufSize is the pooled write buffer: one small body, its
	// header, and the headers of a few pipelined answers.
	fastWriteBufSize = fastMaxBody + 16<<10
	// fastFlushAt: a pending batch longer than this is written before the
	// next answer is added.
	fastFlushAt = fastWriteBufSize - 4<<10
	// closeLinger bounds how long a closing connection drains what the
	// client still sends after its last answer (net/http waits 500 ms too):
	// closing with unread bytes would reset the connection and could
	// destroy the answer in flight.
	closeLinger = 500 * time.Millisecond
)

// Connection states, for Shutdown.
const (
	connActive int32 = iota // reading or answering a request
	connIdle                // waiting for a request or the rest of its head
)

// fastState is the Server's fast path: its listeners and connections, the
// listener that hands connections to net/http, and pools.
type fastState struct {
	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*fastConn]struct{}
	shutdown  atomic.Bool

	handoff   *handoffListener
	startOnce sync.Once

	// served and handedOff count fast-path answers and hand-offs, sentFile
	// the answers whose body went out with sendfile (tests).
	served, handedOff, sentFile atomic.Int64
	// sentMapped counts the answers whose body was lent from a volume's
	// memory map and sent with the head in one sendmsg (tests).
	sentMapped atomic.Int64

	date  dateCache
	rbufs sync.Pool // *[fastReadBufSize]byte
	wbufs sync.Pool // *[]byte of cap fastWriteBufSize
	conn  sync.Pool // *fastConn
}

func (f *fastState) init(addr net.Addr) {
	f.listeners = map[net.Listener]struct{}{}
	f.conns = map[*fastConn]struct{}{}
	f.handoff = newHandoffListener(addr)
	f.rbufs.New = func() any { return new([fastReadBufSize]byte) }
	f.wbufs.New = func() any { b := make([]byte, 0, fastWriteBufSize); return &b }
	f.conn.New = func() any { return new(fastConn) }
}

// Serve accepts connections on ln and serves them until Shutdown; it blocks
// and returns http.ErrServerClosed after Shutdown, or the accept error. It
// closes ln when it returns. GETs and HEADs of files are answered by the
// fast path; a connection whose request it does not take is handed to the
// net/http server for the rest of its life (doc.go). With
// Config.DisableFastPath, net/http serves every connection.
func (s *Server) Serve(ln net.Listener) error {
	if s.cfg.TLS != nil {
		s.hs.TLSConfig = s.cfg.TLS
		return s.hs.ServeTLS(ln, "", "")
	}
	if s.cfg.DisableFastPath {
		return s.hs.Serve(ln)
	}
	defer ln.Close()
	f := &s.fast
	f.mu.Lock()
	if f.shutdown.Load() {
		f.mu.Unlock()
		return http.ErrServerClosed
	}
	f.listeners[ln] = struct{}{}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.listeners, ln)
		f.mu.Unlock()
	}()
	f.startOnce.Do(func() { go func() { _ = s.hs.Serve(f.handoff) }() })

	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if f.shutdown.Load() {
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
		fc := s.newFastConn(c)
		if fc == nil {
			_ = c.Close()
			continue
		}
		go fc.serve()
	}
}

// newFastConn registers a connection, or returns nil during Shutdown.
func (s *Server) newFastConn(c net.Conn) *fastConn {
	f := &s.fast
	fc := f.conn.Get().(*fastConn)
	fc.s, fc.c = s, c
	fc.sink = connSink{c: c}
	fc.dl = deadlineWriter{w: &fc.sink, ctl: c, timeout: s.cfg.WriteTimeout}
	fc.initRawIO(c)
	if !s.cfg.DisableSendfile {
		fc.initFileSender(c)
	}
	fc.rbuf = f.rbufs.Get().(*[fastReadBufSize]byte)
	fc.limit = min(fastReadBufSize, s.cfg.MaxHeaderBytes)
	fc.state.Store(connActive)
	f.mu.Lock()
	if f.shutdown.Load() {
		f.mu.Unlock()
		fc.release()
		return nil
	}
	f.conns[fc] = struct{}{}
	f.mu.Unlock()
	return fc
}

// shutdownFast stops the fast path: it closes the listeners and the idle
// connections, lets connections answering a request finish it (they close
// afterwards) and waits for them, or for ctx, after which it closes the
// rest and returns ctx's error.
func (s *Server) shutdownFast(ctx context.Context) error {
	f := &s.fast
	f.mu.Lock()
	f.shutdown.Store(true)
	for ln := range f.listeners {
		_ = ln.Close()
	}
	f.mu.Unlock()
	wait := time.Millisecond
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		if f.closeIdle() == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			f.mu.Lock()
			for fc := range f.conns {
				_ = fc.c.Close()
			}
			f.mu.Unlock()
			return ctx.Err()
		case <-timer.C:
			wait = min(2*wait, 100*time.Millisecond)
			timer.Reset(wait)
		}
	}
}

// closeIdle closes the idle connections and returns how many connections
// remain registered.
func (f *fastState) closeIdle() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for fc := range f.conns {
		if fc.state.Load() == connIdle {
			_ = fc.c.Close()
		}
	}
	return len(f.conns)
}

// fastConn is one connection served by the fast path. Only its goroutine
// touches it, except state and c.Close (Shutdown).
type fastConn struct {
	s     *Server
	c     net.Conn
	state atomic.Int32
	rbuf  *[fastReadBufSize]byte
	r, w  int     // unconsumed bytes are rbuf[r:w]
	limit int     // the largest request head taken
	wbuf  *[]byte // pending answers; nil when none is held
	sink  connSink
	dl    deadlineWriter // sends large bodies; keeps the write deadline
	fs    fileSender     // sends large bodies from volume files (sendfile)
	rio   rawIO          // the socket's reads and writes (fastio_linux.go)
	rdl   time.Time      // the read deadline set on c (zero: none)
	// broken: a write failed or a body was cut short; close.
	broken  bool
	remote  string     // RemoteAddr, for the access log; "" until needed
	peer    netip.Addr // the peer's address, for the rules; invalid until needed
	pathBuf []byte     // scratch for the decoded path
	planBuf [320]byte
}

// release returns the connection's buffers and the connection to the pools.
func (fc *fastConn) release() {
	f := &fc.s.fast
	if fc.wbuf != nil {
		*fc.wbuf = (*fc.wbuf)[:0]
		f.wbufs.Put(fc.wbuf)
	}
	f.rbufs.Put(fc.rbuf)
	pathBuf := fc.pathBuf[:0]
	if cap(pathBuf) > 4<<10 {
		pathBuf = nil
	}
	*fc = fastConn{pathBuf: pathBuf, fs: fc.fs.recycle(), rio: fc.rio.recycle()}
	f.conn.Put(fc)
}

// serve runs the connection's request loop: parse a request in place,
// answer it or hand the connection off, repeat.
func (fc *fastConn) serve() {
	s := fc.s
	f := &s.fast
	handedOff := false
	defer func() {
		if !handedOff {
			_ = fc.c.Close()
		}
		f.mu.Lock()
		delete(f.conns, fc)
		f.mu.Unlock()
		fc.release()
	}()

	first := true     // no request answered yet
	hdrTimer := false // the read deadline is the header deadline
	for {
		if fc.r == fc.w {
			// Nothing buffered: send the pending answers, then wait for
			// the next request, IdleTimeout long (ReadHeaderTimeout for
			// the first, as net/http does).
			if !fc.flush() {
				return
			}
			fc.releaseWriteBuf()
			fc.r, fc.w = 0, 0
			fc.state.Store(connIdle)
			if f.shutdown.Load() {
				return
			}
			d := s.cfg.IdleTimeout
			if first {
				d = s.cfg.ReadHeaderTimeout
			}
			n := fc.readIdle(d)
			if n <= 0 {
				return
			}
			fc.state.Store(connActive)
			fc.w = n
			hdrTimer = first
		}
		req, verdict := parseFastRequest(fc.rbuf[fc.r:fc.w], fc.limit)
		switch verdict {
		case parseIncomplete:
			// Answers to earlier pipelined requests go out before waiting.
			if !fc.flush() {
				return
			}
			if !hdrTimer {
				// From the first byte to the end of the header block.
				fc.setReadDeadline(s.cfg.ReadHeaderTimeout)
				hdrTimer = true
			}
			if fc.r > 0 {
				fc.w = copy(fc.rbuf[:], fc.rbuf[fc.r:fc.w])
				fc.r = 0
			}
			// No answer is in progress while the rest of a head is
			// awaited: Shutdown may close the connection (as net/http
			// does) rather than wait for ReadHeaderTimeout.
			fc.state.Store(connIdle)
			if f.shutdown.Load() {
				return
			}
			n, _ := fc.connRead(fc.rbuf[fc.w:])
			if n <= 0 {
				return
			}
			fc.state.Store(connActive)
			fc.w += n
			continue
		case parseHandoff:
			handedOff = fc.handoff()
			return
		}
		hdrTimer, first = false, false
		switch s.serveFast(fc, &req) {
		case fastHandoff:
			handedOff = fc.handoff()
			return
		case fastClose:
			fc.flush()
			return
		}
		fc.r += req.end
		if req.close {
			if fc.flush() {
				fc.lingerClose()
			}
			return
		}
		if f.shutdown.Load() {
			fc.flush()
			return
		}
	}
}

// setReadDeadline sets the read deadline d from now; d <= 0 means none.
func (fc *fastConn) setReadDeadline(d time.Duration) {
	var t time.Time
	if d > 0 {
		t = time.Now().Add(d)
	}
	fc.setReadDeadlineAt(t)
}

// setReadDeadlineAt sets the read deadline t (zero: none) and records it.
func (fc *fastConn) setReadDeadlineAt(t time.Time) {
	fc.rdl = t
	_ = fc.c.SetReadDeadline(t)
}

// readIdle waits up to d (d <= 0: for ever) for the next request and reads
// what has arrived into the empty read buffer; it returns 0 when the
// connection is done (closed, failed, timed out).
//
// The deadline is set lazily: a deadline already set for an earlier wait
// is kept when it lies at most d/8 before now+d (resetting a deadline
// modifies a runtime timer, on every request otherwise). If that older
// deadline passes before now+d, the exact one is set and the wait goes on,
// so the connection still gets its full d.
//
// (It always tries read(2) first, although after an answer the next
// request has rarely arrived yet and the read fails with EAGAIN: waiting
// for readiness first would lose an edge that came before the wait, as
// the runtime's poller clears the readiness when a read or wait starts.)
func (fc *fastConn) readIdle(d time.Duration) int {
	var want time.Time
	if d > 0 {
		want = time.Now().Add(d)
		if fc.rdl.IsZero() || fc.rdl.After(want) || want.Sub(fc.rdl) > d/8 {
			fc.setReadDeadlineAt(want)
		}
	} else if !fc.rdl.IsZero() {
		fc.setReadDeadlineAt(time.Time{})
	}
	for {
		n, err := fc.connRead(fc.rbuf[:])
		if n > 0 {
			return n
		}
		if d > 0 && errors.Is(err, os.ErrDeadlineExceeded) && !fc.rdl.Equal(want) && time.Now().Before(want) {
			fc.setReadDeadlineAt(want) // the older deadline came first
			continue
		}
		return 0
	}
}

// writeBuf returns the pending-answers buffer, taking one from the pool if
// none is held and writing out the pending answers if they fill most of it.
func (fc *fastConn) writeBuf() []byte {
	if fc.wbuf == nil {
		fc.wbuf = fc.s.fast.wbufs.Get().(*[]byte)
	}
	if len(*fc.wbuf) > fastFlushAt {
		fc.flush()
	}
	return *fc.wbuf
}

// flush writes the pending answers in one write, extending the write
// deadline; it reports false if the connection is broken.
func (fc *fastConn) flush() bool {
	if fc.broken {
		return false
	}
	if fc.wbuf == nil || len(*fc.wbuf) == 0 {
		return true
	}
	fc.dl.extend(time.Now())
	_, err := fc.connWrite(*fc.wbuf)
	*fc.wbuf = (*fc.wbuf)[:0]
	if err != nil {
		fc.broken = true
		return false
	}
	return true
}

// flushWith writes the pending answers followed by body in one writev-like
// send, extending the write deadline, and reports the bytes sent (of both);
// an error means the connection is broken. The pending answers are gone
// either way.
func (fc *fastConn) flushWith(body []byte) (int, error) {
	if fc.broken {
		*fc.wbuf = (*fc.wbuf)[:0]
		return 0, net.ErrClosed
	}
	fc.dl.extend(time.Now())
	n, err := fc.connWritev(*fc.wbuf, body)
	*fc.wbuf = (*fc.wbuf)[:0]
	if err != nil {
		fc.broken = true
	}
	return n, err
}

// releaseWriteBuf returns an empty write buffer to the pool, so that an
// idle connection holds only its read buffer.
func (fc *fastConn) releaseWriteBuf() {
	if fc.wbuf == nil {
		return
	}
	b := fc.wbuf
	fc.wbuf = nil
	if cap(*b) != fastWriteBufSize {
		return // grown by an unusually long header: let it go
	}
	*b = (*b)[:0]
	fc.s.fast.wbufs.Put(b)
}

// handoff sends the pending answers, then gives the connection, with the
// unconsumed bytes (the current request at least) to be read first, to
// the net/http server. It reports false if the connection broke instead.
func (fc *fastConn) handoff() bool {
	if !fc.flush() {
		return false
	}
	fc.s.fast.handedOff.Add(1)
	hc := &handoffConn{Conn: fc.c, pending: bytes.Clone(fc.rbuf[fc.r:fc.w])}
	// net/http sets its own read deadlines, but no write deadline (it has
	// no WriteTimeout): none of ours may be left behind.
	_ = fc.c.SetDeadline(time.Time{})
	return fc.s.fast.handoff.deliver(hc)
}

// lingerClose half-closes the connection after its last answer and reads
// what the client still sends until it closes too, at most closeLinger,
// so that closing does not reset the connection under the answer.
func (fc *fastConn) lingerClose() {
	type closeWriter interface{ CloseWrite() error }
	cw, ok := fc.c.(closeWriter)
	if !ok {
		return
	}
	_ = cw.CloseWrite()
	_ = fc.c.SetReadDeadline(time.Now().Add(closeLinger))
	for range 64 {
		if _, err := fc.c.Read(fc.rbuf[:]); err != nil {
			return
		}
	}
}

// connSink writes response bodies straight to a connection, keeping
// io.ReaderFrom so that WriteRangeTo can use sendfile on a *net.TCPConn.
type connSink struct{ c net.Conn }

// Write implements io.Writer.
func (k *connSink) Write(p []byte) (int, error) { return k.c.Write(p) }

// ReadFrom implements io.ReaderFrom.
func (k *connSink) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := k.c.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{k.c}, r)
}

// handoffConn is a connection handed to net/http: its reads return the
// bytes the fast path had buffered but not consumed, then the socket's.
type handoffConn struct {
	net.Conn
	pending []byte
}

// Read implements net.Conn.
func (h *handoffConn) Read(p []byte) (int, error) {
	if len(h.pending) > 0 {
		n := copy(p, h.pending)
		h.pending = h.pending[n:]
		return n, nil
	}
	return h.Conn.Read(p)
}

// ReadFrom keeps sendfile for net/http's responses.
func (h *handoffConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := h.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{h.Conn}, r)
}

// CloseWrite lets net/http half-close before closing, as on a TCP conn.
func (h *handoffConn) CloseWrite() error {
	if cw, ok := h.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// handoffListener is the net.Listener the net/http server accepts handed-off
// connections from.
type handoffListener struct {
	addr      net.Addr
	ch        chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func newHandoffListener(addr net.Addr) *handoffListener {
	return &handoffListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

// deliver hands c to the accepting net/http server; if the listener is
// closed, it closes c and reports false.
func (l *handoffListener) deliver(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		_ = c.Close()
		return false
	}
}

// Accept implements net.Listener.
func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener; safe to call more than once.
func (l *handoffListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

// Addr implements net.Listener.
func (l *handoffListener) Addr() net.Addr { return l.addr }

// handoffAddr is the Addr of the hand-off listener.
type handoffAddr struct{}

func (handoffAddr) Network() string { return "handoff" }
func (handoffAddr) String() string  { return "cairn-fast-path-handoff" }

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

// clientIP returns the client address of a request on fc: the peer, or
// from X-Forwarded-For when the peer is a trusted proxy.
func (fc *fastConn) clientIP(req *fastReq) netip.Addr {
	if !fc.peer.IsValid() {
		if fc.remote == "" {
			fc.remote = fc.c.RemoteAddr().String()
		}
		fc.peer = rules.ClientIP(fc.remote, nil, nil)
	}
	trusted := fc.s.cfg.TrustedProxies
	if len(trusted) == 0 || req.hdr[fhXForwardedFor] == nil {
		return fc.peer
	}
	var xff [1]string
	xff[0] = view(req.hdr[fhXForwardedFor])
	return rules.ClientIP(fc.remote, xff[:], trusted)
}
