package node

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/meta"
)

// reviewCert writes a self-signed certificate for 127.0.0.1 (the public
// --tls-cert of the tests) and returns the files.
func reviewCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "public"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	must(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	must(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	must(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600))
	return certFile, keyFile
}

// TestJoinClusterTLSMismatchHTTPS: a joiner with node-to-node TLS meeting
// a --cluster-tls=off member that serves HTTPS (--tls-cert) gets the
// public certificate, not a node's: it stops with ErrClusterTLSMismatch,
// not a wrong-secret error.
func TestJoinClusterTLSMismatchHTTPS(t *testing.T) {
	const secret = "review-cluster-secret-0123456789"
	certFile, keyFile := reviewCert(t)
	cfg := loneConfig(t)
	cfg.ClusterSecret, cfg.ClusterTLSOff = secret, true
	cfg.TLSCert, cfg.TLSKey = certFile, keyFile
	cfg.ClusterListen = "127.0.0.1:0" // required with --tls-cert and --cluster-tls=off
	member, err := Start(cfg)
	must(t, err)
	t.Cleanup(func() { member.Close() })
	cfg = loneConfig(t)
	cfg.ClusterSecret, cfg.Join = secret, member.URL
	n, err := Start(cfg)
	must(t, err)
	t.Cleanup(func() { n.Close() })
	select {
	case err := <-waitCh(n):
		if !errors.Is(err, ErrClusterTLSMismatch) {
			t.Errorf("join %s: Wait = %v\n  want ErrClusterTLSMismatch", member.URL, err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("the joiner did not stop within 10 s")
	}
}

// recordingHTTP is a plain HTTP peer that records request heads.
func recordingHTTP(t *testing.T) (url string, heads func() string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	var buf bytes.Buffer
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					mu.Lock()
					buf.WriteString(line)
					mu.Unlock()
					if err != nil || line == "\r\n" {
						break
					}
				}
				c.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
			}()
		}
	}()
	return "http://" + ln.Addr().String(), func() string { mu.Lock(); defer mu.Unlock(); return buf.String() }
}

// TestPeerCallsOverClusterTLS: with node-to-node TLS on (the default), a
// mount's statfs (clusterCapacity) asks the other data nodes for their
// disk over TLS: the admin key it carries never crosses in clear.
func TestPeerCallsOverClusterTLS(t *testing.T) {
	n := startTestNode(t, "review-cluster-secret-0123456789")
	peerURL, heads := recordingHTTP(t)
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		res, err := n.cl.raft.Propose(ctx, meta.Command{Op: meta.OpSetNode, TimeNs: time.Now().UnixNano(),
			Node: &meta.Node{ID: 99, URL: peerURL}})
		cancel()
		if err == nil && res.Err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("propose: %v %v", err, res.Err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, _, err := n.clusterCapacity(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h := heads(); strings.Contains(h, "Bearer "+n.AdminKey) {
		t.Errorf("the admin key crossed to a peer in clear:\n%s", h)
	}
}

// logRecorder keeps the messages of records at level Error.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
		l.mu.Lock()
		l.msgs = append(l.msgs, b.String())
		l.mu.Unlock()
	}
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// TestCloseLogsNoError: closing a cluster node with the default settings
// logs no error (the TLS half of the public port is shut down before the
// public server closes the listener they share).
func TestCloseLogsNoError(t *testing.T) {
	rec := &logRecorder{}
	cfg := loneConfig(t)
	cfg.ClusterSecret = "review-cluster-secret-0123456789"
	cfg.Logger = slog.New(rec)
	n, err := Start(cfg)
	must(t, err)
	time.Sleep(200 * time.Millisecond)
	n.Close()
	time.Sleep(200 * time.Millisecond)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, m := range rec.msgs {
		if strings.Contains(m, "node-to-node TLS on the public port stopped") {
			t.Errorf("error logged by a clean Close: %s", m)
		}
	}
}

// TestCloseClosesSilentConns: a connection that has sent nothing yet,
// held by the split listener's peek, is closed by Close as the fast path
// closes its idle connections (not left to --read-header-timeout).
func TestCloseClosesSilentConns(t *testing.T) {
	for _, off := range []bool{true, false} {
		t.Run(map[bool]string{true: "tls-off", false: "tls-on"}[off], func(t *testing.T) { closeSilent(t, off) })
	}
}

func closeSilent(t *testing.T, off bool) {
	cfg := loneConfig(t)
	cfg.ClusterSecret, cfg.ClusterTLSOff = "review-cluster-secret-0123456789", off
	n, err := Start(cfg)
	must(t, err)
	c, err := net.Dial("tcp", strings.TrimPrefix(n.URL, "http://"))
	must(t, err)
	defer c.Close()
	time.Sleep(100 * time.Millisecond)
	n.Close()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	var b [1]byte
	_, err = c.Read(b[:])
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("a silent connection is still open 2 s after Close")
	}
}
