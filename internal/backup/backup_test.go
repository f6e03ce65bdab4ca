package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/client"
)

// fakeCluster serves what Backup reads of a Cairn node: the snapshot
// calls and /_snapshots/web/NAME/ (listing, paginated, and files), with
// faults to inject. Every snapshot shows the current files.
type fakeCluster struct {
	t     *testing.T
	mu    sync.Mutex
	files map[string][]byte
	mtime time.Time
	snaps map[string]bool
	// failGet answers 500 to a GET of these paths; corrupt flips a byte
	// of their content (the listing keeps the right digest).
	failGet, corrupt map[string]bool
	// onGet, if set, is called before each file GET.
	onGet func(p string)
	gets  atomic.Int64
	page  int
}

func newFakeCluster(t *testing.T, files map[string][]byte) (*fakeCluster, *client.Client) {
	f := &fakeCluster{t: t, files: files, mtime: time.Unix(1700000000, 5).UTC(), snaps: map[string]bool{},
		failGet: map[string]bool{}, corrupt: map[string]bool{}, page: 7}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, client.New(srv.URL, "key")
}

func (f *fakeCluster) set(p string, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if data == nil {
		delete(f.files, p)
		return
	}
	f.files[p] = data
}

func (f *fakeCluster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	writeJSON := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	snap := func(name string) map[string]any {
		return map[string]any{"bucket": "web", "name": name, "id": "1", "created": f.mtime, "index": 7}
	}
	switch p := r.URL.Path; {
	case p == "/_cairn/snapshots/web" && r.Method == http.MethodPost:
		var body struct{ Name string }
		json.NewDecoder(r.Body).Decode(&body)
		if f.snaps[body.Name] {
			writeJSON(409, map[string]string{"error": "exists", "code": "Exists"})
			return
		}
		f.snaps[body.Name] = true
		writeJSON(201, snap(body.Name))
	case p == "/_cairn/snapshots/web" && r.Method == http.MethodGet:
		var out []map[string]any
		for n := range f.snaps {
			out = append(out, snap(n))
		}
		writeJSON(200, out)
	case strings.HasPrefix(p, "/_cairn/snapshots/web/") && r.Method == http.MethodDelete:
		delete(f.snaps, strings.TrimPrefix(p, "/_cairn/snapshots/web/"))
		w.WriteHeader(204)
	case strings.HasPrefix(p, "/_snapshots/web/"):
		name, rest, _ := strings.Cut(strings.TrimPrefix(p, "/_snapshots/web/"), "/")
		if !f.snaps[name] {
			writeJSON(404, map[string]string{"error": "no snapshot", "code": "NoSuchKey"})
			return
		}
		if rest == "" {
			if r.URL.Query().Get("recursive") != "1" {
				f.t.Errorf("listing without recursive=1: %s", r.URL)
			}
			var paths []string
			for p := range f.files {
				if p > r.URL.Query().Get("after") {
					paths = append(paths, p)
				}
			}
			sort.Strings(paths)
			res := client.ListResult{Entries: []client.ObjectInfo{}}
			if len(paths) > f.page {
				paths, res.Truncated, res.NextToken = paths[:f.page], true, paths[f.page-1]
			}
			for _, p := range paths {
				res.Entries = append(res.Entries, client.ObjectInfo{Bucket: "web", Path: p, Size: int64(len(f.files[p])),
					ModTime: f.mtime, SHA256: hexSum(f.files[p]), Mode: 0o640})
			}
			writeJSON(200, res)
			return
		}
		data, ok := f.files[rest]
		if !ok {
			writeJSON(404, map[string]string{"error": "no such key", "code": "NoSuchKey"})
			return
		}
		f.gets.Add(1)
		if f.onGet != nil {
			f.mu.Unlock()
			f.onGet(rest)
			f.mu.Lock()
		}
		if f.failGet[rest] {
			writeJSON(500, map[string]string{"error": "injected", "code": "InternalError"})
			return
		}
		if f.corrupt[rest] {
			data = bytes.Clone(data)
			data[len(data)/2] ^= 0x55
		}
		sum := sha256.Sum256(f.files[rest])
		w.Header().Set("Repr-Digest", "sha-256=:"+base64.StdEncoding.EncodeToString(sum[:])+":")
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.Write(data)
	default:
		f.t.Errorf("unexpected request %s %s", r.Method, r.URL)
		w.WriteHeader(404)
	}
}

