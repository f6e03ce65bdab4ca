package node

// Node-to-node TLS (docs/design/0003-cluster-tls.md). The transport
// package makes the identity (the cluster CA derived from the secret, a
// node certificate issued at start) and checks both ends of every RPC;
// this file puts the TLS on the node's listeners:
//
//   - --cluster-listen: TLS only;
//   - the public listener with --tls-cert: a peer's ClientHello names
//     transport.ClusterServerName and gets the cluster configuration
//     (tls.go), browsers get the public certificate;
//   - the public listener in clear: TLS connections are told from HTTP by
//     their first byte (sniff.go) and served by a second server with the
//     same RPC handlers.
//
// --cluster-tls=off keeps RPC in clear, authenticated by the HMAC alone.

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/cairn-fs/cairn/internal/transport"
)

// clusterTLSConfig is the server configuration of node-to-node TLS, or
// nil (a lone node, or --cluster-tls=off).
func (n *Node) clusterTLSConfig() *tls.Config {
	if n.cl == nil || n.cl.ident == nil {
		return nil
	}
	return n.cl.ident.ServerConfig()
}

// publicListener returns what the public server accepts on: n.ln, or,
// when peers' TLS shares the port in clear, its HTTP half, the TLS half
// being served by n.pts.
func (n *Node) publicListener(firstByte, idle time.Duration) net.Listener {
	cfg := n.clusterTLSConfig()
	if cfg == nil || n.tls != nil {
		return n.ln
	}
	sp := newSplitListener(n.ln, firstByte, n.cfg.Logger)
	// The TLS half serves what the port serves in clear (RPC, or only
	// join with --cluster-listen, and the API that members' calls of
	// peerDo reach), never the fast path.
	n.pts = rpcServer(n.api, idle, n.cfg.Logger)
	srv, ln := n.pts, tls.NewListener(sp.tls, cfg)
	go func() {
		if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			n.cfg.Logger.Error("node-to-node TLS on the public port stopped", "err", err)
		}
	}()
	return sp.plain
}

// rpcServer is an HTTP server of node-to-node RPC. No whole-request read
// or write timeout: snapshot streams are long.
// Its own errors (failed TLS handshakes: a peer of another cluster, a
// port scanner) go to log at level Debug.
func rpcServer(h http.Handler, idle time.Duration, log *slog.Logger) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: idle,
		MaxHeaderBytes: 64 << 10, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
}

// peerTimeout bounds a call of peerDo whose context has no deadline: the
// admin API's bound on a membership change (30 s) and 10 s more.
const peerTimeout = 40 * time.Second

// newPeerClient is the HTTP client of a node's calls to other members'
// public API (their local status for cairn status and a mount's statfs,
// a forced removal forwarded): over node-to-node TLS with the node's
// certificate when ident is not nil, so that the credentials these calls
// carry (the admin key) never cross the network in clear.
func newPeerClient(ident *transport.Identity) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second, DisableCompression: true}
	if ident != nil {
		tr.TLSClientConfig = ident.ClientConfig()
	}
	return &http.Client{Transport: tr, Timeout: peerTimeout}
}

// peerDo sends req to member id at the public URL in req: over cluster
// TLS (an http:// URL is upgraded) unless --cluster-tls=off, refusing an
// answer from another node than id.
func (n *Node) peerDo(req *http.Request, id uint64) (*http.Response, error) {
	c := n.cl
	if c == nil {
		return nil, errors.New("node: not a cluster: no members to call")
	}
	if c.ident != nil && req.URL.Scheme == "http" {
		u := *req.URL
		u.Scheme = "https"
		req.URL = &u
	}
	resp, err := c.peerHC.Do(req)
	if err != nil || c.ident == nil {
		return resp, err
	}
	if got, err := transport.PeerID(resp.TLS); err != nil || uint64(got) != id {
		resp.Body.Close()
		return nil, fmt.Errorf("%s answered with the certificate of node %v (%v), not of node %d", req.URL.Host, got, err, id)
	}
	return resp, nil
}
