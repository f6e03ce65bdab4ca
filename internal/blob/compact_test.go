package blob

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"
	"github.com/cairn-fs/cairn/internal/vfs"
	"github.com/cairn-fs/cairn/internal/volume"
)

// TestCompactionDoesNotReorderTombstone is the regression test for a bug
// found by TestRandomized: compaction carried a tombstone forward past a
// later Put of the same hash, so the blob vanished at the next recovery.
func TestCompactionDoesNotReorderTombstone(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxVolumeSize = 4096; c.CompactGarbageRatio = 0.3 })
	s := e.open()
	x, xh := blobN(1, 4000) // volume 1: an older volume, so tombstones are worth keeping
	a, ah := blobN(2, 1500)
	b, bh := blobN(3, 1500)
	c, ch := blobN(4, 1500)
	d, dh := blobN(5, 1500)
	for _, step := range []func() error{
		func() error { return s.Put(xh, x) },
		func() error { return s.Put(ah, a) }, // volume 2
		func() error { return s.Put(bh, b) }, // volume 2
		func() error { return s.Delete(bh) }, // tombstone in volume 2
		func() error { return s.Put(ch, c) }, // volume 3
		func() error { return s.Put(bh, b) }, // volume 3: b is back
		func() error { return s.Put(dh, d) }, // volume 4, active
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.Volumes != 4 {
		t.Fatalf("setup: %d volumes, want 4", st.Volumes)
	}
	n, err := s.Compact()
	if err != nil || n != 1 {
		t.Fatalf("Compact = %d, %v; want volume 2 compacted", n, err)
	}
	e.fs.Crash()
	s = e.open()
	defer s.Close()
	for _, bl := range []struct {
		h Hash
		d []byte
	}{{xh, x}, {ah, a}, {bh, b}, {ch, c}, {dh, d}} {
		mustGet(t, s, bl.h, bl.d)
	}
}

// TestConcurrentWritersCompactionReaders runs writers (each owning a disjoint
// set of blobs), repeated compactions and readers at once, then checks the
// final state against each writer's model, before and after a crash.
func TestConcurrentWritersCompactionReaders(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxVolumeSize = 16 << 10; c.CompactGarbageRatio = 0.2 })
	s := e.open()
	const writers, perWriter, rounds = 3, 20, 150
	models := make([]map[int]bool, writers)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range writers {
		models[w] = map[int]bool{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 5))
			for range rounds {
				i := w*1000 + rng.IntN(perWriter)
				d, h := blobN(i, 200+i%1500)
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
	var rwg sync.WaitGroup
	for r := range 2 {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			p := make([]byte, 2000)
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				i := (k%writers)*1000 + (k*7+r)%perWriter
				d, h := blobN(i, 200+i%1500)
				n, err := s.ReadAt(h, p, 0)
				if errors.Is(err, ErrNotFound) {
					continue
				}
				if (err != nil && err != io.EOF) || !bytes.Equal(p[:n], d) {
					t.Errorf("read blob %d: n=%d err=%v", i, n, err)
					return
				}
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
	t.Logf("%d volumes compacted during the run", compacted)
	check := func(s *Store) {
		for w := range writers {
			for j := range perWriter {
				i := w*1000 + j
				d, h := blobN(i, 200+i%1500)
				if models[w][i] {
					mustGet(t, s, h, d)
				} else if s.Has(h) {
					t.Fatalf("deleted blob %d present", i)
				}
			}
		}
	}
	check(s)
	if _, err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	check(s)
	e.fs.Crash()
	s = e.open()
	defer s.Close()
	check(s)
}

// TestCompactedVolumeLeftoverAfterCheckpoint: a compacted volume whose file
// is still held by a reader (Locate, sendfile) when the node crashes is
// found on disk at the next Open, although a later checkpoint no longer
// lists it. Scanned after the checkpoint's entries were loaded, its old
// tombstone must not delete a blob stored again, durably, in a newer volume.
func TestCompactedVolumeLeftoverAfterCheckpoint(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxVolumeSize = 4096; c.CompactGarbageRatio = 0.5; c.CheckpointInterval = -1 })
	s := e.open()
	hd, hh := blobN(1, 100)
	g, gh := blobN(2, 3000)
	f, fh := blobN(3, 2000)
	mustOK := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustOK(s.Put(hh, hd))                 // volume 1
	mustOK(s.Delete(hh))                  // tombstone in volume 1
	mustOK(s.Put(gh, g))                  // volume 1
	_, _, _, release, err := s.Locate(gh) // a long sendfile holds volume 1
	mustOK(err)
	defer release()
	mustOK(s.Delete(gh))  // volume 1 is now all garbage
	mustOK(s.Put(fh, f))  // volume 2
	mustOK(s.Put(hh, hd)) // volume 2: h is back, durable
	if n, err := s.Compact(); err != nil || n != 1 {
		t.Fatalf("Compact = %d, %v; want volume 1 compacted", n, err)
	}
	if _, err := s.checkpoint(); err != nil {
		t.Fatal(err)
	}
	e.fs.Crash() // volume 1's file was never removed: its reader still held it
	s = e.open()
	defer s.Close()
	mustGet(t, s, hh, hd)
	mustGet(t, s, fh, f)
	if s.Has(gh) {
		t.Fatal("deleted blob is back")
	}
}

