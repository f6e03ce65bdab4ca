package blob

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
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
