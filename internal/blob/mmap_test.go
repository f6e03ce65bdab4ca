package blob

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cairn-fs/cairn/internal/vfs"
	"github.com/cairn-fs/cairn/internal/volume"
)

// countFS is the real file system with its preads counted, so a test can
// tell reads served from the memory map (no pread) from pread fallbacks.
// mapErr, if set, makes Map fail with it.
type countFS struct {
	vfs.OSFS
	preads atomic.Int64
	mapErr error
}

type countFile struct {
	vfs.File
	fs *countFS
}

func (f countFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.preads.Add(1)
	return f.File.ReadAt(p, off)
}

// OSFile keeps Locate's zero-copy path and OSFS.Map working through the wrapper.
func (f countFile) OSFile() *os.File { return f.File.(vfs.OSFile).OSFile() }

func (c *countFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := c.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return countFile{File: f, fs: c}, nil
}

func (c *countFS) Map(f vfs.File, length int64) ([]byte, func() error, error) {
	if c.mapErr != nil {
		return nil, nil, c.mapErr
	}
	return c.OSFS.Map(f, length)
}

type osEnv struct {
	t    testing.TB
	fs   *countFS
	logs *syncBuf
	cfg  Config
}

// newOSEnv is a store on the real file system in a temporary directory,
// where volumes are memory-mapped.
func newOSEnv(t testing.TB, mod func(*Config)) *osEnv {
	e := &osEnv{t: t, fs: &countFS{}, logs: &syncBuf{}}
	e.cfg = Config{Dir: t.TempDir(), FS: e.fs, MinFreeBytes: -1, CompactAge: -1,
		Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if mod != nil {
		mod(&e.cfg)
	}
	return e
}

func (e *osEnv) open() *Store {
	e.t.Helper()
	s, err := Open(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// checkAllMapped fails unless every volume of s is memory-mapped.
func checkAllMapped(t testing.TB, s *Store) {
	t.Helper()
	if st := s.Stats(); st.MappedVolumes != st.Volumes || st.Volumes == 0 {
		t.Fatalf("%d of %d volumes mapped", st.MappedVolumes, st.Volumes)
	}
}

// readChecks reads blob d (hash h) whole, in part, across and past its end
// with ReadAt and checks the bytes and io.EOF.
func readChecks(t testing.TB, s *Store, h Hash, d []byte) {
	t.Helper()
	size := int64(len(d))
	for _, r := range [][2]int64{{0, size}, {0, 1}, {size / 3, size / 2}, {size - 1, 10}, {size, 5}, {size + 7, 3}, {0, size + 100}} {
		off, n := r[0], r[1]
		p := make([]byte, n)
		got, err := s.ReadAt(h, p, off)
		lo := min(off, size)
		hi := min(off+n, size)
		wantEOF := off+n > size
		if got != int(hi-lo) || (err == io.EOF) != wantEOF || (err != nil && err != io.EOF) {
			t.Fatalf("ReadAt(%d bytes @%d) of a %d-byte blob = %d, %v", n, off, size, got, err)
		}
		if !bytes.Equal(p[:got], d[lo:hi]) {
			t.Fatalf("ReadAt(%d bytes @%d) of a %d-byte blob: wrong bytes", n, off, size)
		}
	}
}

// TestMmapReadsAcrossRollOver fills many small volumes (and one blob larger
// than a volume), reads everything back through the maps without a single
// pread, and again after a reopen, which maps the volumes found on disk:
// blobs appended to the reopened active volume, past its end at mapping
// time, are read through its map too.
func TestMmapReadsAcrossRollOver(t *testing.T) {
	e := newOSEnv(t, func(c *Config) { c.MaxVolumeSize = 16 << 10 })
	s := e.open()
	type blob struct {
		d []byte
		h Hash
	}
	var blobs []blob
	add := func(i, size int) {
		d, h := blobN(i, size)
		if err := s.Put(h, d); err != nil {
			t.Fatal(err)
		}
		blobs = append(blobs, blob{d, h})
	}
	for i := range 60 {
		add(i, 1+(i*1237)%7000)
	}
	add(1000, 100_000) // larger than a volume: gets an empty one
	add(1001, 500)
	check := func(s *Store, what string) {
		checkAllMapped(t, s)
		before := e.fs.preads.Load()
		for _, b := range blobs {
			readChecks(t, s, b.h, b.d)
			if n, err := s.Size(b.h); err != nil || n != int64(len(b.d)) {
				t.Fatalf("Size = %d, %v", n, err)
			}
			f, off, n, release, err := s.Locate(b.h)
			if err != nil || n != int64(len(b.d)) {
				t.Fatalf("Locate: %v", err)
			}
			if _, ok := f.(vfs.OSFile); !ok {
				t.Fatal("Locate does not return an OSFile")
			}
			release()
			_ = off
		}
		if got := e.fs.preads.Load() - before; got != 0 {
			t.Fatalf("%s: %d preads for ReadAt/Size/Locate of mapped volumes, want 0", what, got)
		}
		for _, b := range blobs {
			mustGet(t, s, b.h, b.d) // Get still preads and checks the CRC
		}
	}
	if st := s.Stats(); st.Volumes < 10 {
		t.Fatalf("only %d volumes; the test wants many roll-overs", st.Volumes)
	}
	check(s, "first open")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = e.open()
	defer s.Close()
	check(s, "after reopen")
	add(2000, 300) // into the reopened active volume, mapped before this append
	add(2001, 9000)
	check(s, "after appends to the reopened active volume")
}

// TestMmapCompaction: compaction retires mapped volumes; a retired volume's
// map is released only when its last reader lets go, and the volumes
// compaction appends to are mapped.
func TestMmapCompaction(t *testing.T) {
	e := newOSEnv(t, func(c *Config) { c.MaxVolumeSize = 32 << 10 })
	s := e.open()
	defer s.Close()
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
	old := map[uint32]*volRef{}
	for id, vr := range *s.vols.Load() {
		old[id] = vr
	}
	_, h0 := blobN(0, 1000)
	_, _, _, release, err := s.Locate(h0) // holds the first volume
	if err != nil {
		t.Fatal(err)
	}
	held := s.volOf(1)
	compacted, err := s.Compact()
	if err != nil || compacted == 0 {
		t.Fatalf("Compact = %d, %v", compacted, err)
	}
	checkAllMapped(t, s)
	retired := 0
	for id, vr := range old {
		if s.volOf(id) != nil {
			continue
		}
		retired++
		if vr == held {
			if !vr.v.Mapped() {
				t.Fatal("map of a volume held by a reader released before the reader let go")
			}
			continue
		}
		if vr.v.Mapped() {
			t.Fatalf("retired volume %d still mapped with no reader", id)
		}
	}
	if retired == 0 || s.volOf(1) != nil {
		t.Fatalf("%d volumes retired; volume 1 retired: %v", retired, s.volOf(1) == nil)
	}
	before := e.fs.preads.Load()
	for i := range n {
		d, h := blobN(i, 1000+i)
		if keep(i) {
			readChecks(t, s, h, d)
		} else if _, err := s.ReadAt(h, make([]byte, 10), 0); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted blob %d: ReadAt = %v", i, err)
		}
	}
	if got := e.fs.preads.Load() - before; got != 0 {
		t.Fatalf("%d preads after compaction, want 0", got)
	}
	release()
	if held.v.Mapped() {
		t.Fatal("retired volume still mapped after its last reader released it")
	}
}

// TestMmapConcurrent runs Put, Delete, Compact and ReadAt at once on mapped
// volumes (run it with -race), then checks the final state.
func TestMmapConcurrent(t *testing.T) {
	e := newOSEnv(t, func(c *Config) { c.MaxVolumeSize = 16 << 10; c.CompactGarbageRatio = 0.2 })
	s := e.open()
	const writers, perWriter, rounds = 3, 20, 150
	content := func(i int) ([]byte, Hash) { return blobN(i, 200+i%3000) }
	models := make([]map[int]bool, writers)
	var wg sync.WaitGroup
	for w := range writers {
		models[w] = map[int]bool{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for range rounds {
				i := w*1000 + rng.IntN(perWriter)
				d, h := content(i)
				if rng.IntN(3) == 0 {
					if err := s.Delete(h); err != nil {
						t.Error(err)
						return
					}
					delete(models[w], i)
				} else {
					if err := s.Put(h, d); err != nil {
						t.Error(err)
						return
					}
					models[w][i] = true
				}
			}
		}()
	}
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	var reads atomic.Int64
	for r := range 3 {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			p := make([]byte, 4000)
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				i := (k%writers)*1000 + (k*7+r)%perWriter
				d, h := content(i)
				off := int64(k % 300)
				n, err := s.ReadAt(h, p[:k%len(p)], off)
				if errors.Is(err, ErrNotFound) {
					continue
				}
				lo, hi := min(off, int64(len(d))), min(off+int64(k%len(p)), int64(len(d)))
				if (err != nil && err != io.EOF) || !bytes.Equal(p[:n], d[lo:hi]) {
					t.Errorf("read blob %d @%d: n=%d err=%v", i, off, n, err)
					return
				}
				reads.Add(1)
			}
		}()
	}
	writersDone := make(chan struct{})
	go func() { wg.Wait(); close(writersDone) }()
	compacted := 0
	for done := false; !done; {
		select {
		case <-writersDone:
			done = true
		default:
		}
		n, err := s.Compact()
		if err != nil {
			t.Fatal(err)
		}
		compacted += n
	}
	close(stop)
	rwg.Wait()
	t.Logf("%d volumes compacted, %d successful reads during the run", compacted, reads.Load())
	check := func(s *Store) {
		checkAllMapped(t, s)
		for w := range writers {
			for j := range perWriter {
				i := w*1000 + j
				d, h := content(i)
				if models[w][i] {
					readChecks(t, s, h, d)
					mustGet(t, s, h, d)
				} else if s.Has(h) {
					t.Fatalf("deleted blob %d present", i)
				}
			}
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = e.open()
	defer s.Close()
	check(s)
}

// TestMmapHashPrefixCollision: reads through the map check the full hash in
// the needle header, not only the prefix the index keeps.
func TestMmapHashPrefixCollision(t *testing.T) {
	e := newOSEnv(t, nil)
	s := e.open()
	defer s.Close()
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
	checkAllMapped(t, s)
	before := e.fs.preads.Load()
	p := make([]byte, 8)
	if n, err := s.ReadAt(h1, p, 0); string(p[:n]) != "one" || err != io.EOF {
		t.Fatalf("ReadAt h1 = %q, %v", p[:n], err)
	}
	if n, err := s.ReadAt(h2, p, 0); string(p[:n]) != "two!" || err != io.EOF {
		t.Fatalf("ReadAt h2 = %q, %v", p[:n], err)
	}
	if n, err := s.ReadAt(h3, p, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ReadAt h3 (absent, same prefix) = %d, %v", n, err)
	}
	if s.Has(h3) {
		t.Fatal("Has(h3) = true")
	}
	if got := e.fs.preads.Load() - before; got != 0 {
		t.Fatalf("%d preads, want 0", got)
	}
	if err := s.Delete(h1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadAt(h1, p, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ReadAt h1 after Delete: %v", err)
	}
	if n, _ := s.ReadAt(h2, p, 0); string(p[:n]) != "two!" {
		t.Fatalf("ReadAt h2 after deleting h1 = %q", p[:n])
	}
}

// TestMmapTruncatedUnderMap truncates a mapped volume file behind the
// store's back: a read of a needle on a page past the new end faults
// (SIGBUS), which must become ErrCorrupt, not a crash, quarantine the copy
// (later reads: ErrNotFound) and leave the goroutine's SetPanicOnFault
// setting as it was. The volume is sealed, so the quarantine's tombstones
// go elsewhere and do not extend the truncated file again.
func TestMmapTruncatedUnderMap(t *testing.T) {
	e := newOSEnv(t, func(c *Config) { c.MaxVolumeSize = 32 << 10 })
	s := e.open()
	defer s.Close()
	a, ha := blobN(1, 20_000) // needle at 16: header on page 0, data to page 4
	b, hb := blobN(2, 1000)   // needles past 20064: pages 4 and 5
	c, hc := blobN(3, 1000)
	d, hd := blobN(4, 1000)
	f, hf := blobN(5, 20_000) // rolls to volume 2
	for _, x := range []struct {
		d []byte
		h Hash
	}{{a, ha}, {b, hb}, {c, hc}, {d, hd}, {f, hf}} {
		if err := s.Put(x.h, x.d); err != nil {
			t.Fatal(err)
		}
	}
	checkAllMapped(t, s)
	readChecks(t, s, hb, b)
	path := s.volOf(1).v.Path()
	if s.active.Load().v.ID() == 1 {
		t.Fatal("volume 1 still active")
	}
	if err := os.Truncate(path, volume.SuperblockSize); err != nil {
		t.Fatal(err)
	}
	prev := debug.SetPanicOnFault(false)
	defer debug.SetPanicOnFault(prev)
	p := make([]byte, len(b))
	_, err := s.ReadAt(hb, p, 0)
	if !errors.Is(err, ErrCorrupt) || !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "memory fault") {
		t.Fatalf("ReadAt of a needle past the truncated end = %v, want ErrCorrupt and ErrNotFound from a memory fault", err)
	}
	t.Logf("ReadAt after truncation: %v", err)
	if debug.SetPanicOnFault(false) {
		t.Fatal("ReadAt left SetPanicOnFault on")
	}
	if _, err := s.Size(hb); !errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("Size of the quarantined copy = %v, want ErrNotFound", err)
	}
	// The header of a (on page 0, beyond the end) reads as zeros: corrupt, no fault.
	if _, err := s.ReadAt(ha, p, 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ReadAt of a needle on the truncated page = %v, want ErrCorrupt", err)
	}
	if _, err := s.Size(hc); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Size after truncation = %v, want ErrCorrupt", err)
	}
	// A goroutine that had SetPanicOnFault on keeps it.
	debug.SetPanicOnFault(true)
	if _, err := s.ReadAt(hd, p, 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("second ReadAt = %v", err)
	}
	if !debug.SetPanicOnFault(false) {
		t.Fatal("ReadAt turned a caller's SetPanicOnFault off")
	}
	if got := s.Stats().CorruptCopies; got != 4 {
		t.Fatalf("CorruptCopies = %d, want 4", got)
	}
	mustGet(t, s, hf, f)
}

