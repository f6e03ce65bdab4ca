package fastpath

import (
	"errors"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"time"
)

// conn is one connection served by the fast path. Only its goroutine
// touches it, except state and c.Close (Shutdown).
type conn struct {
	s     *Server
	c     net.Conn
	state atomic.Int32
	rbuf  *[ReadBufSize]byte
	r, w  int     // unconsumed bytes are rbuf[r:w]
	wbuf  *[]byte // pending answers; nil when none is held
	sink  connSink
	dl    DeadlineWriter // sends streamed bodies; keeps the write deadline
	fs    fileSender     // sends file bodies (sendfile)
	rio   rawIO          // the socket's reads and writes (io_linux.go)
	rdl   time.Time      // the read deadline set on c (zero: none)
	// broken: a write failed or a body was cut short; close.
	broken  bool
	peer    Peer
	pathBuf []byte // scratch for the decoded path
	req     Request
	plan    Plan
	scratch [ScratchSize]byte // the planner's (Plan.Scratch)
}

// outcome is what answer did with a request.
type outcome uint8

const (
	answered   outcome = iota // answered (perhaps still pending in the write buffer)
	handOff                   // nothing written: net/http must answer it
	closeAfter                // answered, but the connection must close (a body was cut)
)

// release returns the connection's buffers and the connection to the pools.
func (fc *conn) release() {
	s := fc.s
	if fc.wbuf != nil {
		*fc.wbuf = (*fc.wbuf)[:0]
		s.wbufs.Put(fc.wbuf)
	}
	s.rbufs.Put(fc.rbuf)
	pathBuf := fc.pathBuf[:0]
	if cap(pathBuf) > 4<<10 {
		pathBuf = nil
	}
	*fc = conn{pathBuf: pathBuf, fs: fc.fs.recycle(), rio: fc.rio.recycle()}
	s.conn.Put(fc)
}

// serve runs the connection's request loop: wait for a request, parse it
// in place, answer it or hand the connection off, repeat.
func (fc *conn) serve() {
	s := fc.s
	handedOff := false
	defer func() {
		if !handedOff {
			_ = fc.c.Close()
		}
		s.mu.Lock()
		delete(s.conns, fc)
		s.mu.Unlock()
		fc.release()
	}()

	if s.cfg.TLS != nil {
		switch fc.startTLS() {
		case tlsFailed:
			return
		case tlsDirect:
			handedOff = fc.handoffDirect()
			return
		}
	}
	first := true     // no request answered yet
	hdrTimer := false // the read deadline is the header deadline
	for {
		if fc.r == fc.w {
			if !fc.next(first) {
				return
			}
			hdrTimer = first
		}
		var verdict Verdict
		fc.req, verdict = Parse(fc.rbuf[fc.r:fc.w], s.limit)
		switch verdict {
		case ParseIncomplete:
			if !fc.readMore(&hdrTimer) {
				return
			}
			continue
		case ParseHandoff:
			handedOff = fc.handoff()
			return
		}
		hdrTimer, first = false, false
		switch fc.answer() {
		case handOff:
			handedOff = fc.handoff()
			return
		case closeAfter:
			fc.flush()
			return
		}
		fc.r += fc.req.End
		if fc.req.Close {
			if fc.flush() {
				fc.lingerClose()
			}
			return
		}
		if s.shutdown.Load() {
			fc.flush()
			return
		}
	}
}

// next, with nothing buffered, sends the pending answers, then waits for
// the next request, IdleTimeout long (ReadHeaderTimeout for the first, as
// net/http does), and reads what arrived; false: the connection is done.
func (fc *conn) next(first bool) bool {
	if !fc.flush() {
		return false
	}
	fc.releaseWriteBuf()
	fc.r, fc.w = 0, 0
	fc.state.Store(connIdle)
	if fc.s.shutdown.Load() {
		return false
	}
	d := fc.s.cfg.IdleTimeout
	if first {
		d = fc.s.cfg.ReadHeaderTimeout
	}
	n := fc.readIdle(d)
	if n <= 0 {
		return false
	}
	fc.state.Store(connActive)
	fc.w = n
	return true
}

// readMore reads the rest of a request head that has begun, under the
// header deadline (set once, from the first byte: *hdrTimer); false: the
// connection is done.
func (fc *conn) readMore(hdrTimer *bool) bool {
	// Answers to earlier pipelined requests go out before waiting.
	if !fc.flush() {
		return false
	}
	if !*hdrTimer {
		// From the first byte to the end of the header block.
		fc.setReadDeadline(fc.s.cfg.ReadHeaderTimeout)
		*hdrTimer = true
	}
	if fc.r > 0 {
		fc.w = copy(fc.rbuf[:], fc.rbuf[fc.r:fc.w])
		fc.r = 0
	}
	// No answer is in progress while the rest of a head is awaited:
	// Shutdown may close the connection (as net/http does) rather than
	// wait for ReadHeaderTimeout.
	fc.state.Store(connIdle)
	if fc.s.shutdown.Load() {
		return false
	}
	n, _ := fc.connRead(fc.rbuf[fc.w:])
	if n <= 0 {
		return false
	}
	fc.state.Store(connActive)
	fc.w += n
	return true
}

