package blob

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cairn-fs/cairn/internal/vfs"
)

// putMany calls PutMany for blobs ids (content blobN(id, size(id))).
func putMany(s *Store, ids []int, size func(int) int) []error {
	hs := make([]Hash, len(ids))
	data := make([][]byte, len(ids))
	for i, id := range ids {
		data[i], hs[i] = blobN(id, size(id))
	}
	return s.PutMany(hs, data)
}

// countVolOps counts writes and fsyncs of volume files.
func countVolOps(e *env) (writes, syncs *atomic.Int32) {
	writes, syncs = new(atomic.Int32), new(atomic.Int32)
	e.fs.SetFault(func(op vfs.Op, name string) error {
		if strings.HasSuffix(name, ".vol") {
			switch op {
			case vfs.OpWrite:
				writes.Add(1)
			case vfs.OpSync:
				syncs.Add(1)
			}
		}
		return nil
	})
	return writes, syncs
}

func TestPutManyOneWriteOneFsync(t *testing.T) {
	e := newEnv(t, nil)
	s := e.open()
	size := func(id int) int { return 100 + id*13 }
	pre, ph := blobN(1, size(1))
	if err := s.Put(ph, pre); err != nil {
		t.Fatal(err)
	}
	writes, syncs := countVolOps(e)
	// Blob 1 is stored already, blob 5 appears twice, blob 9 is too large.
	ids := []int{1, 2, 3, 4, 5, 5, 6, 7}
	hs := make([]Hash, 0, len(ids)+1)
	data := make([][]byte, 0, len(ids)+1)
	for _, id := range ids {
		d, h := blobN(id, size(id))
		hs, data = append(hs, h), append(data, d)
	}
	big := make([]byte, MaxSize+1)
	hs, data = append(hs, Sum(big)), append(data, big)
	errs := s.PutMany(hs, data)
	for i, err := range errs[:len(ids)] {
		if err != nil {
			t.Fatalf("blob %d: %v", ids[i], err)
		}
	}
	if !errors.Is(errs[len(ids)], ErrTooLarge) {
		t.Fatalf("too large blob: %v", errs[len(ids)])
	}
	if w, f := writes.Load(), syncs.Load(); w != 1 || f != 1 {
		t.Fatalf("PutMany of 6 new blobs: %d writes, %d fsyncs; want 1 and 1", w, f)
	}
	e.fs.SetFault(nil)
	if n := s.Stats().Blobs; n != 7 {
		t.Fatalf("%d blobs, want 7", n)
	}
	// Everything acknowledged survives a crash.
	e.fs.CrashTorn(rand.New(rand.NewPCG(7, 7)))
	s = e.open()
	defer s.Close()
	for _, id := range ids {
		d, h := blobN(id, size(id))
		mustGet(t, s, h, d)
	}
	// All present: no write, no fsync.
	writes, syncs = countVolOps(e)
	for i, err := range putMany(s, ids, size) {
		if err != nil {
			t.Fatalf("again, blob %d: %v", ids[i], err)
		}
	}
	if w, f := writes.Load(), syncs.Load(); w != 0 || f != 0 {
		t.Fatalf("PutMany of stored blobs: %d writes, %d fsyncs", w, f)
	}
}

func TestPutManySpansVolumes(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxVolumeSize = 32 << 10 })
	s := e.open()
	size := func(id int) int { return 3000 + id*11 }
	ids := make([]int, 40)
	for i := range ids {
		ids[i] = 100 + i
	}
	for i, err := range putMany(s, ids, size) {
		if err != nil {
			t.Fatalf("blob %d: %v", ids[i], err)
		}
	}
	if v := s.Stats().Volumes; v < 3 {
		t.Fatalf("%d volumes, want several", v)
	}
	e.fs.CrashTorn(rand.New(rand.NewPCG(1, 2)))
	s = e.open()
	defer s.Close()
	for _, id := range ids {
		d, h := blobN(id, size(id))
		mustGet(t, s, h, d)
	}
}

func TestPutManyFsyncFailure(t *testing.T) {
	e := newEnv(t, nil)
	s := e.open()
	defer s.Close()
	e.fs.SetFault(func(op vfs.Op, name string) error {
		if op == vfs.OpSync {
			return syscall.EIO
		}
		return nil
	})
	size := func(int) int { return 500 }
	ids := []int{1, 2, 3}
	for i, err := range putMany(s, ids, size) {
		if !errors.Is(err, ErrReadOnly) {
			t.Fatalf("blob %d with failing fsync: %v, want ErrReadOnly", ids[i], err)
		}
	}
	e.fs.SetFault(nil)
	for _, id := range ids {
		if _, h := blobN(id, 500); s.Has(h) {
			t.Fatalf("unacknowledged blob %d reported as stored", id)
		}
	}
	for _, err := range putMany(s, []int{4, 5}, size) {
		if !errors.Is(err, ErrReadOnly) {
			t.Fatalf("later PutMany: %v", err)
		}
	}
}

