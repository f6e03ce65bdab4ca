package blob

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/cairn-fs/cairn/internal/vfs"
)

// quotaFS is a Mem of a given capacity: the free space Statfs reports (kept
// up to date with SetFree) is the capacity less the bytes of the files in
// dir, and a write that would go past the capacity writes what fits and
// fails with ENOSPC, like a real disk filling up.
type quotaFS struct {
	*vfs.Mem
	dir      string
	capacity int64
	mu       sync.Mutex // serializes changes with the accounting
}

func newQuotaFS(m *vfs.Mem, dir string, capacity int64) *quotaFS {
	q := &quotaFS{Mem: m, dir: dir, capacity: capacity}
	q.update()
	return q
}

func (q *quotaFS) used() int64 {
	names, err := q.Mem.ReadDir(q.dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, name := range names {
		if fi, err := q.Mem.Stat(filepath.Join(q.dir, name)); err == nil {
			n += fi.Size()
		}
	}
	return n
}

func (q *quotaFS) update() { q.Mem.SetFree(uint64(max(q.capacity-q.used(), 0))) }

func (q *quotaFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	f, err := q.Mem.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	q.update()
	return &quotaFile{File: f, q: q}, nil
}

func (q *quotaFS) Remove(name string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	defer q.update()
	return q.Mem.Remove(name)
}

func (q *quotaFS) Rename(oldname, newname string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	defer q.update()
	return q.Mem.Rename(oldname, newname)
}

type quotaFile struct {
	vfs.File
	q *quotaFS
}

func (f *quotaFile) WriteAt(p []byte, off int64) (int, error) {
	q := f.q
	q.mu.Lock()
	defer q.mu.Unlock()
	defer q.update()
	size, err := f.File.Size()
	if err != nil {
		return 0, err
	}
	room := q.capacity - q.used()
	if grow := off + int64(len(p)) - size; grow > room {
		k := max(size+room-off, 0)
		n, _ := f.File.WriteAt(p[:k], off)
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	return f.File.WriteAt(p, off)
}

func (f *quotaFile) Truncate(size int64) error {
	f.q.mu.Lock()
	defer f.q.mu.Unlock()
	defer f.q.update()
	return f.File.Truncate(size)
}

func volFiles(t *testing.T, m *vfs.Mem) []string {
	t.Helper()
	names, err := m.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var vols []string
	for _, n := range names {
		if strings.HasSuffix(n, volSuffix) {
			vols = append(vols, n)
		}
	}
	return vols
}

// TestCompactionFreesSpaceOnFullDisk is the regression test for compaction
// copies being held to MinFreeBytes: once the disk was filled to the
// reserve, every compaction failed with ErrNoSpace, so deleting blobs never
// gave any space back and the node stayed full for good.
func TestCompactionFreesSpaceOnFullDisk(t *testing.T) {
	const capacity, reserve = 6 << 20, 2 << 20
	e := newEnv(t, func(c *Config) {
		c.MaxVolumeSize = 256 << 10
		c.MinFreeBytes = reserve
		c.CompactGarbageRatio = 0.5
		c.CheckpointInterval = -1
	})
	e.cfg.FS = newQuotaFS(e.fs, dir, capacity)
	s := e.open()
	defer func() { s.Close() }()
	const size = 8000
	n := 0
	for ; ; n++ {
		d, h := blobN(n, size)
		err := s.Put(h, d)
		if errors.Is(err, ErrNoSpace) {
			break
		}
		if err != nil {
			t.Fatalf("Put %d: %v", n, err)
		}
	}
	freeFull, _, _ := e.fs.Statfs(dir)
	if freeFull >= reserve+size {
		t.Fatalf("setup: %d bytes free after ErrNoSpace", freeFull)
	}
	// Keep every tenth blob, so that every volume has live needles to copy.
	for i := range n {
		if i%10 != 0 {
			_, h := blobN(i, size)
			if err := s.Delete(h); err != nil {
				t.Fatalf("Delete %d on a full disk: %v", i, err)
			}
		}
	}
	before := volFiles(t, e.fs)
	st := s.Stats()
	done, err := s.Compact()
	if err != nil || done < st.Volumes-1 {
		t.Fatalf("Compact = %d, %v; want all %d sealed volumes compacted (%d blobs, %d bytes free)", done, err, st.Volumes-1, n, freeFull)
	}
	after := volFiles(t, e.fs)
	for _, name := range before[:len(before)-1] {
		for _, a := range after {
			if a == name {
				t.Fatalf("compacted volume %s still on disk (before %v, after %v)", name, before, after)
			}
		}
	}
	free, _, _ := e.fs.Statfs(dir)
	if free < reserve+(1<<20) {
		t.Fatalf("after compaction only %d bytes free (%d before)", free, freeFull)
	}
	nd, nh := blobN(1_000_000, size)
	if err := s.Put(nh, nd); err != nil {
		t.Fatalf("Put after compaction: %v", err)
	}
	check := func(s *Store) {
		t.Helper()
		for i := range n {
			d, h := blobN(i, size)
			if i%10 == 0 {
				mustGet(t, s, h, d)
			} else if s.Has(h) {
				t.Fatalf("deleted blob %d present", i)
			}
		}
		mustGet(t, s, nh, nd)
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	e.fs.Crash()
	s = e.open()
	check(s)
}

// TestCompactSkipsVolumeThatDoesNotFit: with the free space below
// MinFreeBytes, an entirely dead volume is still compacted (it copies
// nothing, and goes first), while a volume whose live bytes do not fit in
// the free space less the margin is skipped, without an error, until space
// is back.
func TestCompactSkipsVolumeThatDoesNotFit(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxVolumeSize = 64 << 10; c.CompactGarbageRatio = 0.5; c.CheckpointInterval = -1 })
	s := e.open()
	defer s.Close()
	const size = 7500
	for i := range 17 { // volume 1: blobs 0-7, volume 2: 8-15, volume 3 (active): 16
		d, h := blobN(i, size)
		if err := s.Put(h, d); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.Volumes != 3 {
		t.Fatalf("setup: %d volumes, want 3", st.Volumes)
	}
	live := func(i int) bool { return i < 8 && i%3 == 0 || i == 16 } // 3 of volume 1's 8 blobs
	for i := range 16 {
		if !live(i) {
			_, h := blobN(i, size)
			if err := s.Delete(h); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.fs.SetFree(compactMargin + 10<<10) // below the 64 MiB reserve; volume 1 has 22 KB live
	done, err := s.Compact()
	if err != nil || done != 1 {
		t.Fatalf("Compact with little space = %d, %v; want the dead volume 2 compacted", done, err)
	}
	vols := volFiles(t, e.fs)
	if len(vols) != 2 || vols[0] != volName(1) {
		t.Fatalf("volumes on disk: %v, want volume 1 and the active one", vols)
	}
	if !strings.Contains(e.logs.String(), "not enough free space to compact volume") {
		t.Fatal("skipped volume not logged")
	}
	e.fs.SetFree(1 << 40)
	if done, err := s.Compact(); err != nil || done != 1 {
		t.Fatalf("Compact with space = %d, %v; want volume 1 compacted", done, err)
	}
	for i := range 17 {
		d, h := blobN(i, size)
		if live(i) {
			mustGet(t, s, h, d)
		} else if s.Has(h) {
			t.Fatalf("deleted blob %d present", i)
		}
	}
}

// TestCompactENOSPCMidCopy: a real ENOSPC in the middle of copying a
// volume's live needles abandons that volume's compaction: the store stays
// writable, every blob stays readable from the old volume, and the copies
// already made are truncated away, so repeated failing passes leave no
// garbage behind. The state survives a reopen and a crash.
func TestCompactENOSPCMidCopy(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxVolumeSize = 64 << 10; c.CompactGarbageRatio = 0.5; c.CheckpointInterval = -1 })
	s := e.open()
	defer func() { s.Close() }()
	const size = 5000
	for i := range 10 { // volume 1
		d, h := blobN(i, size)
		if err := s.Put(h, d); err != nil {
			t.Fatal(err)
		}
	}
	big, bigh := blobN(100, 20000) // volume 2, active
	if err := s.Put(bigh, big); err != nil {
		t.Fatal(err)
	}
	live := func(i int) bool { return i%3 == 1 } // 1, 4, 7: three copies
	for i := range 10 {
		if !live(i) {
			_, h := blobN(i, size)
			if err := s.Delete(h); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(s *Store) {
		t.Helper()
		for i := range 10 {
			d, h := blobN(i, size)
			if live(i) {
				mustGet(t, s, h, d)
				f, _, _, release, err := s.Locate(h)
				if err != nil {
					t.Fatal(err)
				}
				name := f.Name()
				release()
				if s.Stats().Volumes == 2 && !strings.HasSuffix(name, volName(1)) {
					t.Fatalf("blob %d in %s, want the uncompacted volume 1", i, name)
				}
			} else if s.Has(h) {
				t.Fatalf("deleted blob %d present", i)
			}
		}
		mustGet(t, s, bigh, big)
	}
	st := s.Stats()
	if st.Volumes != 2 {
		t.Fatalf("setup: %d volumes, want 2", st.Volumes)
	}
	var mu sync.Mutex
	writes := 0
	e.fs.SetFault(func(op vfs.Op, name string) error {
		if op != vfs.OpWrite || !strings.HasSuffix(name, volSuffix) {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if writes++; writes > 2 { // the third copy hits a full disk
			return vfs.ShortWrite(100, syscall.ENOSPC)
		}
		return nil
	})
	for pass := range 3 {
		done, err := s.Compact()
		if !errors.Is(err, ErrNoSpace) || done != 0 {
			t.Fatalf("pass %d: Compact = %d, %v; want ErrNoSpace", pass, done, err)
		}
		got := s.Stats()
		if got.ReadOnly || got.Volumes != st.Volumes || got.Bytes != st.Bytes || got.LiveBytes != st.LiveBytes || got.Blobs != st.Blobs {
			t.Fatalf("pass %d: stats %+v, want as before %+v (copies left behind?)", pass, got, st)
		}
		check(s)
		mu.Lock()
		writes = 0
		mu.Unlock()
	}
	e.fs.SetFault(nil)
	nd, nh := blobN(200, size)
	if err := s.Put(nh, nd); err != nil {
		t.Fatalf("Put after abandoned compaction: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = e.open()
	check(s)
	mustGet(t, s, nh, nd)
	e.fs.Crash()
	s = e.open()
	check(s)
	mustGet(t, s, nh, nd)
	if done, err := s.Compact(); err != nil || done != 1 {
		t.Fatalf("Compact with space = %d, %v; want volume 1 compacted", done, err)
	}
	check(s)
	mustGet(t, s, nh, nd)
	s.Close()
	e.fs.Crash()
	s = e.open()
	check(s)
	mustGet(t, s, nh, nd)
}
