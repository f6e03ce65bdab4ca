package node

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/client"
)

// flipInVolumes flips one byte in the middle of the first copy of content
// found in dir's volume files (behind the node's back, as bit rot would).
func flipInVolumes(t *testing.T, dir string, content []byte) {
	t.Helper()
	vols, _ := filepath.Glob(filepath.Join(dir, "blobs", "*.vol"))
	for _, p := range vols {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(b, content); i >= 0 {
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte{b[i+len(content)/2] ^ 0x01}, int64(i+len(content)/2)); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("content not found in %v", vols)
}

// TestCorruptBlobSingleNode: on a node without replicas, a file whose blob
// was flipped on disk while the node was down is an error (500), never a
// 200 with its bytes, on the fast path (small: lent from the map) and on
// net/http; health fails and the metrics and /_cairn/scrub count it.
// /_cairn/scrub needs the admin key, and POST starts a pass.
func TestCorruptBlobSingleNode(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir, cfg.Listen, cfg.AdminKey = t.TempDir(), "127.0.0.1:0", testKey
	cfg.GCInterval, cfg.Logger = time.Hour, slog.New(slog.DiscardHandler)
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := client.New(n.URL, testKey)
	if _, err := c.CreateBucket(ctx, client.BucketInfo{Name: "bkt", Public: true}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(8, 8))
	small, large := make([]byte, 20_000), make([]byte, 300_000)
	for _, b := range [][]byte{small, large} {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	}
	for name, b := range map[string][]byte{"small": small, "large": large} {
		if _, err := c.Put(ctx, "bkt", name, bytes.NewReader(b), int64(len(b)), client.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	flipInVolumes(t, cfg.DataDir, small)
	flipInVolumes(t, cfg.DataDir, large)
	n, err = Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c = client.New(n.URL, testKey)

	for _, path := range []string{"/bkt/small", "/bkt/large"} {
		for _, rng := range []string{"", "bytes=15000-15099"} {
			for range 2 { // the first read finds it, the second finds it gone
				req, _ := http.NewRequest(http.MethodGet, n.URL+path, nil)
				if rng != "" {
					req.Header.Set("Range", rng)
				}
				code, body := do(t, req)
				if code != http.StatusInternalServerError || !strings.Contains(body, "DataCorrupt") {
					t.Fatalf("GET %s (Range %q): %d %.80q, want 500 DataCorrupt", path, rng, code, body)
				}
			}
		}
	}
	if code, body := status(t, http.MethodGet, n.URL+"/_cairn/health", ""); code != http.StatusServiceUnavailable || !strings.Contains(body, "2 corrupt blob copies") {
		t.Fatalf("health: %d %q", code, body)
	}
	if _, body := status(t, http.MethodGet, n.URL+"/_cairn/metrics", ""); !strings.Contains(body, "\ncairn_blob_corrupt_copies_total 2\n") || !strings.Contains(body, "\ncairn_scrub_running ") {
		t.Fatalf("metrics lack the corrupt copies or the scrub:\n%s", body)
	}

	if code, _ := status(t, http.MethodGet, n.URL+"/_cairn/scrub", ""); code != http.StatusUnauthorized {
		t.Fatalf("scrub status without the key: %d", code)
	}
	if _, err := client.New(n.URL, "wrong-key-0123456789").StartScrub(ctx); !errors.Is(err, client.ErrForbidden) && !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("StartScrub with a wrong key: %v", err)
	}
	st, err := c.Scrub(ctx)
	if err != nil || st.CorruptCopies != 2 || st.Running || st.NextPass.IsZero() {
		t.Fatalf("Scrub: %+v, %v", st, err)
	}
	cs, err := c.Status(ctx) // cairn status shows the same report
	if err != nil || len(cs.Nodes) != 1 || cs.Nodes[0].Report == nil {
		t.Fatalf("Status: %+v, %v", cs, err)
	}
	if inStatus := cs.Nodes[0].Report.Scrub; inStatus.CorruptCopies != 2 || !inStatus.NextPass.Equal(st.NextPass) {
		t.Fatalf("scrub in the status view: %+v", inStatus)
	}
	st, err = c.StartScrub(ctx)
	if err != nil || !st.Started || !st.Running || st.PassStarted.IsZero() {
		t.Fatalf("StartScrub: %+v, %v", st, err)
	}
	if code, _ := status(t, http.MethodDelete, n.URL+"/_cairn/scrub", testKey); code != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE /_cairn/scrub: %d", code)
	}
}

func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatalf("%s %s: status %d, then %v (a cut body)", req.Method, req.URL, resp.StatusCode, err)
	}
	return resp.StatusCode, b.String()
}
