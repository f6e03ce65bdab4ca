package node

// Node-to-node listener (--cluster-listen).
//
// Without --cluster-listen, every RPC (Raft batches, snapshot streams, blob
// put/get/has, join) is served on the public listener under /_cairn/rpc/
// and peers reach the node at its public URL.
//
// With --cluster-listen HOST:PORT, the node serves the RPC endpoint on that
// second listener, records its address as the ClusterURL of its cluster
// map record (and sends it in its join request), so peers send Raft, snapshot
// and blob traffic there. The public listener then serves only
// /_cairn/rpc/join — a new node joins through a member's public URL (the
// only address an operator gives it) — and answers 404 to every other path
// under /_cairn/rpc/, so that the public port exposes nothing but the
// authenticated join to the cluster-secret surface. The gossip default
// follows the cluster listener: its host, its port + 100 (liveness.go).

import (
	"crypto/tls"
	"net/http"
	"time"

	"github.com/cairn-fs/cairn/internal/transport"
)

// joinPath is the one RPC the public listener keeps with --cluster-listen.
const joinPath = transport.PathPrefix + "join"

// rpcHandlers returns the RPC handlers mounted on the public listener
// (httpapi.Config.ExtraHandlers).
func (n *Node) rpcHandlers() map[string]http.Handler {
	if n.cln == nil {
		return map[string]http.Handler{transport.PathPrefix: n.cl.server}
	}
	return map[string]http.Handler{
		joinPath:             n.cl.server,
		transport.PathPrefix: http.HandlerFunc(notOnPublic),
	}
}

// notOnPublic answers RPCs that arrive on the public listener of a node
// with a cluster listener.
func notOnPublic(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusNotFound)
	w.Write([]byte("not found: node-to-node RPC is served on this node's cluster listener, not its public address\n"))
}

// serveCluster starts the cluster listener's HTTP server, when there is
// one, over TLS unless --cluster-tls=off (clustertls.go).
func (n *Node) serveCluster(idle time.Duration) {
	if n.cln == nil || n.cl == nil {
		return
	}
	mux := http.NewServeMux()
	mux.Handle(transport.PathPrefix, n.cl.server)
	n.chs = rpcServer(mux, idle, n.cfg.Logger)
	srv, ln := n.chs, n.cln
	if cfg := n.clusterTLSConfig(); cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	go func() {
		if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			n.cfg.Logger.Error("cluster listener stopped", "addr", ln.Addr().String(), "err", err)
			n.stopWith(err)
		}
	}()
}
