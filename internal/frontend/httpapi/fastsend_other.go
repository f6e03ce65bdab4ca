//go:build !linux

package httpapi

import (
	"errors"
	"net"
	"os"
)

// fileSender: zero-copy body sends are Linux only (fastsend_linux.go);
// elsewhere every body goes through the write buffer or WriteRangeTo.
type fileSender struct{}

func (fc *fastConn) initFileSender(net.Conn) {}

func (fs *fileSender) recycle() fileSender { return fileSender{} }

func (fc *fastConn) canSendFile() bool { return false }

func (fc *fastConn) sendFile(*os.File, int64, int64, bool) (int64, bool, error) {
	return 0, false, errors.ErrUnsupported
}
