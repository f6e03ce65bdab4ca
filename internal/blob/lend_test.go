package blob

import (
	"bytes"
	"os"
	"runtime/debug"
	"syscall"
	"testing"
)

// TestMappedData lends blob bytes from the maps: the right bytes for whole
// blobs and pieces, nothing for ranges past the end, unknown blobs, a
// closed store or unmapped volumes, and no allocation.
func TestMappedData(t *testing.T) {
	e := newOSEnv(t, func(c *Config) { c.MaxVolumeSize = 32 << 10 })
	s := e.open()
	defer s.Close()
	const n = 40
	for i := range n {
		d, h := blobN(i, 1000+97*i)
		if err := s.Put(h, d); err != nil {
			t.Fatal(err)
		}
	}
	checkAllMapped(t, s)
	before := e.fs.preads.Load()
	for i := range n {
		d, h := blobN(i, 1000+97*i)
		size := int64(len(d))
		for _, r := range [][2]int64{{0, size}, {1, size - 1}, {size / 2, 7}, {size - 1, 1}} {
			b, ref, ok := s.MappedData(h, r[0], r[1])
			if !ok {
				t.Fatalf("blob %d [%d,+%d): not lent", i, r[0], r[1])
			}
			if !bytes.Equal(b, d[r[0]:r[0]+r[1]]) || cap(b) != len(b) {
				t.Fatalf("blob %d [%d,+%d): wrong bytes (or capacity %d)", i, r[0], r[1], cap(b))
			}
			ref.Release()
		}
		for _, r := range [][2]int64{{0, size + 1}, {size, 1}, {-1, 2}, {0, 0}} {
			if _, _, ok := s.MappedData(h, r[0], r[1]); ok {
				t.Fatalf("blob %d [%d,+%d): lent past the blob", i, r[0], r[1])
			}
		}
		if !s.Resident(h, 0, size) {
			t.Fatalf("blob %d just written: not resident", i)
		}
	}
	if got := e.fs.preads.Load() - before; got != 0 {
		t.Fatalf("%d preads", got)
	}
	if _, _, ok := s.MappedData(Sum([]byte("absent")), 0, 1); ok {
		t.Fatal("an absent blob lent")
	}
	_, h0 := blobN(0, 1000)
	if allocs := testing.AllocsPerRun(100, func() {
		_, ref, _ := s.MappedData(h0, 0, 100)
		ref.Release()
	}); allocs != 0 {
		t.Fatalf("MappedData allocates %.1f times", allocs)
	}
	for id, vr := range *s.vols.Load() {
		if vr.refs.Load() != 0 {
			t.Fatalf("volume %d: %d references left", id, vr.refs.Load())
		}
	}

	// Not mapped: nothing lent; ReadAt serves.
	e2 := newOSEnv(t, func(c *Config) { c.DisableMmap = true })
	s2 := e2.open()
	d, h := blobN(1, 5000)
	if err := s2.Put(h, d); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := s2.MappedData(h, 0, 10); ok {
		t.Fatal("lent from an unmapped volume")
	}
	if s2.Resident(h, 0, 10) {
		t.Fatal("resident without a map")
	}
	s2.Close()
	if _, _, ok := s2.MappedData(h, 0, 10); ok {
		t.Fatal("lent from a closed store")
	}
}

// TestMappedDataHeldAcrossCompaction holds lent bytes while their volume
// is compacted away and while the store closes: the bytes stay mapped and
// unchanged (a system call can still send them) and the volume file stays
// until the Ref is released, then it is unmapped and removed.
func TestMappedDataHeldAcrossCompaction(t *testing.T) {
	e := newOSEnv(t, func(c *Config) { c.MaxVolumeSize = 32 << 10 })
	s := e.open()
	const n = 120
	for i := range n {
		d, h := blobN(i, 1000+i)
		if err := s.Put(h, d); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if i%4 != 0 {
			_, h := blobN(i, 1000+i)
			if err := s.Delete(h); err != nil {
				t.Fatal(err)
			}
		}
	}
	d0, h0 := blobN(0, 1000)
	b, ref, ok := s.MappedData(h0, 0, int64(len(d0)))
	if !ok {
		t.Fatal("not lent")
	}
	held := s.volOf(1)
	path := held.v.Path()
	if compacted, err := s.Compact(); err != nil || compacted == 0 {
		t.Fatalf("Compact = %d, %v", compacted, err)
	}
	if s.volOf(1) != nil {
		t.Fatal("volume 1 not compacted away")
	}
	if !held.v.Mapped() {
		t.Fatal("a volume whose bytes are lent was unmapped")
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("a volume whose bytes are lent was removed: %v", err)
	}
	checkLent(t, b, d0)
	ref.Release()
	if held.v.Mapped() {
		t.Fatal("compacted volume still mapped after the Ref was released")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("compacted volume not removed after release: %v", err)
	}
	readChecks(t, s, h0, d0) // the copy compaction made

	// Close with bytes lent: the volume closes when they are released.
	b, ref, ok = s.MappedData(h0, 0, int64(len(d0)))
	if !ok {
		t.Fatal("not lent after compaction")
	}
	vr := ref.vr
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !vr.v.Mapped() {
		t.Fatal("Close unmapped a volume whose bytes are lent")
	}
	checkLent(t, b, d0)
	ref.Release()
	if vr.v.Mapped() {
		t.Fatal("volume still mapped after Close and the release")
	}
}

