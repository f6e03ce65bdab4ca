package node

import (
	"context"
	"testing"
	"time"
)

// TestAlive: a serving node (HTTP, and HTTPS with a certificate that does
// not name the address asked) is alive; once closed it is not, within
// the context's time.
func TestAlive(t *testing.T) {
	certFile, keyFile := reviewCert(t)
	for _, tlsOn := range []bool{false, true} {
		cfg := loneConfig(t)
		if tlsOn {
			cfg.TLSCert, cfg.TLSKey = certFile, keyFile
		}
		n, err := Start(cfg)
		must(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := n.Alive(ctx); err != nil {
			t.Fatalf("tls %v: a serving node (%s) is not alive: %v", tlsOn, n.LocalURL, err)
		}
		cancel()
		must(t, n.Close())
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		if err := n.Alive(ctx); err == nil {
			t.Fatalf("tls %v: a closed node is alive", tlsOn)
		}
		cancel()
	}
}
