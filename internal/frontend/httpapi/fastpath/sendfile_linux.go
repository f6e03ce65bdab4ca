//go:build linux

package fastpath

import (
	"io"
	"net"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fileSender is the fast path's zero-copy body send (doc.go):
// the pending answers, this one's head last, leave with one send(2) flagged
// MSG_MORE, and the body follows from the volume file with sendfile(2) at
// an explicit offset, so that no user-space copy of it is made and the
// descriptor's own offset is neither used nor moved (no dup per request).
// Its state lives in the connection so that the callbacks given to the
// socket's RawConn are made once per pooled connection, not per request.
type fileSender struct {
	rc syscall.RawConn // the socket; nil: no zero-copy send on this connection
	// file and fd cache the descriptor of the last volume file sent from:
	// while the caller holds the file (LocalSpan's release), the same
	// *os.File is open and keeps its descriptor.
	file *os.File
	fd   int

	head []byte // what remains of the head to send
	off  int64  // file offset of the next body byte (sendfile moves it)
	left int64  // body bytes of the current chunk still to send
	err  error  // the failure of the last callback
	// moved is set when bytes left since the callback last had to wait;
	// progress (the connection's deadline extension) runs before each
	// wait that follows progress, so the write deadline bounds a stall,
	// not the body: one sendfile loop sends the whole body.
	moved    bool
	progress func()
	headFn   func(uintptr) bool
	chunkFn  func(uintptr) bool
	// rawChunkFn is chunkFn with a raw system call, for bodies whose pages
	// are in the page cache (see sendFile).
	rawChunkFn func(uintptr) bool
}

// initFileSender prepares zero-copy sends on c if it is a TCP connection.
func (fc *conn) initFileSender(c net.Conn) {
	fs := &fc.fs
	fs.rc = tcpRawConn(c)
	if fs.rc == nil {
		return
	}
	if fs.headFn == nil {
		fs.headFn = fs.sendHead
		fs.chunkFn = fs.sendChunk
		fs.rawChunkFn = fs.sendChunkRaw
		fs.progress = func() { fc.dl.Extend(time.Now()) }
	}
}

// recycle returns the sender for the pooled connection's next use: the
// callbacks, bound to this fileSender, stay; the rest goes.
func (fs *fileSender) recycle() fileSender {
	return fileSender{headFn: fs.headFn, chunkFn: fs.chunkFn, rawChunkFn: fs.rawChunkFn, progress: fs.progress}
}

// canSendFile reports whether the connection can send bodies with sendFile.
func (fc *conn) canSendFile() bool { return fc.fs.rc != nil }

// fileFD returns f's descriptor without the side effects of f.Fd (which
// switches it to blocking mode, a system call).
func (fs *fileSender) fileFD(f *os.File) (int, error) {
	if f == fs.file {
		return fs.fd, nil
	}
	sc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	fd := -1
	if err := sc.Control(func(u uintptr) { fd = int(u) }); err != nil {
		return 0, err
	}
	fs.file, fs.fd = f, fd
	return fd, nil
}

// sendFile writes the pending answers (this answer's head last) and then n
// bytes of f from offset off, keeping the write deadline as flush and
// deadlineWriter do. It reports the body bytes sent; headSent is false if
// nothing at all went out (the head failed). An error means the
// connection must close.
//
// resident says that the body's pages were found in the page cache
// (store's object.Resident): sendfile(2) then cannot wait for the disk and
// is made as a raw system call, like the fast path's other socket I/O
// (rawIO), which keeps the runtime's sysmon asleep; otherwise it is an
// ordinary one, during which the scheduler may hand the P to another
// thread. (A page evicted between the check and the send makes the raw
// call wait for the disk while holding its P: slower, never wrong.)
func (fc *conn) sendFile(f *os.File, off, n int64, resident bool) (sent int64, headSent bool, err error) {
	fs := &fc.fs
	if _, err := fs.fileFD(f); err != nil { // sets fs.fd
		return 0, false, err
	}
	fc.dl.Extend(time.Now())
	fs.head, fs.err = *fc.wbuf, nil
	if err := fs.rc.Write(fs.headFn); err != nil || fs.err != nil {
		*fc.wbuf = (*fc.wbuf)[:0]
		fs.head = nil
		fc.broken = true
		return 0, false, firstErr(fs.err, err)
	}
	*fc.wbuf = (*fc.wbuf)[:0]
	fs.head = nil
	fs.off = off
	for sent < n {
		// The whole rest in one loop of sendfile calls; the deadline is
		// extended before each wait for the socket that follows progress
		// (sendChunkWith). Chunks of deadlineChunk with a deadline each
		// cost 22% more CPU per 650 KB GET (bench/BENCHMARKS.md,
		// "Downloads at line rate").
		chunk := n - sent
		fs.left, fs.err, fs.moved = chunk, nil, false
		fn := fs.chunkFn
		if resident {
			fn = fs.rawChunkFn
		}
		werr := fs.rc.Write(fn)
		sent += chunk - fs.left
		if werr != nil || fs.err != nil {
			fc.broken = true
			return sent, true, firstErr(fs.err, werr)
		}
	}
	return sent, true, nil
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// sendHead is the RawConn callback that sends fs.head with MSG_MORE: the
// body follows at once, and the kernel holds the head for it rather than
// sending it in a segment of its own. false: wait until writable.
func (fs *fileSender) sendHead(fd uintptr) bool {
	for len(fs.head) > 0 {
		n, _, errno := syscall.RawSyscall6(syscall.SYS_SENDTO, fd,
			uintptr(unsafe.Pointer(unsafe.SliceData(fs.head))), uintptr(len(fs.head)),
			unix.MSG_MORE|unix.MSG_NOSIGNAL, 0, 0)
		switch errno {
		case 0:
			fs.head = fs.head[n:]
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			fs.err = os.NewSyscallError("sendto", errno)
			return true
		}
	}
	return true
}

// sendChunk is the RawConn callback that sends fs.left bytes of the file
// from fs.off. false: wait until writable.
func (fs *fileSender) sendChunk(fd uintptr) bool { return fs.sendChunkWith(fd, false) }

// sendChunkRaw is sendChunk with raw system calls, for resident pages.
func (fs *fileSender) sendChunkRaw(fd uintptr) bool { return fs.sendChunkWith(fd, true) }

func (fs *fileSender) sendChunkWith(fd uintptr, raw bool) bool {
	for fs.left > 0 {
		var n int
		var err error
		if raw {
			r1, _, errno := syscall.RawSyscall6(syscall.SYS_SENDFILE, fd, uintptr(fs.fd),
				uintptr(unsafe.Pointer(&fs.off)), uintptr(fs.left), 0, 0)
			if errno != 0 {
				err = errno
			} else {
				n = int(r1)
			}
		} else {
			n, err = unix.Sendfile(int(fd), fs.fd, &fs.off, int(fs.left))
		}
		if n > 0 {
			fs.left -= int64(n)
			fs.moved = true
		}
		switch {
		case err == syscall.EINTR:
		case err == syscall.EAGAIN:
			if fs.moved && fs.progress != nil {
				// Called with the socket's write lock held: setting a
				// deadline only takes a reference (internal/poll).
				fs.progress()
				fs.moved = false
			}
			return false
		case err != nil:
			fs.err = os.NewSyscallError("sendfile", err)
			return true
		case n == 0:
			fs.err = io.ErrUnexpectedEOF // the file ends before the blob
			return true
		}
	}
	return true
}
