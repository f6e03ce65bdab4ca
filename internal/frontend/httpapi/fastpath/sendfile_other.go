//go:build !linux

package fastpath

import (
	"errors"
	"net"
	"os"
)

// fileSender: zero-copy body sends are Linux only (sendfile_linux.go);
// elsewhere every body goes through the write buffer or WriteRangeTo.
type fileSender struct{}

func (fc *conn) initFileSender(net.Conn) {}

func (fs *fileSender) recycle() fileSender { return fileSender{} }

func (fc *conn) canSendFile() bool { return false }

func (fc *conn) sendFile(*os.File, int64, int64, bool) (int64, bool, error) {
	return 0, false, errors.ErrUnsupported
}
