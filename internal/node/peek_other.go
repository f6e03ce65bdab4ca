//go:build !unix

package node

import (
	"net"
	"time"
)

// peekByte is not available here: every connection is taken as HTTP, so
// node-to-node TLS needs --cluster-listen on this platform.
func peekByte(c net.Conn, timeout time.Duration) (byte, error) {
	return 0, nil
}
