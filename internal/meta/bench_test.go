package meta

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/cairn-fs/cairn/internal/cas"
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

// BenchmarkApplyPutFiles applies batches of 64 new files (one extent each,
// a distinct blob) 4 directories deep, as a replica applies a cairn sync
// ingest, on an on-disk Pebble store already holding 20,000 files; one op
// is one file.
func BenchmarkApplyPutFiles(b *testing.B) {
	s, err := kv.OpenPebble(b.TempDir(), kv.PebbleConfig{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	index := uint64(1)
	apply := func(cmds []Command) {
		bt := s.NewBatch()
		defer bt.Close()
		res, err := Apply(bt, index, cmds)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		if err := bt.Commit(false); err != nil {
			b.Fatal(err)
		}
		index++
	}
	apply([]Command{{Op: OpCreateBucket, Bucket: &Bucket{Name: "kernel"}}})
	n := 0
	batch := func() []Command {
		cmds := make([]Command, 64)
		for i := range cmds {
			var h cas.Hash
			binary.BigEndian.PutUint64(h[:], uint64(n)*0x9e3779b97f4a7c15)
			binary.BigEndian.PutUint64(h[24:], uint64(n))
			cmds[i] = Command{Op: OpPutFile, BucketName: "kernel", StartIndex: index,
				Path: fmt.Sprintf("linux/d%02d/s%03d/f%06d.c", (n/2000)%50, (n/40)%500, n),
				File: &Inode{ETag: "e", Size: 100, Extents: []Extent{{Hash: h, Length: 100}}}}
			n++
		}
		return cmds
	}
	for n < 20000 {
		apply(batch())
	}
	b.ResetTimer()
	for b.Loop() {
		apply(batch())
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*64), "ns/file")
}
