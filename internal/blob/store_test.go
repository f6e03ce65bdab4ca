package blob

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/vfs"
	"github.com/cairn-fs/cairn/internal/volume"
)

const dir = "/data/blobs"

// syncBuf is a concurrency-safe log sink.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type env struct {
	t    *testing.T
	fs   *vfs.Mem
	logs *syncBuf
	cfg  Config
	// opened lists every store opened in this env, newest last.
	opened []*Store
}

func newEnv(t *testing.T, mod func(*Config)) *env {
	e := &env{t: t, fs: vfs.NewMem(), logs: &syncBuf{}}
	// CompactAge -1: these tests are about compaction's mechanics, so a
	// volume past the garbage ratio is compacted at once; the cost-benefit
	// wait has its own tests (compact_test.go).
	e.cfg = Config{Dir: dir, FS: e.fs, CompactAge: -1, Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if mod != nil {
		mod(&e.cfg)
	}
	return e
}

func (e *env) open() *Store {
	e.t.Helper()
	// A store opened before is a process that crashed or closed: stop its
	// background checkpointer, which a real crash would have killed, so it
	// cannot write into the new store's directory.
	for _, old := range e.opened {
		old.stopBackground()
	}
	s, err := Open(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.opened = append(e.opened, s)
	return s
}

// blobN returns deterministic content of the given size for i.
func blobN(i, size int) ([]byte, Hash) {
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(uint64(i), uint64(size)))
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	return b, Sum(b)
}

func mustGet(t *testing.T, s *Store, h Hash, want []byte) {
	t.Helper()
	got, err := s.Get(h, nil)
	if err != nil {
		t.Fatalf("Get %s: %v", h.String()[:8], err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get %s: wrong bytes", h.String()[:8])
	}
}

func TestPutGetReadLocateDelete(t *testing.T) {
	e := newEnv(t, nil)
	s := e.open()
	defer s.Close()
	data, h := blobN(1, 100_000)
	if err := s.Put(h, data); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(h, data); err != nil { // idempotent
		t.Fatal(err)
	}
	if st := s.Stats(); st.Blobs != 1 || st.LiveBytes != volume.NeedleSize(len(data)) {
		t.Fatalf("stats after duplicate put: %+v", st)
	}
	if !s.Has(h) {
		t.Fatal("Has = false")
	}
	if n, err := s.Size(h); n != int64(len(data)) || err != nil {
		t.Fatalf("Size = %d, %v", n, err)
	}
	mustGet(t, s, h, data)
	// Get into a buffer with spare capacity keeps the prefix and does not allocate a new one.
	dst := make([]byte, 3, 3+volume.HeaderSize+len(data))
	copy(dst, "abc")
	got, err := s.Get(h, dst)
	if err != nil || string(got[:3]) != "abc" || !bytes.Equal(got[3:], data) || &got[0] != &dst[0] {
		t.Fatalf("Get with dst: err=%v", err)
	}
	for _, tc := range []struct {
		off, n  int64
		wantN   int
		wantEOF bool
	}{
		{0, 10, 10, false},
		{500, 1000, 1000, false},      // small: one pread via the pooled buffer
		{1000, 80_000, 80_000, false}, // large: header + data preads
		{99_990, 100, 10, true},       // runs past the end
		{100_000, 10, 0, true},        // at the end
		{200_000, 10, 0, true},        // past the end
		{50, 65_000, 65_000, false},   // straddles the small-read limit
		{0, 100_000, 100_000, false},  // whole blob
	} {
		p := make([]byte, tc.n)
		n, err := s.ReadAt(h, p, tc.off)
		if n != tc.wantN || (err == io.EOF) != tc.wantEOF || (err != nil && err != io.EOF) {
			t.Fatalf("ReadAt(off=%d,n=%d) = %d, %v", tc.off, tc.n, n, err)
		}
		if !bytes.Equal(p[:n], data[min(tc.off, 100_000):min(tc.off, 100_000)+int64(n)]) {
			t.Fatalf("ReadAt(off=%d,n=%d): wrong bytes", tc.off, tc.n)
		}
	}
	f, off, n, release, err := s.Locate(h)
	if err != nil || n != int64(len(data)) {
		t.Fatalf("Locate: %v", err)
	}
	p := make([]byte, n)
	if _, err := f.ReadAt(p, off); err != nil || !bytes.Equal(p, data) {
		t.Fatalf("read via Locate: %v", err)
	}
	release()
	release() // idempotent
	var seen []Hash
	s.Range(func(x Hash, size int64) bool { seen = append(seen, x); return true })
	if len(seen) != 1 || seen[0] != h {
		t.Fatalf("Range = %v", seen)
	}
	if err := s.Put(Hash{}, make([]byte, MaxSize+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("too large: %v", err)
	}
	if err := s.Delete(h); err != nil {
		t.Fatal(err)
	}
	if s.Has(h) {
		t.Fatal("Has after Delete")
	}
	if _, err := s.Get(h, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after delete: %v", err)
	}
	if _, err := s.ReadAt(h, p, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ReadAt after delete: %v", err)
	}
	if err := s.Delete(h); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
}

func TestReadAtDoesNotAllocate(t *testing.T) {
	e := newEnv(t, nil)
	s := e.open()
	defer s.Close()
	data, h := blobN(1, 15<<10)
	s.Put(h, data)
	p := make([]byte, len(data))
	s.ReadAt(h, p, 0)
	if a := testing.AllocsPerRun(100, func() { s.ReadAt(h, p, 0) }); a != 0 {
		t.Fatalf("ReadAt allocates %.1f times per call", a)
	}
}

func TestHashPrefixCollision(t *testing.T) {
	e := newEnv(t, nil)
	s := e.open()
	defer s.Close()
	// Three hashes sharing the 72 bits the index keeps.
	var h1, h2, h3 Hash
	for i := range 9 {
		h1[i], h2[i], h3[i] = 0xAB, 0xAB, 0xAB
	}
	h1[31], h2[31], h3[31] = 1, 2, 3
	if err := s.Put(h1, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(h2, []byte("two!")); err != nil {
		t.Fatal(err)
	}
	mustGet(t, s, h1, []byte("one"))
	mustGet(t, s, h2, []byte("two!"))
	if s.Has(h3) {
		t.Fatal("Has(h3) = true for an absent hash sharing the index prefix")
	}
	p := make([]byte, 4)
	if n, _ := s.ReadAt(h2, p, 0); string(p[:n]) != "two!" {
		t.Fatalf("ReadAt h2 = %q", p[:n])
	}
	if err := s.Delete(h1); err != nil {
		t.Fatal(err)
	}
	if s.Has(h1) || !s.Has(h2) {
		t.Fatal("delete of h1 affected h2")
	}
	s.Close()
	s = e.open()
	if s.Has(h1) || !s.Has(h2) {
		t.Fatal("after reopen: wrong collision state")
	}
}

// TestGroupCommitSharesFsyncs makes the first fsync wait until every writer
// has appended, so the store must cover them all with one more fsync.
func TestGroupCommitSharesFsyncs(t *testing.T) {
	const writers = 32
	e := newEnv(t, nil)
	s := e.open()
	defer s.Close()
	var writes atomic.Int32
	allWritten := make(chan struct{})
	e.fs.SetFault(func(op vfs.Op, name string) error {
		if !strings.HasSuffix(name, ".vol") {
			return nil
		}
		switch op {
		case vfs.OpWrite:
			if writes.Add(1) == writers {
				close(allWritten)
			}
		case vfs.OpSync:
			select {
			case <-allWritten:
			case <-time.After(10 * time.Second):
			}
		}
		return nil
	})
	before := s.Stats().Fsyncs
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data, h := blobN(i, 1000)
			errs <- s.Put(h, data)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Stats().Fsyncs - before; n > 3 {
		t.Fatalf("%d concurrent Puts issued %d fsyncs; group commit should need at most 3", writers, n)
	} else {
		t.Logf("%d Puts, %d fsyncs", writers, n)
	}
}

func TestCrashAfterAckedPuts(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxVolumeSize = 64 << 10 })
	s := e.open()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				data, h := blobN(w*100+i, 1000+i*37)
				if err := s.Put(h, data); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if s.Stats().Volumes < 2 {
		t.Fatalf("expected several volumes, got %d", s.Stats().Volumes)
	}
	e.fs.CrashTorn(rand.New(rand.NewPCG(1, 1)))
	s = e.open()
	defer s.Close()
	for w := range 4 {
		for i := range 25 {
			data, h := blobN(w*100+i, 1000+i*37)
			mustGet(t, s, h, data)
		}
	}
	if s.Stats().Blobs != 100 {
		t.Fatalf("blobs = %d", s.Stats().Blobs)
	}
}

// TestTornWriteRecovered crashes while a Put's fsync is in flight: the torn
// tail must be truncated (logged at Warn), acknowledged blobs kept, the
// in-flight blob either absent or intact, and the store writable.
func TestTornWriteRecovered(t *testing.T) {
	sawTruncate := false
	for seed := uint64(0); seed < 20; seed++ {
		e := newEnv(t, nil)
		s := e.open()
		for i := range 5 {
			data, h := blobN(i, 3000)
			if err := s.Put(h, data); err != nil {
				t.Fatal(err)
			}
		}
		inSync := make(chan struct{})
		unblock := make(chan struct{})
		e.fs.SetFault(func(op vfs.Op, name string) error {
			if op == vfs.OpSync && strings.HasSuffix(name, ".vol") {
				close(inSync)
				<-unblock
				return syscall.EIO
			}
			return nil
		})
		data, h := blobN(99, 20_000)
		done := make(chan error)
		go func() { done <- s.Put(h, data) }()
		<-inSync
		e.fs.CrashTorn(rand.New(rand.NewPCG(seed, 9)))
		e.fs.SetFault(nil)
		close(unblock)
		if err := <-done; err == nil {
			t.Fatal("Put acknowledged although its fsync failed")
		}
		s2 := e.open()
		for i := range 5 {
			d, hh := blobN(i, 3000)
			mustGet(t, s2, hh, d)
		}
		if s2.Has(h) {
			mustGet(t, s2, h, data)
		}
		if strings.Contains(e.logs.String(), "truncating torn volume tail") {
			sawTruncate = true
		}
		d2, h2 := blobN(100, 500)
		if err := s2.Put(h2, d2); err != nil {
			t.Fatalf("seed %d: put after recovery: %v", seed, err)
		}
		s2.Close()
		s3 := e.open()
		mustGet(t, s3, h2, d2)
		s3.Close()
	}
	if !sawTruncate {
		t.Fatal("no seed produced a torn tail to truncate")
	}
}

func TestEIOOnFsyncGoesReadOnly(t *testing.T) {
	e := newEnv(t, nil)
	s := e.open()
	good, gh := blobN(1, 1000)
	if err := s.Put(gh, good); err != nil {
		t.Fatal(err)
	}
	e.fs.SetFault(func(op vfs.Op, name string) error {
		if op == vfs.OpSync {
			return syscall.EIO
		}
		return nil
	})
	bad, bh := blobN(2, 1000)
	if err := s.Put(bh, bad); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Put with failing fsync: %v, want ErrReadOnly", err)
	}
	e.fs.SetFault(nil)
	if s.Has(bh) {
		t.Fatal("unacknowledged blob reported as stored")
	}
	if _, err := s.Get(bh, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get unacknowledged: %v", err)
	}
	if !s.Stats().ReadOnly {
		t.Fatal("Stats.ReadOnly = false")
	}
	// Not retried: later writes fail at once even though the disk recovered.
	other, oh := blobN(3, 10)
	if err := s.Put(oh, other); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("later Put: %v", err)
	}
	if err := s.Delete(gh); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Delete on read-only store: %v", err)
	}
	mustGet(t, s, gh, good) // reads continue
	if !strings.Contains(e.logs.String(), "level=ERROR") {
		t.Fatal("read-only transition not logged at Error")
	}
	s.Close()
	e.fs.Crash()
	s = e.open()
	defer s.Close()
	mustGet(t, s, gh, good)
	if err := s.Put(oh, other); err != nil {
		t.Fatalf("Put after restart: %v", err)
	}
}