// TestBenefitCost pins the LFS cleaner's formula and the wait it gives
// at the default ratio: a volume just past the ratio waits CompactAge,
// one with more garbage less, one with nothing to copy hardly at all.
func TestBenefitCost(t *testing.T) {
	const r, a = 0.5, time.Hour
	due := benefitCost(1-r, a)
	for _, tc := range []struct {
		u    float64 // fraction to copy
		wait time.Duration
	}{
		{0.5, time.Hour},
		{0.25, 33*time.Minute + 20*time.Second}, // 1200 s × 1.25/0.75
		{0.1, 24*time.Minute + 27*time.Second},  // 1200 s × 1.1/0.9, rounded down
		{0, 20 * time.Minute},
	} {
		if got := benefitCost(tc.u, tc.wait); got < due*(1-1e-3) || got > due*(1+1e-3) {
			t.Errorf("benefitCost(%v, %v) = %v, want about %v", tc.u, tc.wait, got, due)
		}
	}
	if benefitCost(0.3, -time.Minute) != 0 {
		t.Error("a negative age scores above 0")
	}
	if benefitCost(0.1, time.Minute) <= benefitCost(0.5, time.Minute) {
		t.Error("a volume with more garbage does not score higher at the same age")
	}
}

// cbSize is the size of costBenefitEnv's blobs: 4 fill a volume.
const cbSize = 400 << 10

// costBenefitEnv stores blobs of cbSize bytes, 4 to a volume, on a fake clock
// advanced by a minute between volumes, and deletes those that dead says.
func costBenefitEnv(t *testing.T, mod func(*Config), vols int, dead func(i int) bool) (*env, *Store, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1e9, 0))
	e := newEnv(t, func(c *Config) {
		c.MaxVolumeSize = volume.SuperblockSize + 4*volume.NeedleSize(cbSize)
		c.CompactGarbageRatio = 0.5
		c.CompactAge = time.Hour
		c.CheckpointInterval = -1
		c.ScrubPeriod = -1
		c.Clock = clk
		if mod != nil {
			mod(c)
		}
	})
	s := e.open()
	t.Cleanup(func() { s.Close() })
	for i := range 4*vols + 1 { // the last blob starts the active volume
		if i%4 == 0 {
			clk.Advance(time.Minute)
		}
		d, h := blobN(i, cbSize)
		if err := s.Put(h, d); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.Volumes != vols+1 {
		t.Fatalf("setup: %d volumes, want %d", st.Volumes, vols+1)
	}
	for i := range 4 * vols {
		if dead(i) {
			_, h := blobN(i, cbSize)
			if err := s.Delete(h); err != nil {
				t.Fatal(err)
			}
		}
	}
	return e, s, clk
}

