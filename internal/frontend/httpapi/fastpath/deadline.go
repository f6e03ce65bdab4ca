package fastpath

import (
	"io"
	"net"
	"time"
)

// DeadlineChunk is the most a single write of a DeadlineWriter carries
// before the write deadline is extended again: a reader slower than
// DeadlineChunk per timeout is cut off.
const DeadlineChunk = 128 << 10

// DeadlineWriter writes a response body, extending the connection's
// write deadline while it makes progress. The fast path's streamed bodies
// and httpapi's net/http handler both write through one. Not safe for
// concurrent use.
type DeadlineWriter struct {
	// W is where the body goes; its ReadFrom keeps sendfile.
	W interface {
		io.Writer
		io.ReaderFrom
	}
	// Ctl sets the connection's write deadline; nil: no deadline.
	Ctl interface{ SetWriteDeadline(time.Time) error }
	// Timeout is how far out each extension pushes the deadline; <= 0:
	// no deadline.
	Timeout time.Duration
	last    time.Time // when the deadline was last set
	lr      io.LimitedReader
}

// Extend pushes the write deadline to now+Timeout, at most every
// Timeout/4.
func (d *DeadlineWriter) Extend(now time.Time) {
	if d.Ctl == nil || d.Timeout <= 0 {
		return
	}
	if !d.last.IsZero() && now.Sub(d.last) < d.Timeout/4 {
		return
	}
	_ = d.Ctl.SetWriteDeadline(now.Add(d.Timeout))
	d.last = now
}

// Write writes p in chunks of at most DeadlineChunk, extending the
// deadline.
func (d *DeadlineWriter) Write(p []byte) (int, error) {
	if d.Ctl == nil || d.Timeout <= 0 {
		return d.W.Write(p)
	}
	total := 0
	for len(p) > 0 {
		d.Extend(time.Now())
		c := p[:min(len(p), DeadlineChunk)]
		n, err := d.W.Write(c)
		total += n
		if err != nil {
			return total, err
		}
		p = p[n:]
	}
	return total, nil
}

// ReadFrom copies r in chunks of at most DeadlineChunk, extending the
// deadline; an *io.LimitedReader over an *os.File stays one (sendfile).
func (d *DeadlineWriter) ReadFrom(r io.Reader) (int64, error) {
	if d.Ctl == nil || d.Timeout <= 0 {
		return d.W.ReadFrom(r)
	}
	src, limit := r, int64(1<<63-1)
	if lr, ok := r.(*io.LimitedReader); ok {
		src, limit = lr.R, lr.N
		defer func() { lr.N = limit }()
	}
	var total int64
	for limit > 0 {
		d.Extend(time.Now())
		want := min(limit, DeadlineChunk)
		d.lr = io.LimitedReader{R: src, N: want}
		n, err := d.W.ReadFrom(&d.lr)
		total += n
		limit -= n
		if err != nil || n < want {
			return total, err
		}
	}
	return total, nil
}

// connSink writes response bodies straight to a connection, keeping
// io.ReaderFrom so that a Source's WriteRangeTo can use sendfile on a
// *net.TCPConn.
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