func TestENOSPC(t *testing.T) {
	e := newEnv(t, nil)
	s := e.open()
	defer s.Close()
	first, fh := blobN(1, 5000)
	if err := s.Put(fh, first); err != nil {
		t.Fatal(err)
	}
	size := s.Stats().Bytes
	// The disk fills up in the middle of the needle.
	e.fs.SetFault(func(op vfs.Op, name string) error {
		if op == vfs.OpWrite && strings.HasSuffix(name, ".vol") {
			return vfs.ShortWrite(100, syscall.ENOSPC)
		}
		return nil
	})
	big, bh := blobN(2, 50_000)
	if err := s.Put(bh, big); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Put on full disk: %v, want ErrNoSpace", err)
	}
	e.fs.SetFault(nil)
	if s.Has(bh) || s.Stats().ReadOnly || s.Stats().Bytes != size {
		t.Fatalf("after ENOSPC: has=%v stats=%+v (bytes before %d)", s.Has(bh), s.Stats(), size)
	}
	if err := s.Put(bh, big); err != nil {
		t.Fatalf("Put once space is back: %v", err)
	}
	// Free space below MinFreeBytes (checked via Statfs, cached briefly).
	e.fs.SetFree(1 << 20)
	var err error
	third, th := blobN(3, 100)
	for i := 0; i <= spaceRecheck; i++ {
		if err = s.Put(th, third); err != nil {
			break
		}
		s.Delete(th)
	}
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Put with 1 MiB free and 64 MiB reserve: %v", err)
	}
	e.fs.SetFree(1 << 40)
	if err := s.Put(th, third); err != nil {
		t.Fatalf("Put after freeing space: %v", err)
	}
	// Deletes still work on a full disk.
	e.fs.SetFree(0)
	if err := s.Delete(fh); err != nil {
		t.Fatalf("Delete on full disk: %v", err)
	}
	e.fs.SetFree(1 << 40)
	s.Close()
	e.fs.Crash()
	s2 := e.open()
	defer s2.Close()
	mustGet(t, s2, bh, big)
	mustGet(t, s2, th, third)
	if s2.Has(fh) {
		t.Fatal("deleted blob back after crash")
	}
}

