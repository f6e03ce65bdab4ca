package blob

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"
	"github.com/cairn-fs/cairn/internal/vfs"
	"github.com/cairn-fs/cairn/internal/volume"
)

// corruptEnv is a store on the in-memory file system (pread reads) or the
// real one (memory-mapped volumes) that records OnCorrupt calls.
type corruptEnv struct {
	t    *testing.T
	cfg  Config
	logs *syncBuf
	mu   sync.Mutex
	seen []Hash // OnCorrupt calls
	gone []Hash // OnDelete calls
}

func newCorruptEnv(t *testing.T, mapped bool, mod func(*Config)) *corruptEnv {
	e := &corruptEnv{t: t, logs: &syncBuf{}}
	e.cfg = Config{Dir: dir, FS: vfs.NewMem(), MinFreeBytes: -1, CompactAge: -1,
		Logger:    slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnCorrupt: func(h Hash) { e.mu.Lock(); e.seen = append(e.seen, h); e.mu.Unlock() },
		OnDelete:  func(h Hash) { e.mu.Lock(); e.gone = append(e.gone, h); e.mu.Unlock() },
		// A fake clock that nobody advances: no background scrub pass.
		Clock: clock.NewFake(time.Unix(1e9, 0))}
	if mapped {
		e.cfg.Dir, e.cfg.FS = t.TempDir(), vfs.OS()
	}
	if mod != nil {
		mod(&e.cfg)
	}
	return e
}

func (e *corruptEnv) open() *Store {
	e.t.Helper()
	s, err := Open(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *corruptEnv) corruptSeen() []Hash {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Hash(nil), e.seen...)
}

// flipData flips the bits of data byte at of blob h's needle in s's
// volume file, behind the store's back (bit rot), without reading the
// blob through the store (which would check it).
func flipData(t *testing.T, s *Store, h Hash, at int64) {
	t.Helper()
	c, n := s.idx.lookup(&h)
	if n != 1 {
		t.Fatalf("blob %s: %d index entries", h.String()[:8], n)
	}
	flipAt(t, s.cfg.FS, s.volPath(c[0].vol), volume.DataOffset(c[0].offset())+at)
}

func flipAt(t *testing.T, fs vfs.FS, path string, pos int64) {
	t.Helper()
	f, err := fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], pos); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b[:], pos); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptCopyNeverServed flips one data byte of a stored blob while
