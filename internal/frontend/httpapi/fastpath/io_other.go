//go:build !linux

package fastpath

import "net"

// rawIO: raw socket I/O is Linux only (io_linux.go); elsewhere the
// fast path reads and writes through the net.Conn.
type rawIO struct{}

func (fc *conn) initRawIO(net.Conn) {}

func (r *rawIO) recycle() rawIO { return rawIO{} }

func (fc *conn) connRead(p []byte) (int, error) { return fc.c.Read(p) }

func (fc *conn) connWrite(p []byte) (int, error) { return fc.c.Write(p) }

func (fc *conn) connWritev(a, b []byte) (int, error) {
	n, err := fc.c.Write(a)
	if err != nil {
		return n, err
	}
	m, err := fc.c.Write(b)
	return n + m, err
}

func (fc *conn) canWritev() bool { return false }

// underTLS: no raw I/O under crypto/tls either.
func underTLS(c net.Conn) net.Conn { return c }
