package node

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/transport"
)

func TestVersionMeta(t *testing.T) {
	v := decodeVersionMeta(encodeVersionMeta(MemberVersion{Release: "1.2.3", Commit: "abc", LogMax: 9, Known: true}))
	if v != (MemberVersion{Release: "1.2.3", Commit: "abc", LogMax: 9, Known: true}) {
		t.Fatalf("round trip: %+v", v)
	}
	// A binary from before the cluster version gossips no metadata: it
	// reads the baseline only.
	for _, b := range [][]byte{nil, {}, {2, 9}, {versionMetaFormat}} {
		if v := decodeVersionMeta(b); v.Known || v.LogMax != meta.LogVersionBaseline {
			t.Fatalf("meta %v: %+v", b, v)
		}
	}
	long := encodeVersionMeta(MemberVersion{Release: strings.Repeat("r", 1000), LogMax: 9})
	if len(long) > 511 {
		t.Fatalf("metadata of %d bytes", len(long))
	}
}

// TestLogVersionInCluster: a new cluster moves to this binary's log
// version by itself; health?verbose=1 shows every member's version; a
// joiner whose binary reads an older log version is refused with a clear
// message and leaves no record behind; a node whose data holds a newer
// log version than its binary reads refuses to start.
func TestLogVersionInCluster(t *testing.T) {
	const secret = "upgrade-test-cluster-secret-0123"
	n1 := startTestNode(t, secret)       // admin_test.go
	n2 := startJoiner(t, secret, n1.URL) // join_test.go
	deadline := time.Now().Add(20 * time.Second)
	for {
		v1, v2 := n1.cl.raft.Status().LogVersion, n2.cl.raft.Status().LogVersion
		if v1 == meta.LogVersionMax && v2 == meta.LogVersionMax {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("log versions %d, %d after 20 s; node 1 sees %+v", v1, v2, n1.versions())
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, err := http.Get(n1.URL + "/_cairn/health?verbose=1")
	must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var h struct {
		Status     string              `json:"status"`
		LogVersion int                 `json:"log_version"`
		Members    []MemberVersionView `json:"members"`
	}
	if err := json.Unmarshal(body, &h); err != nil || resp.StatusCode != 200 {
		t.Fatalf("health?verbose=1: %d %s (%v)", resp.StatusCode, body, err)
	}
	if h.Status != "ok" || h.LogVersion != meta.LogVersionMax || len(h.Members) != 2 {
		t.Fatalf("health?verbose=1: %s", body)
	}
	for _, m := range h.Members {
		if !m.Known || !m.Alive || m.LogMax != meta.LogVersionMax || m.Release == "" {
			t.Fatalf("member in health: %+v", m)
		}
	}
	if resp, err := http.Get(n1.URL + "/_cairn/health"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("plain health: %v %v", resp, err)
	} else if b, _ := io.ReadAll(resp.Body); string(b) != "ok" {
		t.Fatalf("plain health body %q", b)
	}

	// A joiner that reads only the baseline (a binary from before issue
	// 22 sends no log version) is refused.
	h1 := rpcHandler{c: n1.cl}
	const oldID = 4242
	_, err = h1.Join(context.Background(), oldID, transport.JoinRequest{ID: oldID, PublicURL: "http://127.0.0.1:9"})
	if !errors.Is(err, transport.ErrRefused) || !strings.Contains(err.Error(), "reads log versions up to 7") {
		t.Fatalf("old joiner: %v", err)
	}
	if _, err := n1.cl.reader.Node(oldID); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("refused joiner's record: %v", err)
	}
	// Over the wire, too: the joiner's client sees ErrRefused.
	_, err = n2.cl.client.Join(context.Background(), n1.URL, transport.JoinRequest{ID: oldID, PublicURL: "http://127.0.0.1:9",
		Extra: joinExtra{LogVersion: meta.LogVersionBaseline}.marshal()})
	if !errors.Is(err, transport.ErrRefused) {
		t.Fatalf("old joiner over the wire: %v", err)
	}
}

func TestCheckLogVersion(t *testing.T) {
	db := kv.NewMem()
	if err := checkLogVersion(meta.NewReader(db)); err != nil {
		t.Fatal(err)
	}
	// What a newer binary's OpSetLogVersion leaves in the state.
	b := db.NewBatch()
	must(t, b.Set([]byte("mlogversion"), []byte{meta.LogVersionMax + 1}))
	must(t, b.Commit(false))
	b.Close()
	err := checkLogVersion(meta.NewReader(db))
	if err == nil || !strings.Contains(err.Error(), "cannot be downgraded") {
		t.Fatalf("newer log version in the data: %v", err)
	}
}
