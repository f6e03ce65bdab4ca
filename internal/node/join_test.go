package node

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// startJoiner starts a node with secret that joins through join.
func startJoiner(t *testing.T, secret, join string) *Node {
	t.Helper()
	cfg := loneConfig(t) // start_test.go
	cfg.ClusterSecret, cfg.Join = secret, join
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func waitCh(n *Node) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- n.Wait() }()
	return ch
}

// TestJoinWrongSecretStops: a node whose cluster secret the member rejects
// stops within seconds with an error naming the secret's settings, instead
// of retrying the 401 forever.
func TestJoinWrongSecretStops(t *testing.T) {
	member := startTestNode(t, "join-test-cluster-secret-one")
	n := startJoiner(t, "join-test-cluster-secret-two", member.URL)
	select {
	case err := <-waitCh(n):
		if !errors.Is(err, ErrSecretRejected) || !strings.Contains(err.Error(), "CAIRN_CLUSTER_SECRET / --secret-file") ||
			!strings.Contains(err.Error(), member.URL) {
			t.Fatalf("Wait = %v; want ErrSecretRejected naming the member and the settings", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the node with the wrong secret did not stop within 10 s")
	}
}

// TestJoinUnreachableRetries: any other join failure (here nothing
// listens at the member's address) is retried; the node keeps running.
func TestJoinUnreachableRetries(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := ln.Addr().String()
	ln.Close()
	n := startJoiner(t, "join-test-cluster-secret-one", "http://"+addr)
	select {
	case err := <-waitCh(n):
		t.Fatalf("the node stopped on an unreachable member: %v", err)
	case <-time.After(3 * time.Second): // several join attempts (backoff 0.1, 0.2, 0.4, 0.8 s)
	}
}

// TestJoinClusterTLSMismatch: a node whose --cluster-tls differs from the
// member's stops within seconds with an error naming the flag, either way.
func TestJoinClusterTLSMismatch(t *testing.T) {
	const secret = "join-test-cluster-secret-one"
	for _, memberOff := range []bool{false, true} {
		cfg := loneConfig(t)
		cfg.ClusterSecret, cfg.ClusterTLSOff = secret, memberOff
		member, err := Start(cfg)
		must(t, err)
		t.Cleanup(func() { member.Close() })
		cfg = loneConfig(t)
		cfg.ClusterSecret, cfg.Join, cfg.ClusterTLSOff = secret, member.URL, !memberOff
		n, err := Start(cfg)
		must(t, err)
		t.Cleanup(func() { n.Close() })
		select {
		case err := <-waitCh(n):
			if !errors.Is(err, ErrClusterTLSMismatch) || !strings.Contains(err.Error(), "--cluster-tls") {
				t.Fatalf("member off=%v: Wait = %v; want ErrClusterTLSMismatch naming --cluster-tls", memberOff, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("member off=%v: the joiner did not stop within 10 s", memberOff)
		}
	}
}