// TestMmapFallbacks: with DisableMmap, on a file system that cannot map
// (Mem) and when mmap fails, volumes are not mapped and reads use pread.
func TestMmapFallbacks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mod    func(*Config)
		mapErr error
		warn   bool
	}{
		{"DisableMmap", func(c *Config) { c.DisableMmap = true }, nil, false},
		{"unsupported", nil, fmt.Errorf("test: %w", errors.ErrUnsupported), false},
		{"mmap fails", nil, &os.PathError{Op: "mmap", Path: "x", Err: syscall.ENOMEM}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newOSEnv(t, func(c *Config) {
				c.MaxVolumeSize = 8 << 10
				if tc.mod != nil {
					tc.mod(c)
				}
			})
			e.fs.mapErr = tc.mapErr
			s := e.open()
			defer s.Close()
			var hs []Hash
			var ds [][]byte
			for i := range 10 {
				d, h := blobN(i, 3000)
				if err := s.Put(h, d); err != nil {
					t.Fatal(err)
				}
				hs, ds = append(hs, h), append(ds, d)
			}
			if st := s.Stats(); st.MappedVolumes != 0 || st.Volumes < 2 {
				t.Fatalf("stats %+v, want several volumes, none mapped", st)
			}
			before := e.fs.preads.Load()
			for i := range hs {
				readChecks(t, s, hs[i], ds[i])
			}
			if e.fs.preads.Load() == before {
				t.Fatal("no preads: reads did not take the fallback")
			}
			if got := strings.Contains(e.logs.String(), "cannot map volume"); got != tc.warn {
				t.Fatalf("warning logged = %v, want %v; logs:\n%s", got, tc.warn, e.logs)
			}
		})
	}
	e := newEnv(t, nil) // vfs.Mem
	s := e.open()
	defer s.Close()
	d, h := blobN(1, 100)
	if err := s.Put(h, d); err != nil {
		t.Fatal(err)
	}
	readChecks(t, s, h, d)
	if st := s.Stats(); st.MappedVolumes != 0 {
		t.Fatalf("%d volumes mapped on vfs.Mem", st.MappedVolumes)
	}
}

func TestMmapReadAtDoesNotAllocate(t *testing.T) {
	e := newOSEnv(t, nil)
	s := e.open()
	defer s.Close()
	data, h := blobN(1, 15<<10)
	if err := s.Put(h, data); err != nil {
		t.Fatal(err)
	}
	checkAllMapped(t, s)
	p := make([]byte, len(data))
	s.ReadAt(h, p, 0)
	if a := testing.AllocsPerRun(100, func() { s.ReadAt(h, p, 0) }); a != 0 {
		t.Fatalf("ReadAt through the map allocates %.1f times per call", a)
	}
}