func TestDeleteSurvivesCrash(t *testing.T) {
	for _, withCheckpoint := range []bool{false, true} {
		t.Run(fmt.Sprint("checkpoint=", withCheckpoint), func(t *testing.T) {
			e := newEnv(t, nil)
			s := e.open()
			a, ah := blobN(1, 100)
			b, bh := blobN(2, 100)
			s.Put(ah, a)
			s.Put(bh, b)
			if withCheckpoint {
				s.Close()
				s = e.open()
			}
			if err := s.Delete(ah); err != nil {
				t.Fatal(err)
			}
			e.fs.Crash()
			s = e.open()
			defer s.Close()
			if s.Has(ah) {
				t.Fatal("deleted blob present after crash")
			}
			mustGet(t, s, bh, b)
			// Put after delete brings it back, also across a crash.
			if err := s.Put(ah, a); err != nil {
				t.Fatal(err)
			}
			e.fs.Crash()
			s = e.open()
			mustGet(t, s, ah, a)
		})
	}
}

func TestCheckpointAndTailScan(t *testing.T) {
	e := newEnv(t, nil)
	s := e.open()
	for i := range 50 {
		d, h := blobN(i, 200)
		s.Put(h, d)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = e.open()
	if !strings.Contains(e.logs.String(), "checkpoint=true scanned_needles=0") {
		t.Fatalf("reopen after Close did not use the checkpoint:\n%s", e.logs.String())
	}
	for i := 50; i < 60; i++ {
		d, h := blobN(i, 200)
		s.Put(h, d)
	}
	d0, h0 := blobN(0, 200)
	s.Delete(h0)
	e.fs.Crash() // no Close: the old checkpoint plus the tail
	s = e.open()
	defer s.Close()
	if !strings.Contains(e.logs.String(), "checkpoint=true scanned_needles=11") {
		t.Fatalf("recovery did not scan just the tail:\n%s", e.logs.String())
	}
	for i := 1; i < 60; i++ {
		d, h := blobN(i, 200)
		mustGet(t, s, h, d)
	}
	if s.Has(h0) {
		t.Fatal("blob deleted in the tail is present")
	}
	_ = d0
	if st := s.Stats(); st.Blobs != 59 || st.LiveBytes != 59*volume.NeedleSize(200) {
		t.Fatalf("stats after recovery: %+v", st)
	}
}

func TestCorruptCheckpointIgnored(t *testing.T) {
	e := newEnv(t, nil)
	s := e.open()
	for i := range 20 {
		d, h := blobN(i, 300)
		s.Put(h, d)
	}
	s.Close()
	f, err := e.fs.OpenFile(filepath.Join(dir, checkpointName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xff}, 30)
	f.Close()
	s = e.open()
	defer s.Close()
	if !strings.Contains(e.logs.String(), "ignoring index checkpoint") {
		t.Fatal("corrupt checkpoint not reported")
	}
	for i := range 20 {
		d, h := blobN(i, 300)
		mustGet(t, s, h, d)
	}
}

func TestReopenRepeatedly(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxVolumeSize = 16 << 10 })
	for round := range 6 {
		s := e.open()
		for i := range round * 10 {
			d, h := blobN(i, 700)
			mustGet(t, s, h, d)
		}
		for i := round * 10; i < (round+1)*10; i++ {
			d, h := blobN(i, 700)
			if err := s.Put(h, d); err != nil {
				t.Fatal(err)
			}
		}
		if round%2 == 0 {
			s.Close()
		} else {
			e.fs.Crash()
		}
	}
}