// tree makes n files of pseudo-random content in a few directories, and
// one larger than a bulk upload's file (streamed).
func tree(n int) map[string][]byte {
	rng := rand.New(rand.NewSource(int64(n)))
	files := map[string][]byte{}
	for i := range n {
		data := make([]byte, 1+rng.Intn(3000))
		rng.Read(data)
		files[fmt.Sprintf("d%d/s%d/f%03d.txt", i%3, i%2, i)] = data
	}
	big := make([]byte, client.BatchFileBytes+1234)
	rng.Read(big)
	files["big/blob.bin"] = big
	return files
}

// checkDir checks that dir holds exactly files (plus MetaDir), with the
// fake's mode and mtime, and a manifest naming exactly them.
func checkDir(t *testing.T, dir string, f *fakeCluster) {
	t.Helper()
	got := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() && rel == MetaDir {
			return fs.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(p)
		got[filepath.ToSlash(rel)] = data
		info, _ := d.Info()
		if info.Mode().Perm() != 0o640 || !info.ModTime().Equal(f.mtime) {
			t.Errorf("%s: mode %v mtime %v", rel, info.Mode(), info.ModTime())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(f.files) {
		t.Fatalf("%s holds %d files, want %d", dir, len(got), len(f.files))
	}
	for p, want := range f.files {
		if !bytes.Equal(got[p], want) {
			t.Fatalf("%s: %d bytes differ from the snapshot's %d", p, len(got[p]), len(want))
		}
	}
	m, files := loadManifest(t, dir)
	if len(files) != len(f.files) || m.FileCount != len(files) {
		t.Fatalf("manifest names %d files (counts %d), want %d", len(files), m.FileCount, len(f.files))
	}
	for p, want := range f.files {
		if files[p].SHA256 != hexSum(want) || files[p].Size != int64(len(want)) {
			t.Fatalf("manifest entry %s: %+v", p, files[p])
		}
	}
}

// loadManifest reads the manifest of the backup in dir whole.
func loadManifest(t *testing.T, dir string) (*Manifest, map[string]Entry) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, MetaDir, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	return decodeManifest(t, data)
}

func runBackup(t *testing.T, c *client.Client, dir string, mod func(*Config)) (Stats, error) {
	t.Helper()
	dest, err := OpenDir(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer dest.Close()
	cfg := Config{Source: c, Bucket: "web", Dest: dest, Jobs: 4}
	if mod != nil {
		mod(&cfg)
	}
	return Backup(context.Background(), cfg)
}

func TestBackupToDirIncremental(t *testing.T) {
	f, c := newFakeCluster(t, tree(40))
	dir := t.TempDir()
	st, err := runBackup(t, c, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Copied != 41 || st.Unchanged != 0 || !st.ManifestWritten || !st.SnapshotTaken || st.SnapshotKept {
		t.Fatalf("first backup: %+v", st)
	}
	checkDir(t, dir, f)
	if len(f.snaps) != 0 {
		t.Fatalf("the snapshot taken was not deleted: %v", f.snaps)
	}
	if _, err := os.Stat(filepath.Join(dir, MetaDir, JournalName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("journal left after a complete backup: %v", err)
	}

	// Nothing changed: nothing read, nothing copied.
	gets := f.gets.Load()
	if st, err = runBackup(t, c, dir, nil); err != nil || st.Copied != 0 || st.Unchanged != 41 || f.gets.Load() != gets {
		t.Fatalf("unchanged: %+v %v, %d GETs", st, err, f.gets.Load()-gets)
	}

	// Two changed, one new, one gone (its directory goes too), one moved
	// (copied from where the destination holds it, not fetched).
	f.set("d0/s0/f000.txt", []byte("changed"))
	f.set("d1/s1/f001.txt", []byte("changed too"))
	f.set("new/n.txt", []byte("new"))
	f.set("big/blob.bin", nil)
	f.set("moved/f002.txt", f.files["d2/s0/f002.txt"])
	f.set("d2/s0/f002.txt", nil)
	gets = f.gets.Load()
	st, err = runBackup(t, c, dir, nil)
	if err != nil || st.Copied != 4 || st.LocalCopies != 1 || st.Deleted != 2 || st.Unchanged != 37 {
		t.Fatalf("incremental: %+v %v", st, err)
	}
	if n := f.gets.Load() - gets; n != 3 {
		t.Fatalf("incremental read %d files from the snapshot, want 3", n)
	}
	checkDir(t, dir, f)
	if _, err := os.Stat(filepath.Join(dir, "big")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the emptied directory stays: %v", err)
	}
}

func TestBackupInterruptedResumes(t *testing.T) {
	f, c := newFakeCluster(t, tree(30))
	dir := t.TempDir()
	f.failGet["d0/s0/f000.txt"] = true
	f.failGet["d1/s1/f001.txt"] = true
	st, err := runBackup(t, c, dir, nil)
	if !errors.Is(err, ErrIncomplete) || len(st.Failures) != 2 || st.Copied != 29 || st.ManifestWritten {
		t.Fatalf("backup with failing reads: %+v %v", st, err)
	}
	if _, err := os.Stat(filepath.Join(dir, MetaDir, ManifestName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a manifest after an incomplete first backup: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, MetaDir, JournalName))
	if err != nil {
		t.Fatal(err)
	}
	if j, err := readJournal(bytes.NewReader(data), func(string) error { return nil }); err != nil || j.Paths != 31 {
		t.Fatalf("journal: %v, %v", j, err)
	}
	if len(f.snaps) != 0 {
		t.Fatalf("the snapshot of a failed backup was not deleted: %v", f.snaps)
	}

	// The next run checks what the first one wrote and copies the rest.
	clear(f.failGet)
	gets := f.gets.Load()
	st, err = runBackup(t, c, dir, nil)
	if err != nil || st.Copied != 2 || st.Checked != 29 || !st.ManifestWritten {
		t.Fatalf("resumed: %+v %v", st, err)
	}
	if n := f.gets.Load() - gets; n != 2 {
		t.Fatalf("the resumed run read %d files, want 2", n)
	}
	checkDir(t, dir, f)
	if _, err := os.Stat(filepath.Join(dir, MetaDir, JournalName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("journal left: %v", err)
	}

	// An incomplete later run leaves the manifest exactly as it was, and a
	// file it did overwrite is pending, so not trusted.
	before, _ := os.ReadFile(filepath.Join(dir, MetaDir, ManifestName))
	f.set("d0/s1/f003.txt", []byte("v2"))
	f.set("d1/s0/f004.txt", []byte("v2 too"))
	f.failGet["d1/s0/f004.txt"] = true
	if _, err := runBackup(t, c, dir, nil); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("second backup with a failing read: %v", err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, MetaDir, ManifestName))
	if !bytes.Equal(before, after) {
		t.Fatal("an incomplete backup changed the manifest")
	}
	// Back to the content the manifest names: without the journal the run
	// would trust the manifest and leave "v2" in place.
	f.set("d0/s1/f003.txt", tree(30)["d0/s1/f003.txt"])
	clear(f.failGet)
	if st, err = runBackup(t, c, dir, nil); err != nil || st.Copied != 2 {
		t.Fatalf("after the incomplete run: %+v %v", st, err)
	}
	checkDir(t, dir, f)
}

func TestBackupCanceled(t *testing.T) {
	f, c := newFakeCluster(t, tree(30))
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.onGet = func(p string) {
		if f.gets.Load() == 10 {
			cancel()
		}
	}
	dest, err := OpenDir(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	st, err := Backup(ctx, Config{Source: c, Bucket: "web", Dest: dest, Jobs: 2})
	dest.Close()
	if !errors.Is(err, context.Canceled) || st.ManifestWritten {
		t.Fatalf("canceled backup: %+v %v", st, err)
	}
	if _, err := os.Stat(filepath.Join(dir, MetaDir, ManifestName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a manifest after a canceled backup: %v", err)
	}
	if len(f.snaps) != 0 {
		t.Fatalf("the snapshot of a canceled backup was not deleted: %v", f.snaps)
	}
	f.onGet = nil
	if st, err = runBackup(t, c, dir, nil); err != nil || st.Copied+st.Checked != 31 {
		t.Fatalf("after the canceled run: %+v %v", st, err)
	}
	checkDir(t, dir, f)
}

func TestBackupWrongContentIsNotStored(t *testing.T) {
	f, c := newFakeCluster(t, tree(5))
	dir := t.TempDir()
	f.corrupt["d0/s0/f000.txt"] = true
	f.corrupt["big/blob.bin"] = true // streamed, checked before its last byte
	st, err := runBackup(t, c, dir, nil)
	if !errors.Is(err, ErrIncomplete) || len(st.Failures) != 2 {
		t.Fatalf("%+v %v", st, err)
	}
	for _, fl := range st.Failures {
		if !errors.Is(fl.Err, ErrDigest) {
			t.Fatalf("failure %s: %v, want ErrDigest", fl.Path, fl.Err)
		}
		if _, err := os.Stat(filepath.Join(dir, fl.Path)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s of wrong content is at the destination: %v", fl.Path, err)
		}
	}
	if left, _ := os.ReadDir(filepath.Join(dir, tmpDir)); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestBackupRefusesAndVerifies(t *testing.T) {
	f, c := newFakeCluster(t, tree(5))
	// Files but no backup: refused, nothing written, no snapshot taken.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "precious.txt"), []byte("x"), 0o644)
	if _, err := runBackup(t, c, dir, nil); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "no backup") {
		t.Fatalf("non-empty destination: %v", err)
	}
	if f.gets.Load() != 0 || len(f.snaps) != 0 {
		t.Fatal("a refused backup read or took something")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("a refused backup wrote into the directory: %v", ents)
	}
	// Two backups into one directory: the second is refused at once.
	busy, err := OpenDir(t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenDir(busy.String(), true); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "another backup") {
		t.Fatalf("second writer: %v", err)
	}
	busy.Close()
	// A backup of another bucket: refused.
	dir = t.TempDir()
	if _, err := runBackup(t, c, dir, nil); err != nil {
		t.Fatal(err)
	}
	m, files := loadManifest(t, dir)
	m.Bucket = "shop"
	os.WriteFile(filepath.Join(dir, MetaDir, ManifestName), encodeManifest(t, m, files), 0o644)
	if _, err := runBackup(t, c, dir, nil); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "bucket shop") {
		t.Fatalf("another bucket's backup: %v", err)
	}
	m.Bucket = "web"
	os.WriteFile(filepath.Join(dir, MetaDir, ManifestName), encodeManifest(t, m, files), 0o644)

	// A damaged file of the same size: trusted by a plain run, found and
	// copied again with Verify.
	p := filepath.Join(dir, "d1/s1/f001.txt")
	b, _ := os.ReadFile(p)
	b[0] ^= 1
	os.WriteFile(p, b, 0o640)
	if st, err := runBackup(t, c, dir, nil); err != nil || st.Copied != 0 {
		t.Fatalf("plain run: %+v %v", st, err)
	}
	st, err := runBackup(t, c, dir, func(c *Config) { c.Verify = true })
	if err != nil || st.Copied != 1 || st.Checked != 5 {
		t.Fatalf("verify: %+v %v", st, err)
	}
	os.Chtimes(p, f.mtime, f.mtime)
	checkDir(t, dir, f)

	// A given snapshot is used and kept; an unknown one is an error.
	f.snaps["mine"] = true
	if st, err := runBackup(t, c, dir, func(c *Config) { c.Snapshot = "mine" }); err != nil || st.SnapshotTaken || !f.snaps["mine"] {
		t.Fatalf("--snapshot: %+v %v %v", st, err, f.snaps)
	}
	if _, err := runBackup(t, c, dir, func(c *Config) { c.Snapshot = "nope" }); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("unknown snapshot: %v", err)
	}
}

// A symlink at the destination pointing outside it is never followed.
func TestDirLocationStaysInside(t *testing.T) {
	files := map[string][]byte{"link/x.txt": []byte("payload")}
	_, c := newFakeCluster(t, files)
	dir, outside := t.TempDir(), t.TempDir()
	if _, err := runBackup(t, c, dir, nil); err != nil { // makes the manifest
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(dir, "link"))
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := runBackup(t, c, dir, nil); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("write through a symlink leading outside: %v", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("a file was written outside the destination: %v", ents)
	}
}

// A destination inside the bucket it backs up is refused: named through
// the same server, or found by its manifest in the snapshot.
func TestBackupIntoItselfRefused(t *testing.T) {
	f, c := newFakeCluster(t, tree(3))
	dest, err := NewCairn(client.New(strings.Replace(c.BaseURL(), "127.0.0.1", "localhost", 1)+"/", "k"), "web", "bk", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Backup(context.Background(), Config{Source: c, Bucket: "web", Dest: dest}); !errors.Is(err, ErrRefused) ||
		!strings.Contains(err.Error(), "into itself") {
		t.Fatalf("backup into its own bucket: %v", err)
	}
	dir := t.TempDir()
	if _, err := runBackup(t, c, dir, nil); err != nil {
		t.Fatal(err)
	}
	m, err := os.ReadFile(filepath.Join(dir, MetaDir, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	f.set("bk/"+MetaDir+"/"+ManifestName, m)
	if _, err := runBackup(t, c, dir, nil); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "bk/.cairn-backup/manifest.json") {
		t.Fatalf("a destination whose manifest is in the snapshot: %v", err)
	}
	if len(f.snaps) != 0 {
		t.Fatalf("the snapshot of a refused backup was not deleted: %v", f.snaps)
	}
}
