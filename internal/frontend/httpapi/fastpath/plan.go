package fastpath

import (
	"io"
	"net"
	"net/netip"
	"os"
)

// Planner decides the answers of the requests the fast path takes: the
// seam between this package (HTTP/1.1 on a socket) and the API it serves
// (httpapi: routing, abuse rules, presigned URLs, access, the store, the
// headers). Its contract, checked by fastpathtest.Run: every answer it
// plans leaves, through this package, byte for byte as the Config's
// Fallback (net/http) would send it for the same request, the Date value
// aside; what it cannot answer so, it hands off before writing anything.
//
// The methods are called from the connection's goroutine, one request at
// a time per connection, for many connections at once.
type Planner interface {
	// Plan decides req's answer: it appends the answer's head to p.Buf (a
	// body it has whole too, such as an error's), and names in p.Body the
	// body that follows, if any. It reports false to hand the request
	// (and the connection) off to net/http, having changed nothing in
	// p.Buf. It must not block on the client.
	Plan(req *Request, p *Plan) bool
	// Unreadable is called, for a BodyRead plan only, when the body could
	// not be read whole before anything of the answer was sent (err may
	// be nil or io.EOF for a short read): p.Buf has been cut back to
	// where the answer began, and Unreadable appends another answer (an
	// error) there, with p.Body set to BodyNone.
	Unreadable(req *Request, p *Plan, err error)
	// Done is called once for every planned answer (not for hand-offs),
	// after it was sent or failed: p.Bytes, p.Cut and p.Err say how it
	// went. It releases what Plan holds (p.Source) and records the answer
	// (metrics, access log).
	Done(req *Request, p *Plan)
}

// Body is how an answer's body leaves after its head.
type Body uint8

const (
	// BodyNone: the answer is whole in Plan.Buf (a head, and a body the
	// planner appended).
	BodyNone Body = iota
	// BodyFile: N bytes of File from FileOff, sent with sendfile(2) after
	// the head (Linux, TCP; only when Plan.CanSendFile, and for at least
	// SendfileMin bytes); Release is called once they left or failed.
	BodyFile
	// BodyLent: the bytes Lent (at most MaxBody), sent with the head and
	// the pending answers in one sendmsg(2) (only when Plan.CanLend);
	// Hold.Release is called once they left or failed.
	BodyLent
	// BodyRead: N bytes (at most MaxBody) of Source from Off, read into
	// the write buffer after the head and sent with it; a failed read
	// becomes the answer Unreadable writes.
	BodyRead
	// BodyStream: N bytes of Source from Off, written by its
	// WriteRangeTo after the head went out. The planner should have read
	// a first byte before planning it: once the head is out, a failure
	// can only cut the connection.
	BodyStream
)

// Source is where a BodyRead or BodyStream plan's bytes come from (a
// store object); the planner closes it in Done.
type Source interface {
	io.ReaderAt
	// WriteRangeTo writes bytes [off, off+n) to w (which keeps
	// io.ReaderFrom, for sendfile).
	WriteRangeTo(w io.Writer, off, n int64) (int64, error)
	Close() error
}

// ScratchSize is the size of Plan.Scratch's room.
const ScratchSize = 320

// Plan is a request's answer, as the planner decides it and the
// connection sends it. The connection keeps one per connection and resets
// it before each Plan.
type Plan struct {
	// Set by the connection before Plan.

	// Buf holds the pending answers of the connection (pipelined requests
	// answered but not yet sent); Plan appends this answer to it.
	Buf []byte
	// Scratch is room (ScratchSize bytes, length 0) the planner may use
	// while planning, such as for header values.
	Scratch []byte
	// CanSendFile: the connection can send a BodyFile.
	CanSendFile bool
	// CanLend: the connection sends a BodyLent with its head in one
	// system call (otherwise lending gains nothing).
	CanLend bool

	// Set by the planner.

	Body   Body
	Off, N int64  // the body's range in Source (BodyRead, BodyStream); N: its length (all bodies)
	Source Source // the open source of the body, if any; closed by Done
	// BodyFile: the file, the offset of the body in it, whether its pages
	// are in the page cache (the send is then a raw system call, which
	// cannot wait for the disk), and the release of the file.
	File     *os.File
	FileOff  int64
	Resident bool
	Release  func()
	// BodyLent: the lent bytes and their hold.
	Lent []byte
	Hold interface{ Release() }
	// What the planner notes for its Done: the status, the user and the
	// abuse rule of the access log, the decoded path (a real string).
	Status int
	User   string
	Rule   string
	Path   string

	// Set by the connection, except Bytes for a body in Buf (the planner's).

	// Bytes is the count of body bytes sent (or, for a body in Buf, of
	// the body appended).
	Bytes int64
	// Cut: the body was cut short or the connection broke; it closes.
	Cut bool
	// Err is the failure of a body whose head (or part of it) was sent
	// already, for the planner to log; nil otherwise.
	Err error
}

// Peer is the client end of a connection, kept for the connection's
// life: RemoteAddr is asked of the socket once, and IP is a slot for the
// planner's own reading of it.
type Peer struct {
	c      net.Conn
	remote string
	// IP is the planner's: the address it derived from RemoteAddr, kept
	// for the next requests of the connection (zero until it sets it).
	IP netip.Addr
}

// RemoteAddr returns the connection's remote address, as net/http's
// Request.RemoteAddr.
func (p *Peer) RemoteAddr() string {
	if p.remote == "" {
		p.remote = p.c.RemoteAddr().String()
	}
	return p.remote
}
