package e2e

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writeCert writes a certificate for 127.0.0.1 signed by ca (self-signed
// when ca is nil) and its key; it returns the certificate.
func writeCert(t *testing.T, certFile, keyFile string, serial int64, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "cairn-e2e"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: ca == nil}
	parent, signer := tmpl, key
	if ca != nil {
		parent, signer = ca, caKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}

// TestHTTPS: --tls-cert/--tls-key serve HTTPS with HTTP/2; a certificate
// renewed on disk is picked up on SIGHUP by new connections while an open
// connection keeps working.
func TestHTTPS(t *testing.T) {
	dir := t.TempDir()
	caFile, caKeyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")
	ca, caKey := writeCert(t, caFile, caKeyFile, 1, nil, nil)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeCert(t, certFile, keyFile, 100, ca, caKey)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	client := func() *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	}

	addr := freeAddr(t)
	s := startServerTLS(t, filepath.Join(dir, "data"), addr, client(), nil, "--tls-cert", certFile, "--tls-key", keyFile)

	old := client()
	get := func(c *http.Client, path string) (*http.Response, string) {
		t.Helper()
		resp, err := c.Get(s.url + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	resp, body := get(old, "/_cairn/health")
	if resp.StatusCode != 200 || resp.Proto != "HTTP/2.0" || strings.TrimSpace(body) != "ok" {
		t.Fatalf("health over HTTPS: %d %s %q", resp.StatusCode, resp.Proto, body)
	}
	if serial := resp.TLS.PeerCertificates[0].SerialNumber.Int64(); serial != 100 {
		t.Fatalf("certificate serial %d, want 100", serial)
	}
	req, _ := http.NewRequest("POST", s.url+"/_cairn/buckets", strings.NewReader(`{"name":"tls","public":true}`))
	req.Header.Set("Authorization", "Bearer "+adminKey)
	if r, err := old.Do(req); err != nil || r.StatusCode != 201 {
		t.Fatalf("bucket over HTTPS: %v %v", r, err)
	}
	req, _ = http.NewRequest("PUT", s.url+"/tls/a.txt", strings.NewReader("secret bytes"))
	req.Header.Set("Authorization", "Bearer "+adminKey)
	if r, err := old.Do(req); err != nil || r.StatusCode != 201 {
		t.Fatalf("PUT over HTTPS: %v %v", r, err)
	}
	if _, body := get(old, "/tls/a.txt"); body != "secret bytes" {
		t.Fatalf("GET over HTTPS: %q", body)
	}
	// HTTP/1.1 over TLS (no ALPN, as wrk and curl --http1.1): GETs on the
	// fast path, a range, then a PUT on the same connection (handed to
	// net/http) and the GET of what it wrote.
	h1 := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool}, MaxConnsPerHost: 1}}
	for range 3 {
		if resp, body := get(h1, "/tls/a.txt"); resp.ProtoMajor != 1 || body != "secret bytes" {
			t.Fatalf("HTTP/1.1 GET over HTTPS: %s %q", resp.Proto, body)
		}
	}
	req, _ = http.NewRequest("GET", s.url+"/tls/a.txt", nil)
	req.Header.Set("Range", "bytes=7-")
	if r, err := h1.Do(req); err != nil || r.StatusCode != 206 {
		t.Fatalf("range over HTTPS: %v %v", r, err)
	} else if b, _ := io.ReadAll(r.Body); string(b) != "bytes" {
		t.Fatalf("range over HTTPS: %q", b)
	} else {
		r.Body.Close()
	}
	req, _ = http.NewRequest("PUT", s.url+"/tls/b.txt", strings.NewReader("more bytes"))
	req.Header.Set("Authorization", "Bearer "+adminKey)
	if r, err := h1.Do(req); err != nil || r.StatusCode != 201 {
		t.Fatalf("HTTP/1.1 PUT over HTTPS: %v %v", r, err)
	} else {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	if _, body := get(h1, "/tls/b.txt"); body != "more bytes" {
		t.Fatalf("GET after the PUT over HTTPS: %q", body)
	}
	h1.CloseIdleConnections()

	// Renew the certificate on disk and SIGHUP: new connections see it,
	// the open one goes on.
	writeCert(t, certFile, keyFile, 200, ca, caKey)
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the renewed certificate", func() bool {
		c := client()
		defer c.CloseIdleConnections()
		resp, err := c.Get(s.url + "/_cairn/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64() == 200
	}, s)
	resp, body = get(old, "/tls/a.txt")
	if body != "secret bytes" || resp.TLS.PeerCertificates[0].SerialNumber.Int64() != 100 {
		t.Fatalf("the open connection after the reload: %q, serial %d", body, resp.TLS.PeerCertificates[0].SerialNumber.Int64())
	}
}

// startServerTLS is startServer for a node serving HTTPS, with env added
// to its environment: it waits for health through c.
func startServerTLS(t *testing.T, dir, addr string, c *http.Client, env []string, extra ...string) *server {
	t.Helper()
	s := &server{t: t, dir: dir, addr: addr, url: "https://" + addr, logs: &bytes.Buffer{}}
	args := append([]string{"server", "--data", dir, "--listen", addr}, extra...)
	s.cmd = exec.Command(cairnBin, args...)
	s.cmd.Env = append(append(os.Environ(), "CAIRN_ADMIN_KEY="+adminKey), env...)
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.stop() })
	waitHealthy(t, s, c, "HTTPS "+addr)
	return s
}
