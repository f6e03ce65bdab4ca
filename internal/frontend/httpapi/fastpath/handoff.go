package fastpath

import (
	"bytes"
	"io"
	"net"
	"sync"
	"time"
)

// handoff sends the pending answers, then gives the connection, with the
// unconsumed bytes (the current request at least) to be read first, to
// the net/http server. It reports false if the connection broke instead.
func (fc *conn) handoff() bool {
	if !fc.flush() {
		return false
	}
	fc.s.handedOff.Add(1)
	hc := &handoffConn{Conn: fc.c, pending: bytes.Clone(fc.rbuf[fc.r:fc.w])}
	// net/http sets its own read deadlines, but no write deadline (it has
	// no WriteTimeout): none of ours may be left behind.
	_ = fc.c.SetDeadline(time.Time{})
	return fc.s.handoff.deliver(hc)
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
