package blob

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/volume"
)

// needleOff returns the volume file and needle offset of blob h.
func needleOff(t *testing.T, s *Store, h Hash) (string, int64) {
	t.Helper()
	f, off, _, release, err := s.Locate(h)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	return f.Name(), off - volume.HeaderSize
}

// damage overwrites bytes of a volume file directly, as bit rot would.
func (e *env) damage(path string, at int64, b []byte) {
	e.t.Helper()
	f, err := e.fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, at); err != nil {
		e.t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) fileSize(path string) int64 {
	e.t.Helper()
	fi, err := e.fs.Stat(path)
	if err != nil {
		e.t.Fatal(err)
	}
	return fi.Size()
}

// TestRecoveryCorruptionTable damages one volume after a crash (so that
// recovery scans it) and checks what Open keeps, skips and truncates.
func TestRecoveryCorruptionTable(t *testing.T) {
	const n, size, bad = 12, 3000, 5
	for _, tc := range []struct {
		name string
		// damage returns the bytes to write and where, given the offset of
		// needle bad and the end of the volume.
		damage      func(needle, end int64) (int64, []byte)
		wantCorrupt bool // mid-volume corruption, else a torn tail
	}{
		{"data byte in the middle", func(o, _ int64) (int64, []byte) { return o + volume.HeaderSize + 100, []byte{0xAA} }, true},
		{"magic in the middle", func(o, _ int64) (int64, []byte) { return o, []byte("XXXX") }, true},
		{"length in the middle", func(o, _ int64) (int64, []byte) { return o + 40, []byte{0xff, 0xff} }, true},
		{"header zeroed in the middle", func(o, _ int64) (int64, []byte) { return o, make([]byte, volume.HeaderSize) }, true},
		{"torn tail of zeros", func(_, end int64) (int64, []byte) { return end, make([]byte, 5000) }, false},
		{"torn tail: header claiming more than follows", func(_, end int64) (int64, []byte) {
			return end, volume.AppendNeedle(nil, [32]byte{1}, volume.FlagLive, make([]byte, 4000))[:1000]
		}, false},
		{"garbage tail with a bogus magic, bad CRC", func(_, end int64) (int64, []byte) {
			d, h := blobN(999, 2000)
			b := volume.AppendNeedle(nil, h, volume.FlagLive, d)
			b[volume.HeaderSize+7] ^= 1
			return end, append(b, bytes.Repeat([]byte("CRNN\x01\x00\x00\x00"), 64)...)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			s := e.open()
			for i := range n {
				d, h := blobN(i, size)
				if err := s.Put(h, d); err != nil {
					t.Fatal(err)
				}
			}
			_, bh := blobN(bad, size)
			path, off := needleOff(t, s, bh)
			end := s.Stats().Bytes
			volumes := s.Stats().Volumes
			e.fs.Crash() // no checkpoint: recovery scans the whole volume
			at, b := tc.damage(off, end)
			e.damage(path, at, b)
			damagedSize := e.fileSize(path)

			s = e.open()
			defer s.Close()
			st := s.Stats()
			for i := range n {
				d, h := blobN(i, size)
				if tc.wantCorrupt && i == bad {
					if _, err := s.Get(h, nil); !errors.Is(err, ErrNotFound) {
						t.Fatalf("corrupt blob: Get = %v, want ErrNotFound", err)
					}
					continue
				}
				mustGet(t, s, h, d)
			}
			logs := e.logs.String()
			if tc.wantCorrupt {
				if st.CorruptRegions != 1 || !strings.Contains(logs, "level=ERROR") ||
					!strings.Contains(logs, fmt.Sprintf("from=%d to=%d", off, off+volume.NeedleSize(size))) {
					t.Fatalf("corrupt region not reported: %+v\n%s", st, logs)
				}
				if got := e.fileSize(path); got != damagedSize {
					t.Fatalf("damaged volume changed size %d -> %d", damagedSize, got)
				}
				if st.Volumes != volumes+1 {
					t.Fatalf("%d volumes, want a new active one after %d", st.Volumes, volumes)
				}
			} else {
				if st.CorruptRegions != 0 || strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "truncating torn volume tail") {
					t.Fatalf("torn tail not truncated as such: %+v\n%s", st, logs)
				}
				if got := e.fileSize(path); got != end {
					t.Fatalf("volume is %d bytes after recovery, want %d", got, end)
				}
			}
			// Writes go on, not into the damaged file, and survive a crash
			// and a clean restart.
			d, h := blobN(100, 500)
			if err := s.Put(h, d); err != nil {
				t.Fatal(err)
			}
			if tc.wantCorrupt && e.fileSize(path) != damagedSize {
				t.Fatal("damaged volume was appended to")
			}
			e.fs.Crash()
			s = e.open()
			mustGet(t, s, h, d)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = e.open()
			mustGet(t, s, h, d)
			if st := s.Stats(); st.RecoveryScannedBytes != 0 {
				t.Fatalf("reopen after Close scanned %d bytes", st.RecoveryScannedBytes)
			}
			for i := range n {
				if d, h := blobN(i, size); !tc.wantCorrupt || i != bad {
					mustGet(t, s, h, d)
				}
			}
		})
	}
}

