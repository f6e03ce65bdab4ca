//go:build linux

package fastpath

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawIO is the fast path's socket I/O on Linux (doc.go): the
// connection's reads and writes are made by RawConn callbacks with raw
// system calls (syscall.RawSyscall, no entersyscall/exitsyscall), which is
// safe because a Go socket is non-blocking: read(2) and send(2) return
// EAGAIN rather than block, and the callback then returns false to wait in
// the runtime's poller, deadlines included, as net.Conn's own Read and
// Write do. A raw system call keeps its P: the scheduler's monitor (sysmon)
// sees no P in a system call to retake and hand off, so it stays in its
// long sleeps instead of waking every 20 µs under load. Sends use
// MSG_NOSIGNAL. The callbacks are bound once per pooled connection.
type rawIO struct {
	rc syscall.RawConn // nil: use the net.Conn (not TCP, or not Linux)

	p    []byte // read: the buffer; write: what remains to send
	body []byte // writev: the second piece, sent after p
	n    int    // bytes read or sent
	err  error  // the failure of the last callback
	iov  [2]unix.Iovec
	msg  unix.Msghdr

	readFn, writeFn, writevFn func(uintptr) bool
}

// initRawIO prepares raw socket I/O on c if it is a TCP connection.
func (fc *conn) initRawIO(c net.Conn) { fc.rio.init(c) }

// init prepares raw socket I/O on c if it is a TCP connection.
func (r *rawIO) init(c net.Conn) {
	r.rc = tcpRawConn(c)
	if r.rc == nil {
		return
	}
	if r.readFn == nil {
		r.readFn, r.writeFn, r.writevFn = r.read, r.write, r.writev
	}
}

// rawTCP is the TCP connection under a *tls.Conn (tls.go): crypto/tls
// reads and writes its records through it with rawIO's raw system calls.
// It lives as long as the connection, which may outlive the fast path's
// conn (a hand-off), so it is not part of the pooled conn.
//
// Reads and writes may run at once (net/http's background read, HTTP/2's
// reader and writer goroutines): each has its own rawIO.
type rawTCP struct {
	*net.TCPConn // deadlines, addresses, Close, CloseWrite
	rd, wr       rawIO
}

// underTLS returns the connection crypto/tls should run over: c with raw
// reads and writes if it is a TCP connection, else c.
func underTLS(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	u := &rawTCP{TCPConn: tc}
	u.rd.init(c)
	u.wr.init(c)
	if u.rd.rc == nil || u.wr.rc == nil {
		return c
	}
	return u
}

// Read implements net.Conn.
func (u *rawTCP) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return u.TCPConn.Read(p)
	}
	return u.rd.readRaw(p)
}

// Write implements net.Conn.
func (u *rawTCP) Write(p []byte) (int, error) { return u.wr.writeRaw(p) }

// tcpRawConn is c's RawConn if c is a TCP connection, else nil.
func tcpRawConn(c net.Conn) syscall.RawConn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// recycle returns rawIO for the pooled connection's next use: the bound
// callbacks stay; the rest goes.
func (r *rawIO) recycle() rawIO {
	return rawIO{readFn: r.readFn, writeFn: r.writeFn, writevFn: r.writevFn}
}

// connRead reads into p as fc.c.Read does (io.EOF at the end, the
// poller's error at a deadline or after Close).
func (fc *conn) connRead(p []byte) (int, error) {
	r := &fc.rio
	if r.rc == nil || len(p) == 0 {
		return fc.c.Read(p)
	}
	return r.readRaw(p)
}

// readRaw reads into p (not empty) with a raw read(2), waiting in the
// runtime's poller while there is nothing to read.
func (r *rawIO) readRaw(p []byte) (int, error) {
	r.p, r.n, r.err = p, 0, nil
	err := r.rc.Read(r.readFn)
	n, rerr := r.n, r.err
	r.p = nil
	if err != nil {
		return n, err
	}
	return n, rerr
}

