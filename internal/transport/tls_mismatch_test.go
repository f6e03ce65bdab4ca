package transport

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/blob"
)

// TestTLSMismatchDropsConnection: a connection whose certificate names
// another node than the one addressed is closed, not put back in the
// pool: each call to that node tries a new connection.
func TestTLSMismatchDropsConnection(t *testing.T) {
	ctx := context.Background()
	srvID := identity(t, testSecret, 2)
	fh, url, _ := tlsNode(t, 2, srvID, srvID)
	_ = fh
	c := tlsClient(t, 1, identity(t, testSecret, 1), map[NodeID]string{3: url})
	var dials atomic.Int32
	c.onDial = func(net.Conn) { dials.Add(1) }
	for i := 0; i < 3; i++ {
		if _, err := c.HasBlobs(ctx, 3, []blob.Hash{{}}); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if d := dials.Load(); d != 3 {
		t.Errorf("3 calls answered by the wrong node used %d connection(s): the mismatched connection went back to the pool", d)
	}
}

// TestCAKeyDerivationCost: the CA's public key is in every handshake, so
// it lets anyone test guesses of the secret offline; each guess must cost
// the PBKDF2 work (about 0.1 s here), not one HKDF.
func TestCAKeyDerivationCost(t *testing.T) {
	start := time.Now()
	if _, err := deriveCAKey([]byte("a-secret-only-this-test-uses-0123")); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 10*time.Millisecond {
		t.Fatalf("deriving the CA key took %v: a guess of the secret is too cheap", d)
	}
}
