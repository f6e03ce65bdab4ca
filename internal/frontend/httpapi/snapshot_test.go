package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/cairn-fs/cairn/internal/store"
)

// TestSnapshotReads: /_snapshots/B/NAME/PATH serves a snapshot's files as
// they were (fast path and net/http alike), lists its directories, keeps
// the bucket's access rules and refuses writes.
func TestSnapshotReads(t *testing.T) {
	st := realStore(t)
	ctx := context.Background()
	must(t, st.CreateBucket(ctx, store.BucketInfo{Name: "priv"}))
	put := func(bucket, path, data string) {
		_, _, err := st.Put(ctx, bucket, path, strings.NewReader(data), store.PutOptions{Size: int64(len(data))})
		must(t, err)
	}
	put("pub", "site/index.php", "v1")
	put("priv", "secret.txt", "s1")
	_, err := st.SnapshotCreate(ctx, "pub", "before")
	must(t, err)
	_, err = st.SnapshotCreate(ctx, "priv", "before")
	must(t, err)
	put("pub", "site/index.php", "hacked")
	put("pub", "site/new.php", "new")
	for _, fast := range []bool{true, false} {
		base := realServer(t, st, func(c *Config) { c.DisableFastPath = !fast }, nil)
		do := func(method, path, key string) (int, string) {
			req, err := http.NewRequest(method, "http://"+base+path, nil)
			must(t, err)
			if key != "" {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			resp, err := http.DefaultClient.Do(req)
			must(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp.StatusCode, string(b)
		}
		for _, tc := range []struct {
			method, path, key string
			code              int
			body              string
		}{
			{"GET", "/_snapshots/pub/before/site/index.php", "", 200, "v1"},
			{"GET", "/pub/site/index.php", "", 200, "hacked"},
			{"GET", "/_snapshots/pub/before/site/new.php", "", 404, ""},
			{"GET", "/_snapshots/pub/nosuch/site/index.php", "", 404, ""},
			{"GET", "/_snapshots/priv/before/secret.txt", "", 401, ""},
			{"GET", "/_snapshots/priv/before/secret.txt", testKey, 200, "s1"},
			{"PUT", "/_snapshots/pub/before/site/index.php", testKey, 405, ""},
			{"DELETE", "/_snapshots/pub/before/site/index.php", testKey, 405, ""},
		} {
			code, body := do(tc.method, tc.path, tc.key)
			if code != tc.code || (tc.body != "" && body != tc.body) {
				t.Fatalf("fast=%v %s %s: %d %q, want %d %q", fast, tc.method, tc.path, code, body, tc.code, tc.body)
			}
		}
		code, body := do("GET", "/_snapshots/pub/before/site/", "")
		var l store.ListResult
		if code != 200 || json.Unmarshal([]byte(body), &l) != nil || len(l.Entries) != 1 || l.Entries[0].Path != "site/index.php" {
			t.Fatalf("fast=%v listing: %d %s", fast, code, body)
		}
		if code, body := do("GET", "/_snapshots/pub/before/site/index.php", ""); !bytes.Equal([]byte(body), []byte("v1")) || code != 200 {
			t.Fatal(code, body)
		}
	}
}
