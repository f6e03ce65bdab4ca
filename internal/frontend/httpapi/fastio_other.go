//go:build !linux

package httpapi

import "net"

// rawIO: raw socket I/O is Linux only (fastio_linux.go); elsewhere the
// fast path reads and writes through the net.Conn.
type rawIO struct{}

func (fc *fastConn) initRawIO(net.Conn) {}

func (r *rawIO) recycle() rawIO { return rawIO{} }

func (fc *fastConn) connRead(p []byte) (int, error) { return fc.c.Read(p) }

func (fc *fastConn) connWrite(p []byte) (int, error) { return fc.c.Write(p) }

func (fc *fastConn) connWritev(a, b []byte) (int, error) {
	n, err := fc.c.Write(a)
	if err != nil {
		return n, err
	}
	m, err := fc.c.Write(b)
	return n + m, err
}

func (fc *fastConn) canWritev() bool { return false }
