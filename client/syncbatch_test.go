package client_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-fs/cairn/client"
)

func bigTree(n int) map[string]string {
	files := map[string]string{}
	for i := range n {
		files[fmt.Sprintf("d%d/f%04d.txt", i%7, i)] = fmt.Sprint("content ", i)
	}
	files["large.bin"] = strings.Repeat("L", client.BatchFileBytes+1) // over the bulk limit: a PUT
	return files
}

// Small files go in bulk uploads (archives of at most BatchFiles files),
// a large one with its own PUT; mtimes, modes and content types arrive.
func TestSyncBulk(t *testing.T) {
	srv, c := newEnv(t)
	dir := t.TempDir()
	tree := bigTree(client.BatchFiles + 100)
	writeTree(t, dir, tree)
	st, _ := runSync(t, c, client.SyncOptions{LocalDir: dir, Bucket: "b", Prefix: "p", Jobs: 16})
	if st.Uploaded != len(tree) || st.Failed != 0 {
		t.Fatalf("stats %+v", st)
	}
	checkRemote(t, srv, "p", tree)
	if n, puts := srv.Count("EXTRACT"), srv.Count("PUT"); n != 2 || puts != 1 {
		t.Fatalf("%d bulk uploads and %d PUTs, want 2 and 1", n, puts)
	}
	_, info, _ := srv.File("b", "p/d3/f0003.txt")
	if !info.ModTime.Equal(baseTime) || info.Mode != 0o644 || !strings.HasPrefix(info.ContentType, "text/plain") {
		t.Fatalf("info %+v", info)
	}
	// NoBatch: one PUT per file.
	srv.ResetCounts()
	writeFile(t, dir, "d1/f0001.txt", "changed", baseTime)
	writeFile(t, dir, "d2/f0002.txt", "changed too", baseTime)
	st, _ = runSync(t, c, client.SyncOptions{LocalDir: dir, Bucket: "b", Prefix: "p", NoBatch: true})
	if st.Uploaded != 2 || srv.Count("EXTRACT") != 0 || srv.Count("PUT") != 2 {
		t.Fatalf("NoBatch: %+v, %d bulk, %d PUTs", st, srv.Count("EXTRACT"), srv.Count("PUT"))
	}
}

// A server without bulk upload: the first archive is refused, every file
// goes with its own PUT, and no further archive is tried.
func TestSyncBulkFallback(t *testing.T) {
	srv, c := newEnv(t)
	srv.NoExtract(true)
	dir := t.TempDir()
	tree := bigTree(2*client.BatchFiles + 10)
	writeTree(t, dir, tree)
	st, _ := runSync(t, c, client.SyncOptions{LocalDir: dir, Bucket: "b", Jobs: 8}) // one archive at a time
	if st.Uploaded != len(tree) || st.Failed != 0 {
		t.Fatalf("stats %+v", st)
	}
	checkRemote(t, srv, "", tree)
	if n := srv.Count("PUT"); n != len(tree) {
		t.Fatalf("%d PUTs for %d files", n, len(tree))
	}
	if got := srv.Extracts(); got != 1 {
		t.Fatalf("%d bulk uploads tried, want 1", got)
	}
}

// Files failing inside a bulk upload fail alone, with the server's error.
func TestSyncBulkPerFileFailure(t *testing.T) {
	srv, c := newEnv(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a": "1", "b/full": "2", "c": "3"})
	srv.FailPut(func(_, p string) int {
		if p == "b/full" {
			return 507
		}
		return 0
	})
	rec := &recorder{}
	st, err := client.Sync(context.Background(), c, rec.opts(client.SyncOptions{LocalDir: dir, Bucket: "b"}))
	if err == nil || st.Uploaded != 2 || st.Failed != 1 || st.Failures[0].Path != "b/full" {
		t.Fatalf("err %v, stats %+v", err, st)
	}
	if srv.Count("EXTRACT") != 1 || srv.Count("PUT") != 0 {
		t.Fatalf("%d bulk, %d PUTs: a per-file failure must not resend the archive's files", srv.Count("EXTRACT"), srv.Count("PUT"))
	}
	if got := strings.Join(rec.paths(client.SyncUpload), ","); got != "a,c" {
		t.Fatalf("uploaded %s", got)
	}
}