// TestCompactionWithConcurrentReaders deletes most blobs of the old volumes
// and compacts while readers keep reading survivors, one of them holding a
// Locate reference across the whole compaction.
func TestCompactionWithConcurrentReaders(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxVolumeSize = 32 << 10 })
	s := e.open()
	const n = 120
	for i := range n {
		d, h := blobN(i, 1000+i)
		if err := s.Put(h, d); err != nil {
			t.Fatal(err)
		}
	}
	keep := func(i int) bool { return i%4 == 0 }
	for i := range n {
		if !keep(i) {
			_, h := blobN(i, 1000+i)
			if err := s.Delete(h); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := s.Stats()
	// A zero-copy reader holds the first volume across compaction.
	d0, h0 := blobN(0, 1000)
	f, off, ln, release, err := s.Locate(h0)
	if err != nil {
		t.Fatal(err)
	}
	heldPath := f.Name()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := make([]byte, 4096)
			for k := r; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				i := (k * 4) % n
				d, h := blobN(i, 1000+i)
				m, err := s.ReadAt(h, p, 0)
				if (err != nil && err != io.EOF) || !bytes.Equal(p[:m], d) {
					t.Errorf("reader: blob %d: n=%d err=%v", i, m, err)
					return
				}
				if got, err := s.Get(h, nil); err != nil || !bytes.Equal(got, d) {
					t.Errorf("reader: Get blob %d: %v", i, err)
					return
				}
				reads.Add(1)
			}
		}()
	}
	compacted, err := s.Compact()
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	after := s.Stats()
	if compacted == 0 || after.Bytes >= before.Bytes || after.Volumes >= before.Volumes {
		t.Fatalf("compaction reclaimed nothing: %d volumes compacted, before %+v after %+v", compacted, before, after)
	}
	if after.Compactions != int64(compacted) {
		t.Fatalf("Stats.Compactions = %d, want %d", after.Compactions, compacted)
	}
	t.Logf("compacted %d volumes: %d -> %d bytes, %d reads during compaction", compacted, before.Bytes, after.Bytes, reads.Load())
	// The held file is still open and intact; it goes away on release.
	p := make([]byte, ln)
	if _, err := f.ReadAt(p, off); err != nil || !bytes.Equal(p, d0) {
		t.Fatalf("read through held Locate after compaction: %v", err)
	}
	if _, err := e.fs.Stat(heldPath); err != nil {
		t.Fatalf("held volume removed before release: %v", err)
	}
	release()
	if _, err := e.fs.Stat(heldPath); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("compacted volume still present after release: %v", err)
	}
	check := func(s *Store) {
		for i := range n {
			d, h := blobN(i, 1000+i)
			if keep(i) {
				mustGet(t, s, h, d)
			} else if s.Has(h) {
				t.Fatalf("deleted blob %d present", i)
			}
		}
	}
	check(s)
	e.fs.Crash()
	s = e.open()
	check(s)
	s.Close()
	s = e.open()
	defer s.Close()
	check(s)
}

