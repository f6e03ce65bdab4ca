package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/clock"
	"github.com/cairn-fs/cairn/internal/store"
	"github.com/cairn-fs/cairn/internal/vfs"
)

// goodReplica is a store.Replication whose replicas hold good copies of
// every blob (ReadAt only; nothing here writes through it).
type goodReplica struct {
	store.Replication
	blobs map[blob.Hash][]byte
}

func (r goodReplica) ReadAt(_ context.Context, h blob.Hash, p []byte, off int64) (int, error) {
	d, ok := r.blobs[h]
	if !ok || off > int64(len(d)) {
		return 0, fmt.Errorf("%w: no replica of %s", store.ErrUnavailable, h)
	}
	n := copy(p, d[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// TestCorruptBlobNeverServed flips a byte of a small file (a body lent
// from the volume map) and of a large one (sendfile) in the volume file,
// under a store on the real file system, then GETs them, whole and by a
// range far from the flipped byte, on the fast path and through net/http.
// Alone, the node answers 500 DataCorrupt, never 200 or 206 with the
// bytes; with replicas (store.Replication), it answers with the replica's
// correct bytes.
func TestCorruptBlobNeverServed(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	files := map[string][]byte{"small.bin": make([]byte, 20_000), "large.bin": make([]byte, 300_000)}
	for _, b := range files {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	}
	for _, replicas := range []bool{false, true} {
		for _, fast := range []bool{true, false} {
			t.Run(fmt.Sprintf("replicas=%v/fast=%v", replicas, fast), func(t *testing.T) {
				dir := t.TempDir()
				bs, err := blob.Open(blob.Config{Dir: dir, FS: vfs.OS(), MinFreeBytes: 1, Logger: slog.New(slog.DiscardHandler),
					Clock: clock.NewFake(time.Unix(1e9, 0))}) // no scrub pass
				must(t, err)
				st, cfg := realStoreOn(t, bs)
				ctx := context.Background()
				good := goodReplica{blobs: map[blob.Hash][]byte{}}
				for name, b := range files {
					_, _, err := st.Put(ctx, "pub", name, bytes.NewReader(b), store.PutOptions{Size: int64(len(b))})
					must(t, err)
					good.blobs[blob.Sum(b)] = b
					flipInFiles(t, dir, b, len(b)-100)
				}
				var serve store.Store = st
				if replicas {
					// The same blobs and namespace, read as a cluster member would.
					rcfg := cfg
					rcfg.Replication = good
					rst, err := store.New(rcfg)
					must(t, err)
					t.Cleanup(func() { rst.Close() })
					serve = rst
				}
				addr := realServer(t, serve, func(c *Config) { c.DisableFastPath = !fast }, nil)
				for _, tc := range []struct {
					name, rng string
					off, n    int
				}{
					{"small.bin", "", 0, 20_000},
					{"small.bin", "bytes=10-109", 10, 100},
					{"large.bin", "", 0, 300_000},
					{"large.bin", "bytes=1000-1099", 1000, 100},
					{"large.bin", "bytes=100000-299999", 100000, 200_000},
				} {
					for round := range 2 { // found corrupt, then found quarantined
						req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/pub/"+tc.name, nil)
						if tc.rng != "" {
							req.Header.Set("Range", tc.rng)
						}
						resp, err := http.DefaultClient.Do(req)
						must(t, err)
						body, err := io.ReadAll(resp.Body)
						resp.Body.Close()
						if err != nil {
							t.Fatalf("%s %q round %d: status %d, then %v", tc.name, tc.rng, round, resp.StatusCode, err)
						}
						want := files[tc.name][tc.off : tc.off+tc.n]
						switch {
						case !replicas && (resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), "DataCorrupt")):
							t.Fatalf("%s %q round %d: %d %.60q, want 500 DataCorrupt", tc.name, tc.rng, round, resp.StatusCode, body)
						case replicas && (resp.StatusCode/100 != 2 || !bytes.Equal(body, want)):
							t.Fatalf("%s %q round %d: %d, %d bytes (right bytes: %v), want the replica's bytes",
								tc.name, tc.rng, round, resp.StatusCode, len(body), bytes.Equal(body, want))
						}
					}
				}
				if got := bs.Stats().CorruptCopies; got != 2 {
					t.Fatalf("CorruptCopies = %d, want 2", got)
				}
			})
		}
	}
}

// flipInFiles flips the byte at offset at of content's first copy in the
// volume files under dir.
func flipInFiles(t *testing.T, dir string, content []byte, at int) {
	t.Helper()
	vols, _ := filepath.Glob(filepath.Join(dir, "*.vol"))
	for _, p := range vols {
		b, err := os.ReadFile(p)
		must(t, err)
		if i := bytes.Index(b, content); i >= 0 {
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			must(t, err)
			defer f.Close()
			_, err = f.WriteAt([]byte{b[i+at] ^ 0x80}, int64(i+at))
			must(t, err)
			return
		}
	}
	t.Fatal("content not found in the volume files")
}
