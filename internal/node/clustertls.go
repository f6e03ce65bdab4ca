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
	"log/slog"
	"net"
	"net/http"
	"time"
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
	mux := http.NewServeMux()
	for p, h := range n.rpcHandlers() {
		mux.Handle(p, h)
	}
	n.pts = rpcServer(mux, idle, n.cfg.Logger)
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
