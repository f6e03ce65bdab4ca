// Command snapshot measures taking a snapshot of a big bucket (issue 23:
// the LAMP cluster's 470,000 files in at most 5 s, with no pause in
// serving or writing), on one node's core over its real disk (a lone
// node's log: in a cluster the snapshot is the same one entry, plus a
// Raft round trip):
//
//	go run ./bench/snapshot [-dir DIR] [-files 470000] [-writers 4] [-seconds 6]
//
// It ingests -files small files (PutFiles batches), then runs -writers
// goroutines putting files and readers stat-ing live files for -seconds,
// takes a snapshot in the middle, and prints the snapshot's latency, the
// writes' and reads' latency (p50, p99, max) in the second before, during
// and after it, a read of the snapshot, and the time to delete it. Every
// loop is bounded by -files and -seconds.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/cairn-fs/cairn/internal/core"
	"github.com/cairn-fs/cairn/internal/store"
	"github.com/cairn-fs/cairn/internal/vfs"
)

func main() {
	dir := flag.String("dir", "", "data directory (default: a temporary one, removed at the end)")
	files := flag.Int("files", 470000, "files in the bucket")
	writers := flag.Int("writers", 4, "concurrent writers (and as many readers) while the snapshot is taken")
	seconds := flag.Float64("seconds", 6, "length of the write/read phase; the snapshot is taken in its middle")
	flag.Parse()
	if *dir == "" {
		d, err := os.MkdirTemp("", "cairn-bench-snapshot-")
		check(err)
		defer os.RemoveAll(d)
		*dir = d
	}
	c, err := core.New(core.Config{FS: vfs.OS(), BlobDir: filepath.Join(*dir, "blobs"), KVDir: filepath.Join(*dir, "meta"),
		Logger: slog.New(slog.DiscardHandler)})
	check(err)
	defer c.Close()
	st := c.Store
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err = st.CreateBucket(ctx, store.BucketInfo{Name: "web"}); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	check(err)

	// Ingest: a PHP site's shape, 100 files a directory.
	start := time.Now()
	var wg sync.WaitGroup
	work := make(chan int, 64)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				batch := make([]store.FilePut, 0, 1000)
				for i := b; i < min(b+1000, *files); i++ {
					batch = append(batch, store.FilePut{Path: path(i), Data: []byte(fmt.Sprintf("<?php // file %d\n", i))})
				}
				for _, r := range st.PutFiles(ctx, "web", batch) {
					check(r.Err)
				}
			}
		}()
	}
	for b := 0; b < *files; b += 1000 {
		work <- b
	}
	close(work)
	wg.Wait()
	fmt.Printf("ingest: %d files in %v (%.0f files/s)\n", *files, time.Since(start).Round(time.Millisecond),
		float64(*files)/time.Since(start).Seconds())

	// Writers and readers run; the snapshot is taken in the middle.
	type sample struct {
		at  time.Time
		lat time.Duration
	}
	var mu sync.Mutex
	var writes, reads []sample
	phase := time.Duration(*seconds * float64(time.Second))
	end := time.Now().Add(phase)
	for w := range *writers {
		wg.Add(2)
		go func() { // writer: overwrites and new files
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := 0; time.Now().Before(end) && i < 1e6; i++ {
				p := path(rng.IntN(*files))
				if i%4 == 0 {
					p = fmt.Sprintf("uploads/w%d/%07d.jpg", w, i)
				}
				t0 := time.Now()
				r := st.PutFiles(ctx, "web", []store.FilePut{{Path: p, Data: []byte(fmt.Sprintf("changed %d %d", w, i))}})
				check(r[0].Err)
				mu.Lock()
				writes = append(writes, sample{t0, time.Since(t0)})
				mu.Unlock()
			}
		}()
		go func() { // reader: stats of live files
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			for i := 0; time.Now().Before(end) && i < 1e7; i++ {
				t0 := time.Now()
				_, err := st.Stat(ctx, "web", path(rng.IntN(*files)))
				check(err)
				mu.Lock()
				reads = append(reads, sample{t0, time.Since(t0)})
				mu.Unlock()
			}
		}()
	}
	time.Sleep(phase / 2)
	snapAt := time.Now()
	info, err := st.SnapshotCreate(ctx, "web", "bench")
	check(err)
	snapLat := time.Since(snapAt)
	wg.Wait()
	fmt.Printf("snapshot of %d files: %v (log index %d)\n", *files, snapLat.Round(time.Microsecond), info.Index)
	window := func(name string, ss []sample, from, to time.Time) {
		var l []time.Duration
		for _, s := range ss {
			if !s.at.Before(from) && s.at.Before(to) {
				l = append(l, s.lat)
			}
		}
		if len(l) == 0 {
			fmt.Printf("  %-6s %-22s none\n", name, "")
			return
		}
		slices.Sort(l)
		fmt.Printf("  %-6s n=%-6d p50 %-9v p99 %-9v max %v\n", name, len(l), l[len(l)/2].Round(time.Microsecond),
			l[len(l)*99/100].Round(time.Microsecond), l[len(l)-1].Round(time.Microsecond))
	}
	for _, w := range []struct {
		name     string
		from, to time.Time
	}{
		{"the second before the snapshot", snapAt.Add(-time.Second), snapAt},
		{"while it was taken, and 1 s after", snapAt, snapAt.Add(snapLat + time.Second)},
		{"later", snapAt.Add(snapLat + time.Second), end},
	} {
		fmt.Println(w.name + ":")
		window("writes", writes, w.from, w.to)
		window("reads", reads, w.from, w.to)
	}
	// Reading it: the snapshot holds the file as it was.
	v, err := st.OpenSnapshot(ctx, "web", "bench")
	check(err)
	t0 := time.Now()
	res, err := v.List(ctx, store.ListOptions{Prefix: "site/d0000/", Limit: 1000})
	check(err)
	fmt.Printf("list a directory of the snapshot: %d entries in %v\n", len(res.Entries), time.Since(t0).Round(time.Microsecond))
	v.Close()
	t0 = time.Now()
	check(st.SnapshotDelete(ctx, "web", "bench"))
	fmt.Printf("delete the snapshot: %v\n", time.Since(t0).Round(time.Millisecond))
}

func path(i int) string { return fmt.Sprintf("site/d%04d/f%03d.php", i/100, i%100) }

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "snapshot bench:", err)
		os.Exit(1)
	}
}
