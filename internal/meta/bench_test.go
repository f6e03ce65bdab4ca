package meta

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/cairn-fs/cairn/internal/kv"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// BenchmarkLookup3 resolves a 3-component path ("dNN/sNN/fNN.html") on an
// on-disk Pebble store holding 20,000 files, reopened so that they are in
// sstables.
// It measures the GET path's metadata cost without the path cache.
func BenchmarkLookup3(b *testing.B) {
	dir := b.TempDir()
	s, err := kv.OpenPebble(dir, kv.PebbleConfig{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	index := uint64(1)
	apply := func(cmds []Command) {
		bt := s.NewBatch()
		defer bt.Close()
		if _, err := Apply(bt, index, cmds); err != nil {
			b.Fatal(err)
		}
		if err := bt.Commit(false); err != nil {
			b.Fatal(err)
		}
		index++
	}
	apply([]Command{{Op: OpCreateBucket, Bucket: &Bucket{Name: "www"}}})
	const dirs, subs, files = 20, 10, 100
	for d := 0; d < dirs; d++ {
		for sd := 0; sd < subs; sd++ {
			var cmds []Command
			for f := 0; f < files; f++ {
				cmds = append(cmds, Command{Op: OpPutFile, BucketName: "www",
					Path: fmt.Sprintf("d%02d/s%02d/f%02d.html", d, sd, f), StartIndex: index,
					File: &Inode{ETag: "e", Size: 0}})
			}
			apply(cmds)
		}
	}
	// Reopen: Pebble replays the WAL into sstables, so reads go through
	// the block cache and Bloom filters rather than the memtable.
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if s, err = kv.OpenPebble(dir, kv.PebbleConfig{Logger: quietLogger()}); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	r := NewReader(s)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		p := fmt.Sprintf("d%02d/s%02d/f%02d.html", i%dirs, (i/dirs)%subs, (i/7)%files)
		n, err := r.Lookup("www", p)
		if err != nil || n.Type != TypeFile {
			b.Fatalf("lookup %s: %v", p, err)
		}
	}
}
