package spill

import (
	"fmt"
	"os"
	"testing"
)

// A map that spills keeps every key, in order, and reads its own writes
// across the move; Close removes the directory.
func TestSpill(t *testing.T) {
	for _, memEntries := range []int{DefaultMemEntries, 1000, -1} {
		dir := t.TempDir()
		m := New(Options{Dir: dir, MemEntries: memEntries})
		const n = 20000
		for i := n - 1; i >= 0; i-- {
			if err := m.Set(fmt.Appendf(nil, "k%06d", i), fmt.Appendf(nil, "v%d", i)); err != nil {
				t.Fatal(err)
			}
			if i%1000 == 0 {
				if v, ok, err := m.Get(fmt.Appendf(nil, "k%06d", i)); err != nil || !ok || string(v) != fmt.Sprintf("v%d", i) {
					t.Fatalf("get of a key just set: %q %v %v", v, ok, err)
				}
			}
		}
		if err := m.Delete([]byte("k000005")); err != nil {
			t.Fatal(err)
		}
		if err := m.Set([]byte("other"), nil); err != nil {
			t.Fatal(err)
		}
		if got, want := m.Spilled(), memEntries < n; got != want {
			t.Fatalf("MemEntries %d: spilled %v, want %v", memEntries, got, want)
		}
		count, last := 0, ""
		if err := m.Scan([]byte("k"), func(k, v []byte) bool {
			if string(k) <= last || string(k) == "k000005" {
				t.Fatalf("scan: %q after %q", k, last)
			}
			last = string(k)
			count++
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if count != n-1 {
			t.Fatalf("MemEntries %d: scanned %d keys, want %d", memEntries, count, n-1)
		}
		if ok, _ := m.Has([]byte("k000005")); ok {
			t.Fatal("a deleted key is there")
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Fatalf("Close left %d entries in the directory", len(ents))
		}
	}
}