// TestCompactYoungVolumeWaits: a young volume past the garbage ratio whose
// last live needle is about to die is left alone; once it has died the
// volume goes at once, with nothing copied. Before cost-benefit, the first
// pass copied the live needle.
func TestCompactYoungVolumeWaits(t *testing.T) {
	e, s, clk := costBenefitEnv(t, nil, 2, func(i int) bool { return i%4 != 0 }) // 1 of 4 live in each
	n, err := s.Compact()
	if err != nil || n != 0 {
		t.Fatalf("Compact of young volumes = %d, %v; want none", n, err)
	}
	clk.Advance(10 * time.Minute)
	if n, err := s.Compact(); err != nil || n != 0 {
		t.Fatalf("Compact 10 min later = %d, %v; want none", n, err)
	}
	_, h := blobN(4, cbSize) // volume 2's last live blob dies
	if err := s.Delete(h); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Compact(); err != nil || n != 1 {
		t.Fatalf("Compact of a dead volume = %d, %v; want 1", n, err)
	}
	if !strings.Contains(e.logs.String(), fmt.Sprintf("volume=2 size=%d copied=0", volume.SuperblockSize+4*volume.NeedleSize(cbSize))) {
		t.Fatalf("volume 2 not compacted without copies:\n%s", e.logs)
	}
	// Volume 1 (a quarter live, tombstones none: it is the oldest) is due
	// when (1−u)·age/(1+u) reaches 0.5·1h/1.5, at age ≈ 20 min × 1.25/0.75.
	vr := s.volOf(1)
	u := float64(copyBytes(vr, false)) / float64(vr.v.Size())
	wait := time.Duration(float64(20*time.Minute) * (1 + u) / (1 - u))
	age := clk.Now().Sub(time.Unix(0, vr.sealed.Load()))
	clk.Advance(wait - age - time.Second)
	if n, err := s.Compact(); err != nil || n != 0 {
		t.Fatalf("Compact 1 s before volume 1 is due = %d, %v; want none", n, err)
	}
	clk.Advance(2 * time.Second)
	if n, err := s.Compact(); err != nil || n != 1 {
		t.Fatalf("Compact once volume 1 is due = %d, %v; want 1", n, err)
	}
	for _, i := range []int{0, 8} {
		d, h := blobN(i, cbSize)
		mustGet(t, s, h, d)
	}
}

// TestCompactNoWaitWhenSpaceIsShort: when the garbage the young candidates
// hold exceeds the free space, they are compacted without waiting.
func TestCompactNoWaitWhenSpaceIsShort(t *testing.T) {
	e, s, _ := costBenefitEnv(t, nil, 2, func(i int) bool { return i%4 != 0 })
	if n, err := s.Compact(); err != nil || n != 0 {
		t.Fatalf("Compact with space = %d, %v; want none", n, err)
	}
	// The two volumes hold 2.4 MB of garbage; a volume's copies (400 KB)
	// fit in the free space less compaction's 1 MiB margin.
	e.fs.SetFree(compactMargin + 600<<10)
	if n, err := s.Compact(); err != nil || n != 2 {
		t.Fatalf("Compact with space short = %d, %v; want 2", n, err)
	}
	for _, i := range []int{0, 4, 8} {
		d, h := blobN(i, cbSize)
		mustGet(t, s, h, d)
	}
}

// TestCompactOrderByBenefitCost: of two due volumes, the one with the
// higher (1−u)·age/(1+u) goes first, even if it has more to copy: an old
// volume half dead before a young one three quarters dead.
func TestCompactOrderByBenefitCost(t *testing.T) {
	e, s, clk := costBenefitEnv(t, func(c *Config) { c.CompactGarbageRatio = 0.4 }, 2, func(i int) bool {
		return i < 4 && i%2 == 1 || i >= 4 && i%4 != 0 // volume 1: 2 of 4 dead; volume 2: 3 of 4
	})
	vr1 := s.volOf(1)
	sealed := time.Unix(0, vr1.sealed.Load())
	vr1.sealed.Store(sealed.Add(-3 * time.Hour).UnixNano()) // volume 1 sealed 3 h earlier
	clk.Advance(time.Hour)
	if n, err := s.Compact(); err != nil || n != 2 {
		t.Fatalf("Compact = %d, %v; want both", n, err)
	}
	logs := e.logs.String()
	i1, i2 := strings.Index(logs, "volume=1 size="), strings.Index(logs, "volume=2 size=")
	if i1 < 0 || i2 < 0 || i1 > i2 {
		t.Fatalf("volume 1 not compacted before volume 2:\n%s", logs)
	}
}

