package transport

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/cairn-fs/cairn/internal/blob"
)

// recordingListener keeps every byte its connections read and wrote.
type recordingListener struct {
	net.Listener
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: c, l: l}, nil
}

func (l *recordingListener) bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.buf.Bytes())
}

type recordingConn struct {
	net.Conn
	l *recordingListener
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.l.mu.Lock()
	c.l.buf.Write(p[:n])
	c.l.mu.Unlock()
	return n, err
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.l.mu.Lock()
	c.l.buf.Write(p)
	c.l.mu.Unlock()
	return c.Conn.Write(p)
}

func identity(t *testing.T, secret []byte, id NodeID) *Identity {
	t.Helper()
	i, err := NewIdentity(secret, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// tlsNode serves node id's RPC on loopback, over TLS with ident when not
// nil (the server's Config.TLS is tlsRequired's), recording the wire.
func tlsNode(t *testing.T, id NodeID, ident *Identity, required *Identity) (*fakeHandler, string, *recordingListener) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NodeID, cfg.Secret, cfg.TLS = id, testSecret, required
	h := newFakeHandler()
	s, err := NewServer(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingListener{Listener: ln}
	var serve net.Listener = rec
	if ident != nil {
		serve = ident.Listener(rec)
	}
	mux := http.NewServeMux()
	mux.Handle(PathPrefix, s)
	srv := &http.Server{Handler: mux}
	go srv.Serve(serve)
	t.Cleanup(func() { srv.Close() })
	return h, "http://" + ln.Addr().String(), rec
}

func tlsClient(t *testing.T, from NodeID, ident *Identity, addrs map[NodeID]string) *HTTPClient {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NodeID, cfg.Secret, cfg.TLS = from, testSecret, ident
	cfg.Addr = func(id NodeID) (string, bool) { a, ok := addrs[id]; return a, ok }
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestTLSEncryptsBlobs: with TLS the blob's bytes never appear on the
// wire; without it they do (so the recorder can see them).
func TestTLSEncryptsBlobs(t *testing.T) {
	data := make([]byte, 200<<10)
	rand.Read(data)
	h := blob.Sum(data)
	for _, on := range []bool{true, false} {
		var srvID, cliID *Identity
		if on {
			srvID, cliID = identity(t, testSecret, 2), identity(t, testSecret, 1)
		}
		fh, url, rec := tlsNode(t, 2, srvID, srvID)
		c := tlsClient(t, 1, cliID, map[NodeID]string{2: url})
		ctx := context.Background()
		if err := c.PutBlob(ctx, 2, BlobPut{Hash: h, Data: data}); err != nil {
			t.Fatalf("tls=%v: PutBlob: %v", on, err)
		}
		rc, err := c.GetBlob(ctx, 2, h, 0, -1)
		if err != nil {
			t.Fatalf("tls=%v: GetBlob: %v", on, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("tls=%v: GetBlob: %d bytes, err %v", on, len(got), err)
		}
		has, err := c.HasBlobs(ctx, 2, []blob.Hash{h})
		if err != nil || !has[0] {
			t.Fatalf("tls=%v: HasBlobs = %v, %v", on, has, err)
		}
		if _, err := c.Join(ctx, url, JoinRequest{ID: 1, PublicURL: "http://a"}); err != nil {
			t.Fatalf("tls=%v: Join: %v", on, err)
		}
		c.SendRaft(2, []*raftpb.Message{raftMsg(1, 2, 7, data[:4096])})
		recvRaft(t, fh, 1, 5*time.Second)
		wire := rec.bytes()
		seen := bytes.Contains(wire, data[1000:1064]) || bytes.Contains(wire, data[100<<10:100<<10+64])
		if seen == on {
			t.Fatalf("tls=%v: blob bytes on the wire: %v (%d bytes recorded)", on, seen, len(wire))
		}
	}
}

// TestTLSRefusesOthers: a client without TLS gets 426 (ErrTLSRequired); a
// TLS client meeting a plain server says so; a certificate of another
// cluster's CA does not connect; a certificate of node 5 cannot sign as
// node 1; a client that reaches node 2 when it addressed node 3 refuses
// the answer.
func TestTLSRefusesOthers(t *testing.T) {
	ctx := context.Background()
	srvID := identity(t, testSecret, 2)
	_, plainURL, _ := tlsNode(t, 2, nil, srvID) // TLS required, but served in clear
	c := tlsClient(t, 1, nil, map[NodeID]string{2: plainURL})
	if _, err := c.HasBlobs(ctx, 2, []blob.Hash{{}}); !errors.Is(err, ErrTLSRequired) {
		t.Fatalf("plain client to a node requiring TLS: %v, want ErrTLSRequired", err)
	}

	_, openURL, _ := tlsNode(t, 2, nil, nil) // --cluster-tls=off
	c = tlsClient(t, 1, identity(t, testSecret, 1), map[NodeID]string{2: openURL})
	if _, err := c.HasBlobs(ctx, 2, []blob.Hash{{}}); !errors.Is(err, ErrTLSRequired) {
		t.Fatalf("TLS client to a plain node: %v, want ErrTLSRequired", err)
	}

	_, url, _ := tlsNode(t, 2, srvID, srvID)
	other := identity(t, []byte("another-cluster-secret-0123456789"), 1)
	c = tlsClient(t, 1, other, map[NodeID]string{2: url})
	if _, err := c.HasBlobs(ctx, 2, []blob.Hash{{}}); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("another cluster's CA: %v, want ErrUnauthorized", err)
	}

	c = tlsClient(t, 1, identity(t, testSecret, 5), map[NodeID]string{2: url})
	if _, err := c.HasBlobs(ctx, 2, []blob.Hash{{}}); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("node 5's certificate signing as node 1: %v, want ErrUnauthorized", err)
	}

	c = tlsClient(t, 1, identity(t, testSecret, 1), map[NodeID]string{3: url})
	if _, err := c.HasBlobs(ctx, 3, []blob.Hash{{}}); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("node 2 answering for node 3: %v, want ErrUnauthorized", err)
	}
}

// TestIdentityCA: the CA comes from the secret alone, so two nodes'
// copies verify each other's certificates; another secret makes another
// CA. Certificates name their node and are renewed before they expire.
func TestIdentityCA(t *testing.T) {
	now := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	a, err := NewIdentity(testSecret, 1, clock)
	if err != nil {
		t.Fatal(err)
	}
	b := identity(t, testSecret, 2)
	if !a.CA().PublicKey.(*ecdsa.PublicKey).Equal(b.CA().PublicKey) {
		t.Fatal("the same secret gave two CA keys")
	}
	o := identity(t, []byte("another-cluster-secret-0123456789"), 2)
	if a.CA().PublicKey.(*ecdsa.PublicKey).Equal(o.CA().PublicKey) {
		t.Fatal("two secrets gave the same CA key")
	}
	ca, _ := a.Certificate()
	pool := x509.NewCertPool()
	pool.AddCert(b.CA())
	opts := x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if _, err := ca.Leaf.Verify(opts); err != nil {
		t.Fatalf("node 1's certificate against node 2's copy of the CA: %v", err)
	}
	opts.Roots = x509.NewCertPool()
	opts.Roots.AddCert(o.CA())
	if _, err := ca.Leaf.Verify(opts); err == nil {
		t.Fatal("node 1's certificate verified against another cluster's CA")
	}
	if id, err := nodeOf(ca.Leaf); err != nil || id != 1 {
		t.Fatalf("nodeOf = %v, %v", id, err)
	}

	now = now.Add(50 * 24 * time.Hour)
	if c, _ := a.Certificate(); c != ca {
		t.Fatal("renewed with more than a third of its life left")
	}
	now = now.Add(11 * 24 * time.Hour)
	c, _ := a.Certificate()
	if c == ca || !c.Leaf.NotAfter.After(ca.Leaf.NotAfter) {
		t.Fatal("not renewed with less than a third of its life left")
	}
}