// connWrite writes all of p as fc.c.Write does.
func (fc *conn) connWrite(p []byte) (int, error) {
	r := &fc.rio
	if r.rc == nil {
		return fc.c.Write(p)
	}
	return r.writeRaw(p)
}

// writeRaw writes all of p with raw send(2) calls, waiting in the
// runtime's poller while the socket is full.
func (r *rawIO) writeRaw(p []byte) (int, error) {
	r.p, r.n, r.err = p, 0, nil
	err := r.rc.Write(r.writeFn)
	n, werr := r.n, r.err
	r.p = nil
	if err != nil {
		return n, err
	}
	return n, werr
}

// connWritev writes all of a then all of b, with writev-like sendmsg(2)
// calls, so that b (a body lent from a volume's memory map) is copied by
// the kernel straight into the socket. It reports the bytes of a and b
// sent. b must stay valid until it returns.
func (fc *conn) connWritev(a, b []byte) (int, error) {
	r := &fc.rio
	if r.rc == nil {
		n, err := fc.c.Write(a)
		if err != nil {
			return n, err
		}
		m, err := fc.c.Write(b)
		return n + m, err
	}
	r.p, r.body, r.n, r.err = a, b, 0, nil
	err := r.rc.Write(r.writevFn)
	n, werr := r.n, r.err
	r.p, r.body = nil, nil
	r.iov = [2]unix.Iovec{}
	r.msg = unix.Msghdr{}
	if err != nil {
		return n, err
	}
	return n, werr
}

// read is the RawConn callback of connRead. false: wait until readable.
func (r *rawIO) read(fd uintptr) bool {
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd,
			uintptr(unsafe.Pointer(unsafe.SliceData(r.p))), uintptr(len(r.p)))
		switch errno {
		case 0:
			if n == 0 {
				r.err = io.EOF
			} else {
				r.n = int(n)
			}
			return true
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			r.err = os.NewSyscallError("read", errno)
			return true
		}
	}
}

// write is the RawConn callback of connWrite. false: wait until writable.
func (r *rawIO) write(fd uintptr) bool {
	for len(r.p) > 0 {
		n, _, errno := syscall.RawSyscall6(syscall.SYS_SENDTO, fd,
			uintptr(unsafe.Pointer(unsafe.SliceData(r.p))), uintptr(len(r.p)),
			unix.MSG_NOSIGNAL, 0, 0)
		switch errno {
		case 0:
			r.p = r.p[n:]
			r.n += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			r.err = os.NewSyscallError("sendto", errno)
			return true
		}
	}
	return true
}

// writev is the RawConn callback of connWritev: r.p, then r.body, in one
// sendmsg(2) while both remain. false: wait until writable.
func (r *rawIO) writev(fd uintptr) bool {
	for len(r.p)+len(r.body) > 0 {
		k := 0
		if len(r.p) > 0 {
			r.iov[k].Base = unsafe.SliceData(r.p)
			r.iov[k].SetLen(len(r.p))
			k++
		}
		if len(r.body) > 0 {
			r.iov[k].Base = unsafe.SliceData(r.body)
			r.iov[k].SetLen(len(r.body))
			k++
		}
		r.msg.Iov = &r.iov[0]
		r.msg.SetIovlen(k)
		n, _, errno := syscall.RawSyscall(syscall.SYS_SENDMSG, fd,
			uintptr(unsafe.Pointer(&r.msg)), unix.MSG_NOSIGNAL)
		switch errno {
		case 0:
			m := int(n)
			r.n += m
			if m <= len(r.p) {
				r.p = r.p[m:]
			} else {
				r.body = r.body[m-len(r.p):]
				r.p = r.p[len(r.p):]
			}
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			r.err = os.NewSyscallError("sendmsg", errno)
			return true
		}
	}
	return true
}

// canWritev reports whether connWritev sends both pieces in one system
// call (a TCP connection): only then is a lent body worth its hold.
func (fc *conn) canWritev() bool { return fc.rio.rc != nil }
