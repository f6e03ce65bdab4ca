// Command apply measures the namespace state machine's apply ceiling
// (issue 35): how many log entries, and files, one node's meta.Apply
// takes a second on this machine's disk, with nothing else in the way (no
// Raft, no network, no blobs). Every node of a cluster applies every
// entry, so this bounds the cluster's rate of namespace changes whatever
// its size.
//
//	go run ./bench/apply [-dir DIR] [-files 1000000] [-per 100] [-cpuprofile FILE]
//
// It creates a bucket, then applies entries of -per OpPutFile commands
// each (new files of 1 KB in directories of 100, the shape of a bulk
// upload, as store.PutFiles proposes them), committing each entry's batch
// without a sync as the node does (the Raft log is the durable copy), and
// prints entries/s and files/s per tenth of the run, and overall: the
// rate as the tree grows. Bounded by -files.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
)

func main() {
	dir := flag.String("dir", "", "data directory (default: a temporary one, removed at the end)")
	files := flag.Int("files", 1000000, "files to apply")
	per := flag.Int("per", 100, "OpPutFile commands an entry")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the applies here")
	flag.Parse()
	if *dir == "" {
		d, err := os.MkdirTemp("", "cairn-bench-apply-")
		check(err)
		defer os.RemoveAll(d)
		*dir = d
	}
	db, err := kv.OpenPebble(filepath.Join(*dir, "meta"), kv.PebbleConfig{})
	check(err)
	defer db.Close()
	index := uint64(1)
	apply := func(cmds []meta.Command) {
		b := db.NewBatch()
		res, err := meta.Apply(b, index, cmds)
		check(err)
		for i := range res {
			if res[i].Err != nil {
				check(fmt.Errorf("command %d of entry %d: %w", i, index, res[i].Err))
			}
		}
		check(b.Commit(false))
		index++
	}
	now := time.Now().UnixNano()
	apply([]meta.Command{{Op: meta.OpCreateBucket, TimeNs: now, Bucket: &meta.Bucket{Name: "uploads", CreatedNs: now}}})
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		check(err)
		check(pprof.StartCPUProfile(f))
		defer pprof.StopCPUProfile()
	}
	start := time.Now()
	tenth := max(*files/10, *per)
	last, lastN := start, 0
	cmds := make([]meta.Command, 0, *per)
	for i := 0; i < *files; {
		cmds = cmds[:0]
		for k := 0; k < *per && i < *files; k, i = k+1, i+1 {
			sum := sha256.Sum256([]byte(fmt.Sprint(i)))
			var h cas.Hash
			copy(h[:], sum[:])
			cmds = append(cmds, meta.Command{Op: meta.OpPutFile, BucketName: "uploads", Path: fmt.Sprintf("d%06d/f%08d.bin", i/100, i),
				TimeNs: now, File: &meta.Inode{Type: meta.TypeFile, Mode: 0o644, Size: 1024, MtimeNs: now, CtimeNs: now,
					ETag: hex.EncodeToString(sum[:16]), SHA256: hex.EncodeToString(sum[:]), Extents: []meta.Extent{{Hash: h, Length: 1024}}}})
		}
		apply(cmds)
		if i-lastN >= tenth || i == *files {
			t := time.Now()
			fmt.Printf("at %d files: %.0f entries/s, %.0f files/s\n", i, float64(i-lastN)/float64(*per)/t.Sub(last).Seconds(), float64(i-lastN)/t.Sub(last).Seconds())
			last, lastN = t, i
		}
	}
	s := time.Since(start).Seconds()
	fmt.Printf("overall: files=%d per_entry=%d seconds=%.1f entries_per_s=%.0f files_per_s=%.0f\n", *files, *per, s, float64(*files)/float64(*per)/s, float64(*files)/s)
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "apply:", err)
		os.Exit(1)
	}
}