// checkLent checks lent bytes the way the fast path uses them: through a
// system call (write to a pipe), and then in Go.
func checkLent(t *testing.T, b, want []byte) {
	t.Helper()
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	if len(b) > 4096 {
		t.Fatalf("test blob too large for a pipe write: %d", len(b))
	}
	if n, err := syscall.Write(fds[1], b); err != nil || n != len(b) {
		t.Fatalf("write of the lent bytes = %d, %v", n, err)
	}
	got := make([]byte, len(b))
	if n, err := syscall.Read(fds[0], got); err != nil || n != len(b) {
		t.Fatalf("read back = %d, %v", n, err)
	}
	if !bytes.Equal(got, want) || !bytes.Equal(b, want) {
		t.Fatal("lent bytes changed")
	}
}

// TestMappedDataTruncated: a volume truncated under its map is not lent
// (the check faults on the last byte and reports corruption), and the
// bytes already lent fail a system call with EFAULT instead of crashing.
func TestMappedDataTruncated(t *testing.T) {
	e := newOSEnv(t, nil)
	s := e.open()
	defer s.Close()
	a, ha := blobN(1, 20_000) // needle at 16: pages 0 to 4
	if err := s.Put(ha, a); err != nil {
		t.Fatal(err)
	}
	b, ref, ok := s.MappedData(ha, 0, int64(len(a)))
	if !ok {
		t.Fatal("not lent")
	}
	defer ref.Release()
	if err := os.Truncate(s.active.Load().v.Path(), 8192); err != nil {
		t.Fatal(err)
	}
	prev := debug.SetPanicOnFault(false)
	defer debug.SetPanicOnFault(prev)
	// The volume first: the store's finding quarantines the copy, and its
	// tombstone extends the file again.
	if _, _, err := s.active.Load().v.MappedData(16, (*[32]byte)(&ha), 0, int64(len(a))); err == nil {
		t.Fatal("volume.MappedData past the truncated end: no error")
	}
	if _, _, ok := s.MappedData(ha, 0, int64(len(a))); ok {
		t.Fatal("bytes past the truncated end lent")
	}
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	// The pipe takes 64 KiB: the write needs the pages past the end.
	if _, err := syscall.Write(fds[1], b); err != syscall.EFAULT {
		// A partial write is possible; what matters is that no signal came.
		t.Logf("write of bytes lost under the map: %v", err)
	}
	if s.Resident(ha, 0, int64(len(a))) {
		t.Fatal("resident past the truncated end")
	}
}

// TestOnRead: each successful read through ReadAt, Get, Locate and
// MappedData reports its blob once; Has, Size, Resident, a read of an
// absent blob and a refused lend report nothing.
func TestOnRead(t *testing.T) {
	var got []Hash
	e := newOSEnv(t, func(c *Config) { c.OnRead = func(h Hash) { got = append(got, h) } })
	s := e.open()
	defer s.Close()
	d, h := blobN(1, 5000)
	if err := s.Put(h, d); err != nil {
		t.Fatal(err)
	}
	s.Has(h)
	s.Size(h)
	s.Resident(h, 0, 10)
	s.ReadAt(Sum([]byte("absent")), make([]byte, 4), 0)
	if _, _, ok := s.MappedData(h, 0, int64(len(d))+1); ok {
		t.Fatal("lent past the end")
	}
	if len(got) != 0 {
		t.Fatalf("reported %d reads before any read", len(got))
	}
	if _, err := s.ReadAt(h, make([]byte, 10), 4990); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(h, nil); err != nil {
		t.Fatal(err)
	}
	_, _, _, release, err := s.Locate(h)
	if err != nil {
		t.Fatal(err)
	}
	release()
	_, ref, ok := s.MappedData(h, 0, 10)
	if !ok {
		t.Fatal("not lent")
	}
	ref.Release()
	if len(got) != 4 {
		t.Fatalf("reported %d reads, want 4", len(got))
	}
	for _, g := range got {
		if g != h {
			t.Fatalf("reported %s, want %s", g, h)
		}
	}
}

// TestOnDelete: Delete reports the blob once it left the index; deleting
// an absent blob reports nothing.
func TestOnDelete(t *testing.T) {
	var got []Hash
	e := newOSEnv(t, func(c *Config) { c.OnDelete = func(h Hash) { got = append(got, h) } })
	s := e.open()
	defer s.Close()
	d, h := blobN(2, 3000)
	if err := s.Put(h, d); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(Sum([]byte("absent"))); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("reported %v before a delete", got)
	}
	if err := s.Delete(h); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != h || s.Has(h) {
		t.Fatalf("reported %v, want %s", got, h)
	}
}
