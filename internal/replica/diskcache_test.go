package replica

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-fs/cairn/internal/blob"
)

func fillWith(t *testing.T, c *DiskCache, data []byte) []byte {
	t.Helper()
	got, err := c.Fill(blob.Sum(data), nil, func() ([]byte, bool, error) { return data, true, nil })
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// The disk cache keeps whole blobs as files, hits them, evicts the least
// recently used past its bound, refuses bytes that do not hash to their
// name, and finds its files again after a restart.
func TestDiskCache(t *testing.T) {
	dir := t.TempDir()
	const bound = 4 * (10_000 + diskEntryOverhead) // four blobs of 10 KB
	c, err := OpenDiskCache(dir, bound)
	if err != nil {
		t.Fatal(err)
	}
	blobs := make([][]byte, 6)
	for i := range blobs {
		blobs[i] = bytes.Repeat([]byte{byte('a' + i)}, 10_000)
	}
	for _, b := range blobs[:4] {
		fillWith(t, c, b)
	}
	if got, ok := c.Get(blob.Sum(blobs[0])); !ok || !bytes.Equal(got, blobs[0]) {
		t.Fatal("blob 0 not cached")
	}
	// Two more: the least recently used (1, then 2) go.
	fillWith(t, c, blobs[4])
	fillWith(t, c, blobs[5])
	for i, want := range []bool{true, false, false, true, true, true} {
		if _, ok := c.Get(blob.Sum(blobs[i])); ok != want {
			t.Errorf("blob %d cached: %v, want %v", i, ok, want)
		}
	}
	st := c.Stats()
	if st.Evictions != 2 || st.Entries != 4 || st.Bytes > bound || !st.OnDisk {
		t.Fatalf("stats %+v", st)
	}
	// Bytes that are not the blob they name are not kept.
	bad := blob.Sum([]byte("the real one"))
	if _, err := c.Fill(bad, nil, func() ([]byte, bool, error) { return []byte("something else"), true, nil }); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get(bad); ok || c.Stats().Corrupt != 1 {
		t.Fatalf("a blob whose bytes do not match its name was kept (corrupt %d)", c.Stats().Corrupt)
	}
	// A fetch that fails keeps nothing.
	if _, err := c.Fill(blob.Sum([]byte("x")), nil, func() ([]byte, bool, error) { return nil, false, errors.New("no") }); err == nil {
		t.Fatal("a failed fetch answered nil")
	}
	// A file that lost bytes on disk is a miss, and leaves.
	h3 := blob.Sum(blobs[3])
	s := h3.String()
	if err := os.WriteFile(filepath.Join(dir, s[:2], s), []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get(h3); ok {
		t.Fatal("a truncated file was a hit")
	}
	// A restart finds the rest; an interrupted fill's temporary file goes.
	tmp := filepath.Join(dir, "ff", "ff00.tmp")
	os.MkdirAll(filepath.Dir(tmp), 0o700)
	os.WriteFile(tmp, []byte("partial"), 0o600)
	c2, err := OpenDiskCache(dir, bound)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 4, 5} {
		if got, ok := c2.Get(blob.Sum(blobs[i])); !ok || !bytes.Equal(got, blobs[i]) {
			t.Errorf("blob %d lost at the restart", i)
		}
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatal("a temporary file survived the restart")
	}
	// Reopened smaller: it evicts down to the new bound.
	c3, err := OpenDiskCache(dir, 10_000+diskEntryOverhead)
	if err != nil {
		t.Fatal(err)
	}
	if st := c3.Stats(); st.Entries != 1 || st.Bytes > 10_000+diskEntryOverhead {
		t.Fatalf("reopened at one blob: %+v", st)
	}
	if c, err := OpenDiskCache(dir, 0); c != nil || err != nil {
		t.Fatal("a cache of 0 bytes exists")
	}
}
