package consensus

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"testing"

	"github.com/cairn-fs/cairn/internal/kv"
)

// genState is a namespace of n made-up records of 100 bytes, generated as
// it is scanned (it takes no memory), at applied index index.
type genState struct {
	n     int
	index uint64
}

func (g genState) Get([]byte) ([]byte, error) { return nil, kv.ErrNotFound }

func (g genState) Scan(lower, upper []byte, fn func(k, v []byte) bool) error {
	if lower != nil { // only the first namespace range has records
		return nil
	}
	v := make([]byte, 100)
	for i := range g.n {
		binary.BigEndian.PutUint64(v, uint64(i))
		if !fn(fmt.Appendf(nil, "d%09d", i), v) {
			return nil
		}
	}
	fn([]byte("mapplied"), binary.BigEndian.AppendUint64(nil, g.index))
	return nil
}

// Installing a snapshot holds a bounded amount of memory whatever the
// namespace's size: the stream goes into sstables on disk as it comes
// (issue 35: a fourth node joining a million files peaked at 1.9 GB when
// the whole snapshot was staged in one Pebble batch). 400,000 records of
// 100 bytes (46 MB) are staged holding less than 16 MB; in a batch they
// held more than the data.
func TestSnapshotInstallMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("stages 46 MB")
	}
	const n = 400_000
	dst, err := kv.OpenPebble(t.TempDir(), kv.PebbleConfig{CacheSize: 1 << 20, MemTableSize: 4 << 20, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeSnapshot(pw, genState{n: n, index: 7}, 7, 3)) }()
	g, err := dst.NewIngest()
	if err != nil {
		t.Fatal(err)
	}
	if err := stageSnapshotIngest(pr, dst, g, 7, 3); err != nil {
		t.Fatal(err)
	}
	held := int64(heap()) - int64(before)
	t.Logf("staged %d MB, %.1f MB held", g.Staged()>>20, float64(held)/(1<<20))
	if held > 16<<20 {
		t.Errorf("staging held %.1f MB of heap for %d MB of records", float64(held)/(1<<20), g.Staged()>>20)
	}
	if err := g.Apply(); err != nil {
		t.Fatal(err)
	}
	count := 0
	if err := dst.Scan([]byte("d"), []byte("e"), func(k, v []byte) bool { count++; return true }); err != nil || count != n {
		t.Fatalf("%d records installed, want %d (%v)", count, n, err)
	}
}