// TestRandomized mixes puts, deletes, reads, compactions, clean restarts and
// torn crashes against a model of the acknowledged state.
func TestRandomized(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	if os.Getenv("CAIRN_SOAK") != "" { // make soak: many more seeds
		for i := uint64(13); i < 400; i++ {
			seeds = append(seeds, i)
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0xC0FFEE))
			e := newEnv(t, func(c *Config) {
				c.MaxVolumeSize = 24 << 10
				c.CompactGarbageRatio = 0.3
				c.CheckpointInterval = 16 << 10 // background checkpoints race with everything
			})
			s := e.open()
			model := map[Hash][]byte{}
			const pool = 60
			content := func(i int) ([]byte, Hash) { return blobN(i, 1+(i*997)%5000) }
			for step := 0; step < 600; step++ {
				switch r := rng.IntN(100); {
				case r < 45:
					d, h := content(rng.IntN(pool))
					if err := s.Put(h, d); err != nil {
						t.Fatalf("seed %d step %d: put: %v", seed, step, err)
					}
					model[h] = d
				case r < 70:
					_, h := content(rng.IntN(pool))
					if err := s.Delete(h); err != nil {
						t.Fatalf("seed %d step %d: delete: %v", seed, step, err)
					}
					delete(model, h)
				case r < 85:
					d, h := content(rng.IntN(pool))
					got, err := s.Get(h, nil)
					if _, ok := model[h]; ok != (err == nil) || (ok && !bytes.Equal(got, d)) {
						t.Fatalf("seed %d step %d: get: in model %v, err %v", seed, step, ok, err)
					}
				case r < 90:
					if _, err := s.Compact(); err != nil {
						t.Fatalf("seed %d step %d: compact: %v", seed, step, err)
					}
				case r < 94:
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					s = e.open()
				default:
					e.fs.CrashTorn(rng)
					s = e.open()
				}
			}
			verify := func(s *Store) {
				for i := range pool {
					d, h := content(i)
					_, ok := model[h]
					if s.Has(h) != ok {
						t.Fatalf("seed %d: blob %d: Has=%v, model %v", seed, i, !ok, ok)
					}
					if ok {
						mustGet(t, s, h, d)
					}
				}
				if st := s.Stats(); st.Blobs != int64(len(model)) {
					t.Fatalf("seed %d: %d blobs, model %d", seed, st.Blobs, len(model))
				}
				var n int64
				s.Range(func(h Hash, size int64) bool {
					if int64(len(model[h])) != size {
						t.Fatalf("Range: %s size %d", h, size)
					}
					n++
					return true
				})
				if n != int64(len(model)) {
					t.Fatalf("Range saw %d, model %d", n, len(model))
				}
			}
			verify(s)
			e.fs.CrashTorn(rng)
			s = e.open()
			verify(s)
			s.Close()
		})
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"defaults", func(c *Config) {}, true},
		{"no dir", func(c *Config) { c.Dir = "" }, false},
		{"tiny volumes", func(c *Config) { c.MaxVolumeSize = 100 }, false},
		{"huge volumes", func(c *Config) { c.MaxVolumeSize = 64 << 30 }, false},
		{"ratio 1", func(c *Config) { c.CompactGarbageRatio = 1 }, false},
		{"no logger", func(c *Config) { c.Logger = nil }, false},
	} {
		c := DefaultConfig()
		c.Dir = "/x"
		tc.mod(&c)
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate = %v", tc.name, err)
		}
	}
}

