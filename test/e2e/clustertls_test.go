package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// clusterServerName is transport.ClusterServerName: the SNI peers send.
const clusterServerName = "cluster.cairn.invalid"

// peerCert makes a TLS handshake with addr as a peer would (the cluster
// server name, no client certificate) and returns the server's chain.
func peerCert(t *testing.T, addr string) []*x509.Certificate {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: clusterServerName, InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("TLS handshake with %s as a peer: %v", addr, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates
}

// TestClusterTLS: by default a cluster's RPC runs over TLS on the public
// port, with certificates no one made by hand: each node presents a
// certificate naming its ID, issued by one cluster CA; replication works
// over it; an RPC in clear is refused (426); a node started with
// --cluster-tls=off cannot join it and says why.
func TestClusterTLS(t *testing.T) {
	base := t.TempDir()
	nodes, v := startThreeNodes(t, base, `{"name":"web","public":true}`)
	big := bytes.Repeat([]byte("encrypted between nodes "), 300_000) // 7.2 MB: two blobs
	putOK(t, nodes[1].url+"/web/big.bin", big, nodes...)
	for _, s := range nodes {
		getOK(t, s.url+"/web/big.bin", big, nodes...)
	}

	var caKey []byte
	for _, n := range v.Nodes {
		addr := strings.TrimPrefix(n.URL, "http://")
		chain := peerCert(t, addr)
		leaf := chain[0]
		if len(leaf.URIs) != 1 || leaf.URIs[0].String() != "cairn://node/"+n.ID {
			t.Fatalf("node %s at %s: certificate names %v, want cairn://node/%s", n.ID, addr, leaf.URIs, n.ID)
		}
		if !strings.HasPrefix(leaf.Issuer.CommonName, "Cairn cluster CA ") || len(chain) != 2 {
			t.Fatalf("node %s: issuer %q, chain of %d", n.ID, leaf.Issuer.CommonName, len(chain))
		}
		if err := leaf.CheckSignatureFrom(chain[1]); err != nil {
			t.Fatalf("node %s: certificate not signed by the CA it sends: %v", n.ID, err)
		}
		if caKey == nil {
			caKey = chain[1].RawSubjectPublicKeyInfo
		} else if !bytes.Equal(caKey, chain[1].RawSubjectPublicKeyInfo) {
			t.Fatalf("node %s: another CA key than node 1's", n.ID)
		}
		// An RPC in clear on the public port is refused, and says why.
		status, body, _, err := timed("POST", n.URL+"/_cairn/rpc/raft", []byte("x"))
		if err != nil || status != http.StatusUpgradeRequired || !strings.Contains(string(body), "--cluster-tls") {
			t.Fatalf("RPC in clear to %s: %d %v %s", addr, status, err, body)
		}
		// Clients in clear are served as before on the same port.
		if status, _, _, err := timed("GET", n.URL+"/web/big.bin", nil); err != nil || status != 200 {
			t.Fatalf("GET in clear from %s: %d %v", addr, status, err)
		}
	}

	// A node with --cluster-tls=off stops at once, naming the flag.
	cmd := exec.Command(cairnBin, "server", "--data", filepath.Join(base, "off"), "--listen", freeAddr(t),
		"--gossip-listen", freeAddr(t), "--cluster-tls=off", "--join", nodes[0].url)
	cmd.Env = append(cmd.Environ(), "CAIRN_ADMIN_KEY="+adminKey, "CAIRN_CLUSTER_SECRET="+clusterSecret)
	out := make(chan []byte, 1)
	go func() { b, _ := cmd.CombinedOutput(); out <- b }()
	select {
	case b := <-out:
		if cmd.ProcessState.ExitCode() == 0 || !strings.Contains(string(b), "--cluster-tls") {
			t.Fatalf("a --cluster-tls=off joiner: exit %d, output:\n%s", cmd.ProcessState.ExitCode(), b)
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("a --cluster-tls=off joiner did not stop within 20 s")
	}
}

// TestClusterTLSOverHTTPS: with --tls-cert on the public port and no
// --cluster-listen, peers share the HTTPS port (they ask for the cluster
// server name and get the node certificate; browsers get the public one).
// And --cluster-tls=off still runs a cluster in clear.
func TestClusterTLSOverHTTPS(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := writeCert(t, filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key"), 1, nil, nil)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeCert(t, certFile, keyFile, 100, ca, caKey)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	env := []string{"CAIRN_CLUSTER_SECRET=" + clusterSecret}
	var nodes []*server
	for i := 1; i <= 2; i++ {
		args := []string{"--tls-cert", certFile, "--tls-key", keyFile, "--gossip-listen", freeAddr(t)}
		if i > 1 {
			args = append(args, "--join", nodes[0].url)
		}
		nodes = append(nodes, startServerTLS(t, filepath.Join(dir, fmt.Sprint("n", i)), freeAddr(t), client, env, args...))
	}
	req := func(method, url string, body []byte) (int, []byte) {
		r, _ := http.NewRequest(method, url, bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+adminKey)
		resp, err := client.Do(r)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.Bytes()
	}
	waitFor(t, 30*time.Second, "bucket creation over HTTPS", func() bool {
		st, _ := req("POST", nodes[0].url+"/_cairn/buckets", []byte(`{"name":"web"}`))
		return st == 201 || st == 409
	}, nodes...)
	data := bytes.Repeat([]byte("over the HTTPS port "), 10_000)
	waitFor(t, 20*time.Second, "PUT through node 2", func() bool {
		st, _ := req("PUT", nodes[1].url+"/web/a.bin", data)
		return st == 201 || st == 200
	}, nodes...)
	waitFor(t, 10*time.Second, "GET through node 1", func() bool {
		st, b := req("GET", nodes[0].url+"/web/a.bin", nil)
		return st == 200 && bytes.Equal(b, data)
	}, nodes...)
	for _, s := range nodes {
		if leaf := peerCert(t, s.addr)[0]; len(leaf.URIs) != 1 || leaf.URIs[0].Scheme != "cairn" {
			t.Fatalf("%s: a peer got the certificate %q, not the node's", s.addr, leaf.Subject.CommonName)
		}
	}

	// --cluster-tls=off: the same in clear (HMAC only), on plain HTTP.
	var off []*server
	for i := 1; i <= 2; i++ {
		args := []string{"--cluster-tls=off"}
		if i > 1 {
			args = append(args, "--join", off[0].url)
		}
		off = append(off, startCairn(t, "server", filepath.Join(dir, fmt.Sprint("off", i)), freeAddr(t), args...))
	}
	waitMembers(t, off[0], 2, off...)
	waitFor(t, 30*time.Second, "bucket creation", func() bool {
		resp, _ := do(t, "POST", off[0].url+"/_cairn/buckets", []byte(`{"name":"web"}`), auth()...)
		return resp.StatusCode == 201 || resp.StatusCode == 409
	}, off...)
	putOK(t, off[1].url+"/web/a.bin", data, off...)
	getOK(t, off[0].url+"/web/a.bin", data, off...)
	if _, err := tls.Dial("tcp", off[0].addr, &tls.Config{ServerName: clusterServerName, InsecureSkipVerify: true}); err == nil {
		t.Fatal("a --cluster-tls=off node answered a TLS handshake on its public port")
	}
}
