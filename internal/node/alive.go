package node

// The liveness check a service manager's watchdog relies on
// (internal/sdnotify, cmd/cairn's server).

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
)

// Alive asks the node's own public listener, at LocalURL, for
// /_cairn/health, on a new connection, and returns nil once any HTTP
// answer came back within ctx: it proves that the listener accepts and
// that a request is handled, through the blob store's state, which is
// what a hung node no longer does. A 503 (a blob store turned read-only
// after a disk error, corrupt copies on a node without replicas) counts
// as alive: restarting the node would not mend the disk, and would clear
// what its health reports. A connection refused, a reset or ctx's end is
// an error. With HTTPS the certificate is not checked (it names the
// public host, not 127.0.0.1; the request carries no credentials). Safe
// for concurrent use; it blocks for at most ctx.
func (n *Node) Alive(ctx context.Context) error {
	tr := &http.Transport{
		Proxy:             nil, // never through an HTTP_PROXY
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // own listener, see above
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.LocalURL+"/_cairn/health", nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "cairn-watchdog")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return fmt.Errorf("node: liveness check: %w", err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 4096)); err != nil {
		return fmt.Errorf("node: liveness check: %s: reading the answer: %w", resp.Status, err)
	}
	return nil
}