// TestCompactSealedAtOpen: a volume found sealed at Open is as old as its
// file's modification time, or new if that lies ahead.
func TestCompactSealedAtOpen(t *testing.T) {
	fs := vfs.NewMem() // its files' mtime is the Unix epoch
	now := time.Unix(1e9, 0)
	f, err := fs.OpenFile("/x", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got := sealedAt(fs, "/x", now); !got.Equal(time.Unix(0, 0)) {
		t.Errorf("sealedAt = %v, want the mtime", got)
	}
	if got := sealedAt(fs, "/x", time.Unix(-5, 0)); !got.Equal(time.Unix(-5, 0)) {
		t.Errorf("sealedAt with an mtime ahead = %v, want now", got)
	}
	if got := sealedAt(fs, "/missing", now); !got.Equal(now) {
		t.Errorf("sealedAt of a missing file = %v, want now", got)
	}
}

// TestCompactDeadVolumeByHeaders: a volume with no live needle left is
// compacted by a walk of its headers, without reading its dead blobs (one
// of which fails its CRC here: the full scan would stop there and leave
// the volume as damaged), and its tombstone for a blob of an older volume
// is carried over, so the blob stays deleted after a crash.
func TestCompactDeadVolumeByHeaders(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxVolumeSize = 4096; c.CompactGarbageRatio = 0.5; c.CheckpointInterval = -1 })
	s := e.open()
	y, yh := blobN(1, 1500)
	x, xh := blobN(2, 2000)
	a, ah := blobN(3, 1500)
	b, bh := blobN(4, 1500)
	c, ch := blobN(5, 1500)
	for _, step := range []func() error{
		func() error { return s.Put(yh, y) }, // volume 1
		func() error { return s.Put(xh, x) }, // volume 1
		func() error { return s.Put(ah, a) }, // volume 2
		func() error { return s.Delete(yh) }, // tombstone in volume 2
		func() error { return s.Put(bh, b) }, // volume 2
		func() error { return s.Put(ch, c) }, // volume 3, active
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.Volumes != 3 {
		t.Fatalf("setup: %d volumes, want 3", st.Volumes)
	}
	flipData(t, s, ah, 100)
	for _, h := range []Hash{ah, bh} {
		if err := s.Delete(h); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.Compact()
	if err != nil || n != 1 || s.volOf(2) != nil {
		t.Fatalf("Compact = %d, %v, volume 2 still there: %v; want it compacted", n, err, s.volOf(2) != nil)
	}
	if !strings.Contains(e.logs.String(), "volume=2 size=") || strings.Contains(e.logs.String(), "compaction leaves it alone") {
		t.Fatalf("volume 2 not compacted cleanly:\n%s", e.logs)
	}
	e.fs.Crash()
	s = e.open()
	defer s.Close()
	mustGet(t, s, xh, x)
	mustGet(t, s, ch, c)
	for _, h := range []Hash{yh, ah, bh} {
		if s.Has(h) {
			t.Fatalf("deleted blob %s is back after the crash", h.String()[:8])
		}
	}
}

// TestCompactHeaderWalkFallsBack: should a volume counted as having no
// live bytes still hold a live needle, the header walk finds it and the
// full scan copies it: nothing live is dropped.
func TestCompactHeaderWalkFallsBack(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxVolumeSize = 4096; c.CheckpointInterval = -1 })
	s := e.open()
	p, ph := blobN(1, 1500)
	q, qh := blobN(2, 1500)
	r, rh := blobN(3, 1500)
	for _, step := range []func() error{
		func() error { return s.Put(ph, p) }, // volume 1
		func() error { return s.Put(qh, q) }, // volume 1
		func() error { return s.Put(rh, r) }, // volume 2, active
		func() error { return s.Delete(qh) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	s.volOf(1).live.Store(0) // a wrong count: p is live
	if n, err := s.Compact(); err != nil || n != 1 {
		t.Fatalf("Compact = %d, %v; want volume 1 compacted", n, err)
	}
	if !strings.Contains(e.logs.String(), "volume=1 size=") || !strings.Contains(e.logs.String(), "copied=1") {
		t.Fatalf("volume 1 not compacted by a full scan copying p:\n%s", e.logs)
	}
	mustGet(t, s, ph, p)
	e.fs.Crash()
	s = e.open()
	defer s.Close()
	mustGet(t, s, ph, p)
	mustGet(t, s, rh, r)
}
