package kv

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	pvfs "github.com/cockroachdb/pebble/v2/vfs"
)

// impls lists the Store implementations the conformance suite runs against.
func impls(t *testing.T) map[string]func() Store {
	return map[string]func() Store{
		"mem": NewMem,
		"pebble": func() Store {
			s, err := OpenPebble("db", PebbleConfig{FS: pvfs.NewMem(), Logger: discardLogger()})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
}

func forEach(t *testing.T, f func(t *testing.T, s Store)) {
	for name, open := range impls(t) {
		t.Run(name, func(t *testing.T) {
			s := open()
			defer func() {
				if err := s.Close(); err != nil {
					t.Error(err)
				}
			}()
			f(t, s)
		})
	}
}

func mustSet(t *testing.T, s Store, kvs ...string) {
	t.Helper()
	b := s.NewBatch()
	for i := 0; i+1 < len(kvs); i += 2 {
		if err := b.Set([]byte(kvs[i]), []byte(kvs[i+1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
}

func scanAll(t *testing.T, r Reader, lower, upper []byte) string {
	t.Helper()
	var parts []string
	if err := r.Scan(lower, upper, func(k, v []byte) bool {
		parts = append(parts, string(k)+"="+string(v))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return strings.Join(parts, " ")
}

func b(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

func TestGetSetDelete(t *testing.T) {
	forEach(t, func(t *testing.T, s Store) {
		if _, err := s.Get([]byte("a")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get missing: %v", err)
		}
		mustSet(t, s, "a", "1", "b", "", "c", "3")
		v, err := s.Get([]byte("a"))
		if err != nil || string(v) != "1" {
			t.Fatalf("get a = %q, %v", v, err)
		}
		v[0] = 'X' // Get returns a copy
		if v2, _ := s.Get([]byte("a")); string(v2) != "1" {
			t.Fatalf("Get did not return a copy: %q", v2)
		}
		if v, err := s.Get([]byte("b")); err != nil || len(v) != 0 {
			t.Fatalf("empty value: %q, %v", v, err)
		}
		bt := s.NewBatch()
		if err := bt.Delete([]byte("a")); err != nil {
			t.Fatal(err)
		}
		if err := bt.Set([]byte("c"), []byte("33")); err != nil {
			t.Fatal(err)
		}
		if err := bt.Commit(true); err != nil {
			t.Fatal(err)
		}
		if err := bt.Close(); err != nil { // no-op after Commit
			t.Fatal(err)
		}
		if got := scanAll(t, s, nil, nil); got != "b= c=33" {
			t.Fatalf("after delete: %q", got)
		}
	})
}

func TestScanBounds(t *testing.T) {
	forEach(t, func(t *testing.T, s Store) {
		mustSet(t, s, "a", "1", "ab", "2", "b", "3", "b\x00", "4", "c", "5")
		for _, tc := range []struct{ lo, hi, want string }{
			{"", "", "a=1 ab=2 b=3 b\x00=4 c=5"},
			{"ab", "", "ab=2 b=3 b\x00=4 c=5"},
			{"", "b", "a=1 ab=2"},
			{"b", "b\x00", "b=3"},
			{"aa", "bb", "ab=2 b=3 b\x00=4"},
			{"c", "a", ""},
			{"d", "", ""},
		} {
			if got := scanAll(t, s, b(tc.lo), b(tc.hi)); got != tc.want {
				t.Errorf("scan [%q,%q) = %q, want %q", tc.lo, tc.hi, got, tc.want)
			}
		}
		n := 0
		if err := s.Scan(nil, nil, func(k, v []byte) bool { n++; return n < 2 }); err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			t.Fatalf("early stop visited %d keys, want 2", n)
		}
	})
}

func TestBatchReadYourWrites(t *testing.T) {
	forEach(t, func(t *testing.T, s Store) {
		mustSet(t, s, "a", "1", "b", "2", "d", "4")
		bt := s.NewBatch()
		defer bt.Close()
		must(t, bt.Set([]byte("c"), []byte("3")))
		must(t, bt.Delete([]byte("b")))
		must(t, bt.Set([]byte("d"), []byte("44")))
		must(t, bt.Set([]byte("e"), []byte("5")))
		if v, err := bt.Get([]byte("c")); err != nil || string(v) != "3" {
			t.Fatalf("batch get c: %q %v", v, err)
		}
		if _, err := bt.Get([]byte("b")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("batch get deleted b: %v", err)
		}
		if got := scanAll(t, bt, nil, nil); got != "a=1 c=3 d=44 e=5" {
			t.Fatalf("batch scan: %q", got)
		}
		if got := scanAll(t, bt, []byte("b"), []byte("e")); got != "c=3 d=44" {
			t.Fatalf("batch scan bounded: %q", got)
		}
		n := 0
		must(t, bt.Scan(nil, nil, func(k, v []byte) bool { n++; return n < 3 }))
		if n != 3 {
			t.Fatalf("early stop visited %d", n)
		}
		// Not visible outside before Commit.
		if got := scanAll(t, s, nil, nil); got != "a=1 b=2 d=4" {
			t.Fatalf("store sees uncommitted writes: %q", got)
		}
		must(t, bt.Commit(false))
		if got := scanAll(t, s, nil, nil); got != "a=1 c=3 d=44 e=5" {
			t.Fatalf("after commit: %q", got)
		}
	})
}

func TestBatchCloseDiscards(t *testing.T) {
	forEach(t, func(t *testing.T, s Store) {
		bt := s.NewBatch()
		must(t, bt.Set([]byte("a"), []byte("1")))
		must(t, bt.Close())
		if got := scanAll(t, s, nil, nil); got != "" {
			t.Fatalf("closed batch leaked: %q", got)
		}
	})
}

func TestSnapshotIsolation(t *testing.T) {
	forEach(t, func(t *testing.T, s Store) {
		mustSet(t, s, "a", "1", "b", "2")
		snap := s.Snapshot()
		defer snap.Close()
		bt := s.NewBatch()
		must(t, bt.Delete([]byte("a")))
		must(t, bt.Set([]byte("b"), []byte("22")))
		must(t, bt.Set([]byte("c"), []byte("3")))
		must(t, bt.Commit(false))
		if got := scanAll(t, snap, nil, nil); got != "a=1 b=2" {
			t.Fatalf("snapshot scan: %q", got)
		}
		if v, err := snap.Get([]byte("a")); err != nil || string(v) != "1" {
			t.Fatalf("snapshot get: %q %v", v, err)
		}
		if _, err := snap.Get([]byte("c")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("snapshot sees later key: %v", err)
		}
		if got := scanAll(t, s, nil, nil); got != "b=22 c=3" {
			t.Fatalf("store: %q", got)
		}
	})
}

// TestCommitAtomicity checks that a concurrent reader never sees part of a
// batch: every batch rewrites all keys with one generation number.
func TestCommitAtomicity(t *testing.T) {
	forEach(t, func(t *testing.T, s Store) {
		const keys, gens = 20, 200
		done := make(chan error, 1)
		go func() {
			for g := 0; g < gens; g++ {
				bt := s.NewBatch()
				for k := 0; k < keys; k++ {
					if err := bt.Set(fmt.Appendf(nil, "k%02d", k), fmt.Appendf(nil, "%d", g)); err != nil {
						done <- err
						return
					}
				}
				if err := bt.Commit(false); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		reads := 0
		for finished := false; !finished; {
			select {
			case err := <-done:
				must(t, err)
				finished = true
			default:
			}
			var vals [][]byte
			snap := s.Snapshot()
			must(t, snap.Scan(nil, nil, func(k, v []byte) bool {
				vals = append(vals, bytes.Clone(v))
				return true
			}))
			must(t, snap.Close())
			if len(vals) != 0 && len(vals) != keys {
				t.Fatalf("saw %d of %d keys", len(vals), keys)
			}
			for _, v := range vals {
				if !bytes.Equal(v, vals[0]) {
					t.Fatalf("torn batch: %q vs %q", v, vals[0])
				}
			}
			reads++
		}
		if got := scanAll(t, s, []byte("k00"), []byte("k01")); got != fmt.Sprintf("k00=%d", gens-1) {
			t.Fatalf("final: %q", got)
		}
		t.Logf("%d consistent reads", reads)
	})
}

// TestRandomAgainstModel runs random batches against both stores and a map
// model, comparing every read.
func TestRandomAgainstModel(t *testing.T) {
	forEach(t, func(t *testing.T, s Store) {
		rng := rand.New(rand.NewPCG(1, 2))
		model := map[string]string{}
		key := func() []byte { return fmt.Appendf(nil, "%c%d", 'a'+rng.IntN(4), rng.IntN(30)) }
		for round := 0; round < 200; round++ {
			bt := s.NewBatch()
			pending := map[string]*string{}
			for i := rng.IntN(8); i >= 0; i-- {
				k := key()
				if rng.IntN(3) == 0 {
					must(t, bt.Delete(k))
					pending[string(k)] = nil
				} else {
					v := fmt.Sprint(rng.IntN(1000))
					must(t, bt.Set(k, []byte(v)))
					pending[string(k)] = &v
				}
			}
			view := maps(model, pending)
			lo, hi := key(), key()
			if got, want := scanAll(t, bt, lo, hi), modelScan(view, lo, hi); got != want {
				t.Fatalf("round %d batch scan [%s,%s): got %q want %q", round, lo, hi, got, want)
			}
			if rng.IntN(4) == 0 {
				must(t, bt.Close())
			} else {
				must(t, bt.Commit(false))
				model = view
			}
			if got, want := scanAll(t, s, nil, nil), modelScan(model, nil, nil); got != want {
				t.Fatalf("round %d: got %q want %q", round, got, want)
			}
		}
	})
}

func maps(base map[string]string, pending map[string]*string) map[string]string {
	out := make(map[string]string, len(base))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range pending {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = *v
		}
	}
	return out
}

func modelScan(m map[string]string, lo, hi []byte) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		if (lo == nil || k >= string(lo)) && (hi == nil || k < string(hi)) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(slices.Clip(parts), " ")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestBatchGetAgainstModel interleaves a batch's Sets, Deletes and Gets
// (repeated reads of the same keys, as meta.Apply does) with commits of
// other batches, and checks every Get against a model: the store's latest
// committed state with the batch's own writes on top.
func TestBatchGetAgainstModel(t *testing.T) {
	forEach(t, func(t *testing.T, s Store) {
		rng := rand.New(rand.NewPCG(3, 4))
		model := map[string]string{}
		key := func() []byte { return fmt.Appendf(nil, "k%d", rng.IntN(12)) }
		check := func(round int, bt Batch, pending map[string]*string) {
			t.Helper()
			view := maps(model, pending)
			for i := 0; i < 12; i++ {
				k := fmt.Sprintf("k%d", i)
				v, err := bt.Get([]byte(k))
				want, ok := view[k]
				switch {
				case !ok && !errors.Is(err, ErrNotFound):
					t.Fatalf("round %d: get %s = %q, %v; want not found", round, k, v, err)
				case ok && (err != nil || string(v) != want):
					t.Fatalf("round %d: get %s = %q, %v; want %q", round, k, v, err, want)
				case ok && v == nil:
					t.Fatalf("round %d: get %s returned nil for a present value", round, k)
				}
				if ok && len(v) > 0 {
					v[0] ^= 0xff // the caller owns the copy
				}
			}
		}
		for round := 0; round < 300; round++ {
			bt := s.NewBatch()
			pending := map[string]*string{}
			for step := rng.IntN(10); step >= 0; step-- {
				switch rng.IntN(5) {
				case 0:
					k := key()
					must(t, bt.Delete(k))
					pending[string(k)] = nil
				case 1, 2:
					k := key()
					v := fmt.Sprint(rng.IntN(3)) // "" sometimes below
					if rng.IntN(4) == 0 {
						v = ""
					}
					must(t, bt.Set(k, []byte(v)))
					pending[string(k)] = &v
				case 3:
					// Another batch commits while bt is open: bt's reads
					// of keys it has not written must see it.
					o := s.NewBatch()
					k := key()
					if rng.IntN(3) == 0 {
						must(t, o.Delete(k))
						delete(model, string(k))
					} else {
						v := fmt.Sprint(100 + rng.IntN(100))
						must(t, o.Set(k, []byte(v)))
						model[string(k)] = v
					}
					must(t, o.Commit(false))
				}
				check(round, bt, pending)
			}
			if rng.IntN(4) == 0 {
				must(t, bt.Close())
			} else {
				must(t, bt.Commit(false))
				model = maps(model, pending)
			}
			if got, want := scanAll(t, s, nil, nil), modelScan(model, nil, nil); got != want {
				t.Fatalf("round %d: got %q want %q", round, got, want)
			}
		}
	})
}
