package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/client"
	"github.com/cairn-fs/cairn/internal/consensus"
	"github.com/cairn-fs/cairn/internal/frontend/admin"
	"github.com/cairn-fs/cairn/internal/meta"
)

const testKey = "node-admin-test-key-0123456789"

func startTestNode(t *testing.T, secret string) *Node {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.AdminKey = testKey
	cfg.ClusterSecret = secret
	cfg.GCInterval = time.Hour
	cfg.Logger = slog.New(slog.DiscardHandler)
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func status(t *testing.T, method, url, key string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestNodesAdminSingleNode covers /_cairn/nodes on a one-node cluster:
// listing, auth, the refusals (last voter, this node, last data node),
// drain and activate, and a node without a cluster.
func TestNodesAdminSingleNode(t *testing.T) {
	n := startTestNode(t, "node-admin-test-cluster-secret")
	c := client.New(n.URL, testKey)
	ctx := context.Background()

	var ci client.ClusterInfo
	deadline := time.Now().Add(20 * time.Second)
	for {
		var err error
		ci, err = c.Nodes(ctx)
		if err == nil && len(ci.Nodes) == 1 && ci.Nodes[0].URL != "" && ci.Leader != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no registered leader: %+v %v", ci, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	self := ci.Nodes[0]
	if self.ID != ci.Self || self.ID != n.cl.id || !self.Leader || !self.Self || self.Role != client.NodeVoter ||
		self.State != client.NodeActive || self.URL != n.URL || self.Weight != 1 || ci.AppliedIndex == 0 {
		t.Fatalf("view: %+v", ci)
	}

	// Auth: same rules as /_cairn/buckets.
	if st, _ := status(t, "GET", n.URL+"/_cairn/nodes", ""); st != 401 {
		t.Fatalf("no key: %d", st)
	}
	if st, body := status(t, "GET", n.URL+"/_cairn/nodes", "wrong-key-0123456789"); st != 403 || !strings.Contains(body, `"code":"AccessDenied"`) {
		t.Fatalf("wrong key: %d %s", st, body)
	}
	if st, body := status(t, "GET", n.URL+"/_cairn/nodes/abc", testKey); st != 400 || !strings.Contains(body, `"code":"BadRequest"`) {
		t.Fatalf("bad id: %d %s", st, body)
	}
	if st, _ := status(t, "PUT", n.URL+"/_cairn/nodes", testKey); st != 405 {
		t.Fatalf("PUT: %d", st)
	}
	if _, err := c.Node(ctx, 12345); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("unknown node: %v", err)
	}
	if _, err := c.RemoveNode(ctx, 12345, false); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("remove unknown node: %v", err)
	}
	if _, err := c.DrainNode(ctx, 12345, false); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("drain unknown node: %v", err)
	}

	// The last voter cannot go, forced or not.
	for _, force := range []bool{false, true} {
		_, err := c.RemoveNode(ctx, self.ID, force)
		var ae *client.Error
		if !errors.As(err, &ae) || ae.Status != 409 || ae.Code != "LastVoter" {
			t.Fatalf("remove last voter (force=%t): %v", force, err)
		}
	}

	// Draining the only data node needs force; activate undoes it.
	_, err := c.DrainNode(ctx, self.ID, false)
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Status != 409 || ae.Code != "LastDataNode" {
		t.Fatalf("drain last data node: %v", err)
	}
	got, err := c.DrainNode(ctx, self.ID, true)
	if err != nil || got.State != client.NodeDraining || got.URL != n.URL {
		t.Fatalf("forced drain: %+v %v", got, err)
	}
	if rec, err := n.cl.reader.Node(self.ID); err != nil || rec.JoinedNs == 0 || rec.URL != n.URL {
		t.Fatalf("record after drain: %+v %v", rec, err)
	}
	if got, err = c.DrainNode(ctx, self.ID, false); err != nil || got.State != client.NodeDraining {
		t.Fatalf("drain again (idempotent): %+v %v", got, err)
	}
	if got, err = c.ActivateNode(ctx, self.ID); err != nil || got.State != client.NodeActive {
		t.Fatalf("activate: %+v %v", got, err)
	}
}

func TestNodesAdminNotACluster(t *testing.T) {
	n := startTestNode(t, "")
	c := client.New(n.URL, testKey)
	_, err := c.Nodes(context.Background())
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Status != 501 || ae.Code != "NotACluster" || !strings.Contains(ae.Message, "not a cluster") {
		t.Fatalf("local node: %v", err)
	}
	// Auth comes first.
	if st, _ := status(t, "GET", n.URL+"/_cairn/nodes", ""); st != 401 {
		t.Fatalf("no key: %d", st)
	}
}

// TestAdminErrKinds: the cluster's errors reach the admin front end with
// its kinds, their own chain and their text unchanged (a 409's message is
// the text).
func TestAdminErrKinds(t *testing.T) {
	for _, tc := range []struct{ err, kind error }{
		{fmt.Errorf("%w: 5 is the last voter", consensus.ErrBadMembership), admin.ErrBadMembership},
		{fmt.Errorf("read node: %w", meta.ErrNotFound), admin.ErrNoSuchNode},
		{meta.ErrInvalid, admin.ErrInvalid},
		{consensus.ErrUnavailable, admin.ErrUnavailable},
		{fmt.Errorf("propose: %w", consensus.ErrStopped), admin.ErrUnavailable},
	} {
		got := adminErr(tc.err)
		if !errors.Is(got, tc.kind) || !errors.Is(got, tc.err) || got.Error() != tc.err.Error() {
			t.Errorf("adminErr(%v) = %v: not %v", tc.err, got, tc.kind)
		}
	}
	other := errors.New("disk on fire")
	if got := adminErr(other); got != other || adminErr(nil) != nil {
		t.Errorf("an error of no kind changed: %v", got)
	}
}