func TestPutManyENOSPC(t *testing.T) {
	e := newEnv(t, nil)
	s := e.open()
	defer s.Close()
	size := func(int) int { return 5000 }
	if errs := putMany(s, []int{1}, size); errs[0] != nil {
		t.Fatal(errs[0])
	}
	bytesBefore := s.Stats().Bytes
	e.fs.SetFault(func(op vfs.Op, name string) error {
		if op == vfs.OpWrite && strings.HasSuffix(name, ".vol") {
			return vfs.ShortWrite(7000, syscall.ENOSPC)
		}
		return nil
	})
	for _, err := range putMany(s, []int{2, 3, 4}, size) {
		if !errors.Is(err, ErrNoSpace) {
			t.Fatalf("PutMany on full disk: %v, want ErrNoSpace", err)
		}
	}
	e.fs.SetFault(nil)
	if st := s.Stats(); st.ReadOnly || st.Bytes != bytesBefore || st.Blobs != 1 {
		t.Fatalf("after ENOSPC: %+v (bytes before %d)", st, bytesBefore)
	}
	for _, err := range putMany(s, []int{2, 3, 4}, size) {
		if err != nil {
			t.Fatalf("PutMany once space is back: %v", err)
		}
	}
}

// TestPutManyRandomized mixes PutMany batches (with duplicates), Puts,
// Deletes, compactions, restarts and torn crashes against a model.
func TestPutManyRandomized(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0xBA7C4))
			e := newEnv(t, func(c *Config) {
				c.MaxVolumeSize = 24 << 10
				c.CompactGarbageRatio = 0.3
				c.CheckpointInterval = 16 << 10
			})
			s := e.open()
			model := map[Hash][]byte{}
			const pool = 60
			size := func(i int) int { return 1 + (i*997)%5000 }
			for step := 0; step < 400; step++ {
				switch r := rng.IntN(100); {
				case r < 40:
					ids := make([]int, 1+rng.IntN(8))
					for i := range ids {
						ids[i] = rng.IntN(pool)
					}
					for i, err := range putMany(s, ids, size) {
						if err != nil {
							t.Fatalf("step %d: PutMany blob %d: %v", step, ids[i], err)
						}
						d, h := blobN(ids[i], size(ids[i]))
						model[h] = d
					}
				case r < 50:
					i := rng.IntN(pool)
					d, h := blobN(i, size(i))
					if err := s.Put(h, d); err != nil {
						t.Fatalf("step %d: put: %v", step, err)
					}
					model[h] = d
				case r < 75:
					i := rng.IntN(pool)
					_, h := blobN(i, size(i))
					if err := s.Delete(h); err != nil {
						t.Fatalf("step %d: delete: %v", step, err)
					}
					delete(model, h)
				case r < 85:
					if _, err := s.Compact(); err != nil {
						t.Fatalf("step %d: compact: %v", step, err)
					}
				case r < 92:
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
					d, h := blobN(i, size(i))
					_, ok := model[h]
					if s.Has(h) != ok {
						t.Fatalf("blob %d: Has=%v, model %v", i, !ok, ok)
					}
					if ok {
						got, err := s.Get(h, nil)
						if err != nil || !bytes.Equal(got, d) {
							t.Fatalf("blob %d: %v", i, err)
						}
					}
				}
				if st := s.Stats(); st.Blobs != int64(len(model)) {
					t.Fatalf("%d blobs, model %d", st.Blobs, len(model))
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

// BenchmarkPutBatch writes batches of 8 new 8 KiB blobs, as a replica's
// PutBlobs receives them: "concurrent" with one Put per blob on its own
// goroutine (the receiver before PutMany), "putmany" with one PutMany.
// One op is one batch.
func BenchmarkPutBatch(b *testing.B) {
	for _, fsName := range []string{"mem", "os"} {
		for _, mode := range []string{"concurrent", "putmany"} {
			b.Run(fsName+"/"+mode, func(b *testing.B) {
				cfg := Config{Dir: b.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MinFreeBytes: -1}
				if fsName == "mem" {
					cfg.FS, cfg.Dir = vfs.NewMem(), dir
				}
				s, err := Open(cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				const per = 8
				base := make([]byte, 8<<10)
				n := 0
				hs := make([]Hash, per)
				data := make([][]byte, per)
				for i := range data {
					data[i] = bytes.Clone(base)
				}
				b.SetBytes(per * 8 << 10)
				for b.Loop() {
					for i := range data {
						binary.LittleEndian.PutUint64(data[i], uint64(n))
						n++
						hs[i] = Sum(data[i])
					}
					if mode == "putmany" {
						for _, err := range s.PutMany(hs, data) {
							if err != nil {
								b.Fatal(err)
							}
						}
						continue
					}
					var wg sync.WaitGroup
					errs := make([]error, per)
					for i := range data {
						wg.Add(1)
						go func() {
							defer wg.Done()
							errs[i] = s.Put(hs[i], data[i])
						}()
					}
					wg.Wait()
					for _, err := range errs {
						if err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}