// answer has the planner plan fc.req's answer, sends it (or leaves it
// pending in the write buffer) and has the planner record it.
func (fc *conn) answer() outcome {
	req, p := &fc.req, &fc.plan
	var ok bool
	if fc.pathBuf, ok = req.DecodePath(fc.pathBuf); !ok {
		return handOff // a malformed escape: net/http answers 400
	}
	req.Start = time.Now()
	req.Date = fc.s.date.get(req.Start)
	req.Peer = &fc.peer
	*p = Plan{Buf: fc.writeBuf(), Scratch: fc.scratch[:0], CanSendFile: fc.canSendFile(), CanLend: fc.canWritev()}
	headStart := len(p.Buf)
	if !fc.s.planner.Plan(req, p) {
		return handOff
	}
	switch p.Body {
	case BodyNone:
		*fc.wbuf = p.Buf
	case BodyFile:
		fc.sendFileBody(p)
	case BodyLent:
		fc.sendLentBody(p, headStart)
	case BodyRead:
		fc.readBody(req, p, headStart)
	case BodyStream:
		fc.streamBody(p)
	}
	fc.s.planner.Done(req, p)
	fc.s.served.Add(1)
	if p.Cut {
		return closeAfter
	}
	return answered
}

// sendFileBody sends the pending answers, this head last, then the body
// from its file with sendfile: no user-space copy of it is made.
func (fc *conn) sendFileBody(p *Plan) {
	*fc.wbuf = p.Buf
	sent, headSent, err := fc.sendFile(p.File, p.FileOff, p.N, p.Resident)
	p.Release()
	fc.s.sentFile.Add(1)
	p.Bytes = sent
	if err != nil {
		if headSent {
			p.Err = err
		}
		p.Cut = true
	}
}

// sendLentBody sends the pending answers, this head last, and the lent
// body in one sendmsg(2), the kernel copying the body (from the page
// cache) into the socket.
func (fc *conn) sendLentBody(p *Plan, headStart int) {
	*fc.wbuf = p.Buf
	sent, err := fc.flushWith(p.Lent)
	p.Hold.Release()
	fc.s.sentLent.Add(1)
	p.Bytes = max(0, int64(sent-len(p.Buf)))
	if err != nil {
		if sent > headStart {
			p.Err = err
		}
		p.Cut = true
	}
}

// readBody reads the body into the write buffer after its head with one
// ReadAt, so that head and body leave in one write (with the answers
// batched before them). Nothing of the answer has been sent yet: a failed
// read becomes the planner's Unreadable answer instead of a 200 with a
// cut body.
func (fc *conn) readBody(req *Request, p *Plan, headStart int) {
	b, n := p.Buf, int(p.N)
	if cap(b)-len(b) < n && headStart > 0 {
		// Send the earlier answers; this head stays pending.
		*fc.wbuf = b[:headStart]
		if !fc.flush() {
			p.Cut = true
			return
		}
		b = append((*fc.wbuf)[:0], b[headStart:]...)
		headStart = 0
	}
	if cap(b)-len(b) < n { // an unusually long head
		b = slices.Grow(b, n)
	}
	m, err := p.Source.ReadAt(b[len(b):len(b)+n], p.Off)
	if m < n {
		p.Buf = b[:headStart]
		fc.s.planner.Unreadable(req, p, err)
		*fc.wbuf = p.Buf
		return
	}
	*fc.wbuf = b[:len(b)+m]
	p.Bytes = int64(m)
}

// streamBody sends the head, then has the source write the body, the
// write deadline extended while it progresses.
func (fc *conn) streamBody(p *Plan) {
	*fc.wbuf = p.Buf
	if !fc.flush() {
		p.Cut = true
		return
	}
	written, err := p.Source.WriteRangeTo(&fc.dl, p.Off, p.N)
	p.Bytes = written
	if err != nil {
		p.Err = err
		p.Cut = true
	}
}

// setReadDeadline sets the read deadline d from now; d <= 0 means none.
func (fc *conn) setReadDeadline(d time.Duration) {
	var t time.Time
	if d > 0 {
		t = time.Now().Add(d)
	}
	fc.setReadDeadlineAt(t)
}

// setReadDeadlineAt sets the read deadline t (zero: none) and records it.
func (fc *conn) setReadDeadlineAt(t time.Time) {
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
func (fc *conn) readIdle(d time.Duration) int {
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
func (fc *conn) writeBuf() []byte {
	if fc.wbuf == nil {
		fc.wbuf = fc.s.wbufs.Get().(*[]byte)
	}
	if len(*fc.wbuf) > flushAt {
		fc.flush()
	}
	return *fc.wbuf
}

// flush writes the pending answers in one write, extending the write
// deadline; it reports false if the connection is broken.
func (fc *conn) flush() bool {
	if fc.broken {
		return false
	}
	if fc.wbuf == nil || len(*fc.wbuf) == 0 {
		return true
	}
	fc.dl.Extend(time.Now())
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
func (fc *conn) flushWith(body []byte) (int, error) {
	if fc.broken {
		*fc.wbuf = (*fc.wbuf)[:0]
		return 0, net.ErrClosed
	}
	fc.dl.Extend(time.Now())
	n, err := fc.connWritev(*fc.wbuf, body)
	*fc.wbuf = (*fc.wbuf)[:0]
	if err != nil {
		fc.broken = true
	}
	return n, err
}

// releaseWriteBuf returns an empty write buffer to the pool, so that an
// idle connection holds only its read buffer.
func (fc *conn) releaseWriteBuf() {
	if fc.wbuf == nil {
		return
	}
	b := fc.wbuf
	fc.wbuf = nil
	if cap(*b) != writeBufSize {
		return // grown by an unusually long head: let it go
	}
	*b = (*b)[:0]
	fc.s.wbufs.Put(b)
}

// lingerClose half-closes the connection after its last answer and reads
// what the client still sends until it closes too, at most closeLinger,
// so that closing does not reset the connection under the answer.
func (fc *conn) lingerClose() {
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