// the store is closed (so the index comes from the checkpoint, as after a
// restart) and reads it through every accessor, on pread and on memory
// maps: no accessor hands out a byte of it, even for a range far from the
// flipped byte; the first one quarantines the copy (Has false, counted,
// logged at Error, OnCorrupt called) and its removal survives a reopen;
// a later Put of the same blob stores a good copy.
func TestCorruptCopyNeverServed(t *testing.T) {
	// access reads blob h through one accessor; an accessor that reports
	// no error (a refused lend) returns nil.
	type access func(s *Store, h Hash, size int64) error
	accessors := map[string]access{
		"ReadAt": func(s *Store, h Hash, size int64) error {
			p := make([]byte, 10)
			n, err := s.ReadAt(h, p, size-10)
			if n != 0 {
				t.Errorf("ReadAt copied %d bytes of a corrupt blob", n)
			}
			return err
		},
		"Get": func(s *Store, h Hash, size int64) error {
			b, err := s.Get(h, nil)
			if len(b) != 0 {
				t.Errorf("Get returned %d bytes of a corrupt blob", len(b))
			}
			return err
		},
		"MappedData": func(s *Store, h Hash, size int64) error {
			if _, ref, ok := s.MappedData(h, size-10, 10); ok {
				ref.Release()
				t.Error("MappedData lent bytes of a corrupt blob")
			}
			return nil
		},
		"Resident": func(s *Store, h Hash, size int64) error {
			if s.Resident(h, 0, size) {
				t.Error("Resident: true for a corrupt blob")
			}
			return nil
		},
		"Locate": func(s *Store, h Hash, size int64) error {
			_, _, _, release, err := s.Locate(h)
			if err == nil {
				release()
				t.Error("Locate handed out the file of a corrupt blob")
			}
			return err
		},
	}
	for _, mapped := range []bool{false, true} {
		for name, read := range accessors {
			t.Run(name+map[bool]string{false: "/pread", true: "/mmap"}[mapped], func(t *testing.T) {
				e := newCorruptEnv(t, mapped, nil)
				s := e.open()
				bad, hb := blobN(1, 200_000)
				good, hg := blobN(2, 5000)
				for _, x := range [][]byte{bad, good} {
					if err := s.Put(Sum(x), x); err != nil {
						t.Fatal(err)
					}
				}
				flipData(t, s, hb, 7) // far from the ranges read
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				s = e.open()
				err := read(s, hb, int64(len(bad)))
				if direct := name != "MappedData" && name != "Resident"; direct && (!errors.Is(err, ErrCorrupt) || !errors.Is(err, ErrNotFound)) {
					t.Fatalf("first access: %v, want ErrCorrupt and ErrNotFound", err)
				}
				if s.Has(hb) {
					t.Fatal("Has: true for a quarantined copy")
				}
				if _, err := s.ReadAt(hb, make([]byte, 1), 0); !errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorrupt) {
					t.Fatalf("ReadAt of the quarantined copy: %v, want ErrNotFound", err)
				}
				if got := s.Stats().CorruptCopies; got != 1 {
					t.Fatalf("CorruptCopies = %d", got)
				}
				if got := e.corruptSeen(); len(got) != 1 || got[0] != hb {
					t.Fatalf("OnCorrupt calls: %v", got)
				}
				e.mu.Lock()
				gone := slices.Clone(e.gone)
				e.mu.Unlock()
				if len(gone) != 1 || gone[0] != hb {
					t.Fatalf("OnDelete calls: %v, want the quarantined copy", gone)
				}
				if !strings.Contains(e.logs.String(), "level=ERROR msg=\"corrupt blob copy quarantined") {
					t.Fatalf("no error log:\n%s", e.logs)
				}
				mustGet(t, s, hg, good)
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}

				s = e.open() // the quarantine is durable (a tombstone)
				if s.Has(hb) {
					t.Fatal("quarantined copy back after reopening")
				}
				mustGet(t, s, hg, good)
				if err := s.Put(hb, bad); err != nil { // repair brings a good copy
					t.Fatal(err)
				}
				mustGet(t, s, hb, bad)
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				s = e.open()
				defer s.Close()
				mustGet(t, s, hb, bad)
				if got := s.Stats().CorruptCopies; got != 0 {
					t.Fatalf("CorruptCopies after reopening = %d", got)
				}
			})
		}
	}
}

// TestVerifiedOncePerOpen: a needle is checked in full by its first read
// only; a later flip goes unseen by reads (the scrub's job, see
// TestScrubPacedByRate) until the store is reopened, when the first read
// checks again. It pins the cost model the GET benchmark relies on.
func TestVerifiedOncePerOpen(t *testing.T) {
	e := newCorruptEnv(t, false, nil)
	s := e.open()
	d, h := blobN(1, 3000)
	if err := s.Put(h, d); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 10)
	if _, err := s.ReadAt(h, p, 100); err != nil {
		t.Fatal(err)
	}
	flipData(t, s, h, 2000)
	if _, err := s.ReadAt(h, p, 100); err != nil || !bytes.Equal(p, d[100:110]) {
		t.Fatalf("second read of a verified needle: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = e.open()
	defer s.Close()
	if _, err := s.ReadAt(h, p, 100); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("first read after reopening: %v, want ErrCorrupt", err)
	}
}

