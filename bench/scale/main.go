// Command scale is the load side of bench/scale.sh (issue 35): it ingests
// an upload tree of small files into a cluster through the bulk path, and
// probes the latencies that must not grow with the tree.
//
//	go run ./bench/scale ingest -urls U1,U2,U3 -bucket uploads -from 0 -to 100000 [-batch 20000] [-streams 3]
//	go run ./bench/scale probe -url U -bucket uploads -files N [-n 2000] [-mount DIR]
//
// ingest stores files from..to-1 (file i is dNNNNNN/fNNNNNNNN.bin in
// directory i/100, 100 to 2,047 bytes of content that no other file
// repeats) as tar archives of -batch files (POST ?extract=tar), -streams
// at a time, spread over the nodes, and prints files=N seconds=S
// files_per_s=R. probe reads -n random files of the first -files (GET
// through -url), lists -n/10 random directories (100 entries each), and,
// with -mount, stats -n random files through that mount; it prints the
// p50 and p99 of each. Every loop is bounded by its counts. Requests
// carry the admin key of CAIRN_ADMIN_KEY (bench/lib.sh sets it).
package main

import (
	"archive/tar"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-fs/cairn/client"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: scale ingest|probe [flags]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "ingest":
		ingest(os.Args[2:])
	case "probe":
		probe(os.Args[2:])
	default:
		fmt.Fprintln(os.Stderr, "usage: scale ingest|probe [flags]")
		os.Exit(2)
	}
}

// name is file i's path in the bucket.
func name(i int) string { return fmt.Sprintf("d%06d/f%08d.bin", i/100, i) }

// content is file i's bytes: 100 to 2,047 of them, unique to i.
func content(i int, buf []byte) []byte {
	r := rand.New(rand.NewPCG(uint64(i), 0x5ca1e))
	n := 100 + r.IntN(1948)
	buf = buf[:0]
	buf = binary.BigEndian.AppendUint64(buf, uint64(i)) // unique even where the rest repeats
	for len(buf) < n {
		buf = binary.BigEndian.AppendUint64(buf, r.Uint64())
	}
	return buf[:n]
}

func ingest(args []string) {
	fs := flag.NewFlagSet("ingest", flag.ExitOnError)
	urls := fs.String("urls", "", "the nodes' base URLs, comma-separated")
	bucket := fs.String("bucket", "uploads", "bucket")
	from := fs.Int("from", 0, "first file")
	to := fs.Int("to", 100000, "one past the last file")
	batch := fs.Int("batch", 20000, "files per archive")
	streams := fs.Int("streams", 3, "archives in flight")
	fs.Parse(args)
	nodes := strings.Split(*urls, ",")
	if *urls == "" || *to <= *from || *batch < 1 || *streams < 1 {
		fmt.Fprintln(os.Stderr, "ingest: -urls, -to > -from, -batch and -streams are needed")
		os.Exit(2)
	}
	type job struct{ lo, hi int }
	jobs := make(chan job)
	go func() {
		for lo := *from; lo < *to; lo += *batch {
			jobs <- job{lo, min(lo+*batch, *to)}
		}
		close(jobs)
	}()
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	for s := range *streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := client.New(nodes[s%len(nodes)], os.Getenv("CAIRN_ADMIN_KEY"), client.WithHTTPClient(&http.Client{Transport: client.DefaultTransport(), Timeout: 30 * time.Minute}))
			for j := range jobs {
				if err := extract(c, *bucket, j.lo, j.hi); err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		fmt.Fprintln(os.Stderr, "ingest:", failed)
		os.Exit(1)
	}
	s := time.Since(start).Seconds()
	fmt.Printf("files=%d seconds=%.1f files_per_s=%.0f\n", *to-*from, s, float64(*to-*from)/s)
}

// extract sends files lo..hi-1 as one tar archive.
func extract(c *client.Client, bucket string, lo, hi int) error {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		buf := make([]byte, 0, 2048)
		for i := lo; i < hi; i++ {
			buf = content(i, buf)
			if err := tw.WriteHeader(&tar.Header{Name: name(i), Mode: 0o644, Size: int64(len(buf)), Typeflag: tar.TypeReg}); err != nil {
				pw.CloseWithError(err)
				return
			}
			if _, err := tw.Write(buf); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(tw.Close())
	}()
	res, err := c.Extract(context.Background(), bucket, "", pr, -1, false)
	pr.Close()
	if err != nil {
		return fmt.Errorf("files %d to %d: %w", lo, hi-1, err)
	}
	if res.Files != int64(hi-lo) {
		return fmt.Errorf("files %d to %d: %d stored", lo, hi-1, res.Files)
	}
	return nil
}

func probe(args []string) {
	fs := flag.NewFlagSet("probe", flag.ExitOnError)
	u := fs.String("url", "", "a node's base URL")
	bucket := fs.String("bucket", "uploads", "bucket")
	files := fs.Int("files", 0, "files in the bucket (0..files-1 exist)")
	n := fs.Int("n", 2000, "reads (and stats); a tenth as many listings")
	mount := fs.String("mount", "", "a mount of the bucket, for the stats")
	fs.Parse(args)
	if *u == "" || *files < 100 {
		fmt.Fprintln(os.Stderr, "probe: -url and -files (at least 100) are needed")
		os.Exit(2)
	}
	c := client.New(*u, os.Getenv("CAIRN_ADMIN_KEY"))
	ctx := context.Background()
	r := rand.New(rand.NewPCG(uint64(*files), 7))
	var get, list, stat []time.Duration
	buf := make([]byte, 0, 2048)
	for range *n {
		i := r.IntN(*files)
		t := time.Now()
		rc, _, err := c.Get(ctx, *bucket, name(i))
		if err != nil {
			fail("get", err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		get = append(get, time.Since(t))
		if err != nil || string(got) != string(content(i, buf)) {
			fail("get", fmt.Errorf("%s: %d bytes, %v", name(i), len(got), err))
		}
	}
	for range max(*n/10, 1) {
		d := r.IntN(*files / 100)
		t := time.Now()
		res, err := c.List(ctx, *bucket, fmt.Sprintf("d%06d", d), client.ListOptions{})
		list = append(list, time.Since(t))
		if err != nil || len(res.Entries) != 100 {
			fail("list", fmt.Errorf("d%06d: %d entries, %v", d, len(res.Entries), err))
		}
	}
	if *mount != "" {
		for range *n {
			i := r.IntN(*files)
			t := time.Now()
			_, err := os.Stat(filepath.Join(*mount, name(i)))
			stat = append(stat, time.Since(t))
			if err != nil {
				fail("stat", err)
			}
		}
	}
	out := fmt.Sprintf("files=%d get_p50_ms=%.3f get_p99_ms=%.3f list_p50_ms=%.3f list_p99_ms=%.3f",
		*files, pct(get, 50), pct(get, 99), pct(list, 50), pct(list, 99))
	if len(stat) > 0 {
		out += fmt.Sprintf(" stat_p50_ms=%.3f stat_p99_ms=%.3f", pct(stat, 50), pct(stat, 99))
	}
	fmt.Println(out)
}

func pct(ds []time.Duration, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[min(len(s)-1, len(s)*p/100)]) / 1e6
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "probe: %s: %v\n", what, err)
	os.Exit(1)
}