// BenchmarkReadAt15K reads 15 KiB blobs whole from 64 blobs in the page
// cache: on vfs.Mem, and on the real file system with pread (DisableMmap)
// and through the memory map.
func BenchmarkReadAt15K(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  func(b *testing.B) Config
	}{
		{"mem", func(b *testing.B) Config { return Config{Dir: dir, FS: vfs.NewMem()} }},
		{"os-pread", func(b *testing.B) Config { return Config{Dir: b.TempDir(), DisableMmap: true, MinFreeBytes: -1} }},
		{"os-mmap", func(b *testing.B) Config { return Config{Dir: b.TempDir(), MinFreeBytes: -1} }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := bc.cfg(b)
			cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			s, err := Open(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			hs := make([]Hash, 64)
			for i := range hs {
				d, h := blobN(i, 15<<10)
				hs[i] = h
				if err := s.Put(h, d); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.SetBytes(15 << 10)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				p := make([]byte, 15<<10)
				i := 0
				for pb.Next() {
					if _, err := s.ReadAt(hs[i%len(hs)], p, 0); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
			b.ReportMetric(float64(s.Stats().MappedVolumes), "mapped-volumes")
		})
	}
}

// TestOSFileSystem runs the store on the real file system once.
func TestOSFileSystem(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.MinFreeBytes = -1
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d, h := blobN(1, 20_000)
	if err := s.Put(h, d); err != nil {
		t.Fatal(err)
	}
	f, off, n, release, err := s.Locate(h)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.(vfs.OSFile); !ok {
		t.Fatal("Locate on the OS file system does not return an OSFile")
	}
	p := make([]byte, n)
	if _, err := f.ReadAt(p, off); err != nil || !bytes.Equal(p, d) {
		t.Fatalf("read via Locate: %v", err)
	}
	release()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustGet(t, s, h, d)
}

// HasDurable answers for a copy only once its fsync is done: a repair
// hand-off drops its own copy on that answer, so a copy still waiting for
// its group commit (Has already sees it) must not count, and one whose
// fsync fails never does.
func TestHasDurableWaitsForFsync(t *testing.T) {
	e := newEnv(t, nil)
	s := e.open()
	data, h := blobN(7, 1000)
	inSync := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	e.fs.SetFault(func(op vfs.Op, name string) error {
		if op == vfs.OpSync && strings.HasSuffix(name, volSuffix) {
			once.Do(func() { close(inSync) })
			<-release
			return syscall.EIO
		}
		return nil
	})
	putErr := make(chan error, 1)
	go func() { putErr <- s.Put(h, data) }()
	<-inSync // appended and indexed, its fsync held
	if !s.Has(h) {
		t.Fatal("setup: Has does not see the appended copy")
	}
	durable := make(chan bool, 1)
	go func() { durable <- s.HasDurable(h) }()
	select {
	case v := <-durable:
		t.Fatalf("HasDurable answered %v before the copy's fsync ended", v)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if v := <-durable; v {
		t.Fatal("HasDurable counted a copy whose fsync failed")
	}
	if err := <-putErr; !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Put with failing fsync: %v, want ErrReadOnly", err)
	}
	e.fs.SetFault(nil)
	// A durable copy counts at once.
	s.Close()
	e.fs.Crash()
	s2 := e.open()
	good, gh := blobN(8, 1000)
	if err := s2.Put(gh, good); err != nil {
		t.Fatal(err)
	}
	if !s2.HasDurable(gh) || s2.HasDurable(h) {
		t.Fatal("HasDurable after recovery: want the acknowledged copy only")
	}
}