// TestCorruptHeaderQuarantined damages the hash in a needle's header: a
// read no longer finds the blob (the header names another one), the scrub
// quarantines the copy without naming it (OnCorrupt with the zero Hash),
// and the index recorded by the checkpoint no longer has it.
func TestCorruptHeaderQuarantined(t *testing.T) {
	fake := clock.NewFake(time.Unix(1e9, 0))
	sleeps := make(chan time.Duration, 64)
	e := newCorruptEnv(t, false, func(c *Config) {
		c.Clock, c.ScrubPeriod, c.ScrubRate = fake, -1, 1<<30
		c.scrubSleeping = func(d time.Duration) { sleeps <- d }
	})
	s := e.open()
	d, h := blobN(1, 3000)
	if err := s.Put(h, d); err != nil {
		t.Fatal(err)
	}
	c, _ := s.idx.lookup(&h)
	flipAt(t, s.cfg.FS, s.volPath(c[0].vol), c[0].offset()+8+2) // hash byte 2: its index key
	if _, err := s.ReadAt(h, make([]byte, 1), 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ReadAt: %v, want ErrNotFound", err)
	}
	waitSleep(t, sleeps) // the start delay
	s.StartScrub()
	waitSleep(t, sleeps) // the pass is over
	if st := s.ScrubStatus(); st.Running || st.CorruptFound != 1 || st.NeedlesChecked != 1 {
		t.Fatalf("scrub: %+v", st)
	}
	if got := e.corruptSeen(); len(got) != 1 || got[0] != (Hash{}) {
		t.Fatalf("OnCorrupt calls: %v, want the zero Hash", got)
	}
	if st := s.Stats(); st.Blobs != 0 {
		t.Fatalf("%d blobs in the index", st.Blobs)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = e.open()
	defer s.Close()
	if st := s.Stats(); st.Blobs != 0 {
		t.Fatalf("%d blobs in the index after reopening", st.Blobs)
	}
}

func waitSleep(t *testing.T, sleeps <-chan time.Duration) time.Duration {
	t.Helper()
	select {
	case d := <-sleeps:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("the scrub did not wait on the clock within 10 s")
		return 0
	}
}

// TestCompactionSkipsCorruptVolume: a sealed volume holding a needle that
// fails its CRC (not yet found by a read) does not stop the compaction
// pass: it is left alone, and the other candidates are compacted.
func TestCompactionSkipsCorruptVolume(t *testing.T) {
	e := newCorruptEnv(t, false, func(c *Config) { c.MaxVolumeSize = 8 << 10 })
	s := e.open()
	defer s.Close()
	var hs []Hash
	for i := range 12 { // 4 needles of 2 KiB a volume: volumes 1 to 3, then 4 active
		d, h := blobN(i, 2000)
		if err := s.Put(h, d); err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	for i, h := range hs {
		if i%4 != 0 { // 3 of 4 dead in each volume
			if err := s.Delete(h); err != nil {
				t.Fatal(err)
			}
		}
	}
	flipData(t, s, hs[0], 100) // volume 1
	n, err := s.Compact()
	if err != nil || n != 2 {
		t.Fatalf("Compact = %d, %v; want the 2 other volumes compacted", n, err)
	}
	if !s.volOf(1).damaged.Load() || !strings.Contains(e.logs.String(), "compaction leaves it alone") {
		t.Fatal("volume 1 not marked damaged and logged")
	}
	for _, i := range []int{4, 8} {
		d, _ := blobN(i, 2000)
		mustGet(t, s, hs[i], d)
	}
}

// An I/O error reading a needle is not corruption: the copy is left as it
// is (not quarantined, no tombstone), the read fails with the I/O error,
// and once the disk answers again the copy reads back. Quarantining here
// deleted the only copy of an R=1 file on a transient EIO (internal/sim,
// disk faults).
func TestReadEIOLeavesCopy(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.DisableMmap = true })
	s := e.open()
	small, hs := blobN(11, 900)
	large, hl := blobN(12, 200<<10)
	for _, b := range [][]byte{small, large} {
		if err := s.Put(Sum(b), b); err != nil {
			t.Fatal(err)
		}
	}
	e.fs.SetFault(func(op vfs.Op, name string) error {
		if op == vfs.OpRead && strings.HasSuffix(name, volSuffix) {
			return syscall.EIO
		}
		return nil
	})
	for _, c := range []struct {
		name string
		h    Hash
		n    int
		off  int64
	}{{"small", hs, 100, 0}, {"large pread", hl, 100 << 10, 1000}, {"past the first read", hl, 10, 150 << 10}} {
		_, err := s.ReadAt(c.h, make([]byte, c.n), c.off)
		if err == nil || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotFound) || !errors.Is(err, syscall.EIO) {
			t.Fatalf("%s: ReadAt on a failing disk: %v, want an EIO that is neither corrupt nor not found", c.name, err)
		}
		if _, _, _, _, err := s.Locate(c.h); err == nil || errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: Locate on a failing disk: %v, want an I/O error", c.name, err)
		}
		if _, err := s.Get(c.h, nil); err == nil || errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: Get on a failing disk: %v, want an I/O error", c.name, err)
		}
	}
	e.fs.SetFault(nil)
	if n := s.Stats().CorruptCopies; n != 0 {
		t.Fatalf("%d copies quarantined for an I/O error", n)
	}
	mustGet(t, s, hs, small)
	mustGet(t, s, hl, large)
	// And after a restart (no tombstone was written).
	s.Close()
	s = e.open()
	mustGet(t, s, hs, small)
	mustGet(t, s, hl, large)
}
