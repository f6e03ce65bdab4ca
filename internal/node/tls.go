package node

import (
	"crypto/tls"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/cairn-fs/cairn/internal/transport"
)

// certReloader holds the public listener's certificate, read from
// --tls-cert and --tls-key, and swaps it on ReloadTLS (SIGHUP): new
// handshakes get the new certificate, established connections keep going.
type certReloader struct {
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]
}

func newCertReloader(certFile, keyFile string) (*certReloader, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("node: HTTPS needs both --tls-cert and --tls-key")
	}
	r := &certReloader{certFile: certFile, keyFile: keyFile}
	if err := r.reload(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *certReloader) reload() error {
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("node: load --tls-cert %s and --tls-key %s: %w", r.certFile, r.keyFile, err)
	}
	r.cur.Store(&c)
	return nil
}

// config is the listener's TLS configuration: HTTP/2 and HTTP/1.1 by
// ALPN (net/http adds them), TLS 1.2 at least. With cluster (the
// node-to-node TLS configuration, or nil), a peer that asks for the
// cluster's server name gets it instead: RPC shares the HTTPS port.
func (r *certReloader) config(cluster *tls.Config) *tls.Config {
	c := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return r.cur.Load(), nil
		},
	}
	if cluster != nil {
		c.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			if hello.ServerName == transport.ClusterServerName {
				return cluster, nil
			}
			return nil, nil
		}
	}
	return c
}

// ReloadTLS reads the certificate and key files again (cairn server does
// it on SIGHUP). On an error the current certificate stays. A node
// without --tls-cert has nothing to reload.
func (n *Node) ReloadTLS() error {
	if n.tls == nil {
		return nil
	}
	return n.tls.reload()
}