// TestPeriodicCheckpoint writes and deletes from several goroutines with a
// small CheckpointInterval, waits for a background checkpoint that covers
// all but the last interval, crashes and checks that recovery scans only
// the tail and that every acknowledged write is intact.
func TestPeriodicCheckpoint(t *testing.T) {
	const interval = 32 << 10
	covered := make(chan int64, 1000)
	e := newEnv(t, func(c *Config) {
		c.MaxVolumeSize = 128 << 10
		c.CheckpointInterval = interval
		c.checkpointHook = func(n int64) { covered <- n }
	})
	s := e.open()
	const writers, per = 4, 100
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				d, h := blobN(w*1000+i, 500+i*7)
				if err := s.Put(h, d); err != nil {
					t.Error(err)
					return
				}
				if i%3 == 0 {
					if err := s.Delete(h); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	total := s.Stats().Bytes
	deadline := time.After(20 * time.Second)
	for got := int64(0); got < total-interval; {
		select {
		case got = <-covered:
		case <-deadline:
			t.Fatalf("no checkpoint covering %d of %d bytes", total-interval, total)
		}
	}
	ckpts := s.Stats().Checkpoints
	e.fs.Crash()
	s = e.open()
	defer s.Close()
	st := s.Stats()
	if st.RecoveryScannedBytes > interval || st.RecoveryScannedBytes >= total/4 {
		t.Fatalf("recovery scanned %d of %d bytes; want at most the interval %d", st.RecoveryScannedBytes, total, interval)
	}
	if !strings.Contains(e.logs.String(), fmt.Sprintf("scanned_bytes=%d", st.RecoveryScannedBytes)) {
		t.Fatal("startup log does not give the bytes scanned")
	}
	t.Logf("%d bytes in %d volumes, %d checkpoints, recovery scanned %d bytes", total, st.Volumes, ckpts, st.RecoveryScannedBytes)
	var live int64
	for w := range writers {
		for i := range per {
			d, h := blobN(w*1000+i, 500+i*7)
			if i%3 == 0 {
				if s.Has(h) {
					t.Fatalf("deleted blob %d/%d present", w, i)
				}
				continue
			}
			mustGet(t, s, h, d)
			live += volume.NeedleSize(len(d))
		}
	}
	if st.Blobs != writers*(per-(per+2)/3) || st.LiveBytes != live {
		t.Fatalf("stats after recovery: %+v, want live bytes %d", st, live)
	}
}

func TestOnFsync(t *testing.T) {
	var mu sync.Mutex
	var calls []time.Duration
	var now time.Time
	e := newEnv(t, func(c *Config) {
		// Each reading of the clock advances it by 3 ms, so every fsync
		// takes 3 ms.
		c.Now = func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			now = now.Add(3 * time.Millisecond)
			return now
		}
		c.OnFsync = func(d time.Duration) {
			mu.Lock()
			calls = append(calls, d)
			mu.Unlock()
		}
	})
	s := e.open()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range calls {
			if d != 3*time.Millisecond {
				t.Fatalf("OnFsync(%v), want 3ms", d)
			}
		}
		return len(calls)
	}
	for i := range 3 {
		d, h := blobN(i, 100)
		if err := s.Put(h, d); err != nil {
			t.Fatal(err)
		}
		if got := count(); got != i+1 {
			t.Fatalf("after %d Puts OnFsync was called %d times", i+1, got)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != 4 {
		t.Fatalf("after Close OnFsync was called %d times, want 4", got)
	}
}

// TestPeriodicCheckpointTail checks the exact tail: the checkpoint taken
// when the interval is reached covers those appends, and recovery after a
// crash scans just the needles appended since.
func TestPeriodicCheckpointTail(t *testing.T) {
	need := volume.NeedleSize(1024)
	covered := make(chan int64, 10)
	e := newEnv(t, func(c *Config) {
		c.CheckpointInterval = 10 * need
		c.checkpointHook = func(n int64) { covered <- n }
	})
	s := e.open()
	for i := range 15 {
		d, h := blobN(i, 1024)
		if err := s.Put(h, d); err != nil {
			t.Fatal(err)
		}
		if i == 9 { // the interval is reached: wait for the checkpoint
			if got, want := <-covered, volume.SuperblockSize+10*need; got != want {
				t.Fatalf("checkpoint covers %d bytes, want %d", got, want)
			}
		}
	}
	e.fs.Crash()
	s = e.open()
	defer s.Close()
	if got := s.Stats().RecoveryScannedBytes; got != 5*need {
		t.Fatalf("recovery scanned %d bytes, want the 5 needles after the checkpoint: %d", got, 5*need)
	}
	if !strings.Contains(e.logs.String(), "checkpoint=true scanned_needles=5") {
		t.Fatalf("recovery did not use the background checkpoint:\n%s", e.logs.String())
	}
	for i := range 15 {
		d, h := blobN(i, 1024)
		mustGet(t, s, h, d)
	}
}
