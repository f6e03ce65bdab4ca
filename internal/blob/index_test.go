package blob

import (
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"testing"
)

func TestIndexCollisionsAndRemove(t *testing.T) {
	ix := newIndex()
	rng := rand.New(rand.NewPCG(3, 4))
	type ent struct {
		h Hash
		l loc
	}
	// Many hashes in one shard with few distinct keys, so probe runs are long
	// and keys collide: exercises backward-shift deletion and candidate lists.
	var model []ent
	for i := 0; i < 3000; i++ {
		var h Hash
		binary.LittleEndian.PutUint64(h[0:8], uint64(rng.IntN(1000)))
		h[8] = 7
		binary.LittleEndian.PutUint64(h[16:24], uint64(i))
		model = append(model, ent{h, loc{vol: 1, off: uint32(i), n: uint32(i)}})
	}
	present := map[int]bool{}
	for step := 0; step < 20000; step++ {
		i := rng.IntN(len(model))
		e := model[i]
		if present[i] {
			if !ix.remove(&e.h, e.l) {
				t.Fatalf("step %d: remove of present entry %d failed", step, i)
			}
			delete(present, i)
		} else {
			ix.insert(&e.h, e.l)
			present[i] = true
		}
		if step%500 == 0 || step == 19999 {
			for j, e := range model {
				if got := ix.has(&e.h, e.l); got != present[j] {
					t.Fatalf("step %d: has(%d) = %v, want %v", step, j, got, present[j])
				}
			}
			if ix.len() != int64(len(present)) {
				t.Fatalf("len %d, want %d", ix.len(), len(present))
			}
		}
	}
	// lookup returns the entries sharing the 72-bit prefix.
	var a, b Hash
	a[31], b[31] = 1, 2
	ix2 := newIndex()
	ix2.insert(&a, loc{1, 1, 1})
	ix2.insert(&b, loc{1, 2, 2})
	if _, n := ix2.lookup(&a); n != 2 {
		t.Fatalf("lookup of colliding prefix returned %d candidates, want 2", n)
	}
	if !ix2.replace(&a, loc{1, 1, 1}, loc{2, 5, 1}) || ix2.replace(&a, loc{1, 1, 1}, loc{3, 3, 3}) {
		t.Fatal("replace should succeed once, then fail on the stale location")
	}
}

func indexHeapPerBlob(n int) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ix := newIndex()
	var h Hash
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint64(h[0:8], uint64(i)*0x9E3779B97F4A7C15)
		h[8] = byte(uint64(i) * 0xC2B2AE3D27D4EB4F >> 56)
		ix.insert(&h, loc{vol: 1, off: uint32(i), n: 100})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(ix)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

func TestIndexMemoryPerBlob(t *testing.T) {
	if got := indexHeapPerBlob(200_000); got > 64 {
		t.Fatalf("index uses %.1f bytes per blob, budget 64", got)
	} else {
		t.Logf("index uses %.1f bytes per blob", got)
	}
}

func BenchmarkIndexMemory(b *testing.B) {
	var per float64
	for i := 0; i < b.N; i++ {
		per = indexHeapPerBlob(1_000_000)
	}
	b.ReportMetric(per, "bytes/blob")
}

func BenchmarkIndexLookup(b *testing.B) {
	ix := newIndex()
	hs := make([]Hash, 1<<16)
	for i := range hs {
		hs[i] = Sum(binary.LittleEndian.AppendUint64(nil, uint64(i)))
		ix.insert(&hs[i], loc{1, uint32(i), 10})
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, n := ix.lookup(&hs[i&(len(hs)-1)]); n != 1 {
				b.Fatal("miss")
			}
			i++
		}
	})
}
