//go:build unix

package node

import (
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// peekByte waits up to timeout for c's first byte and returns it without
// consuming it (recv with MSG_PEEK), so c stays the plain socket.
func peekByte(c net.Conn, timeout time.Duration) (byte, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, errors.New("not a socket")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return 0, err
	}
	var b [1]byte
	var n int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		for {
			n, _, rerr = unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK)
			if rerr != unix.EINTR {
				return rerr != unix.EAGAIN // EAGAIN: wait for the socket to be readable
			}
		}
	})
	if err == nil {
		err = rerr
	}
	if err == nil && n == 0 {
		err = io.EOF
	}
	if err != nil {
		return 0, err
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		return 0, err
	}
	return b[0], nil
}
