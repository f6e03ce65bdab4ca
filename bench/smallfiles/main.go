// Command smallfiles is the Go helper of bench/mount.sh's `small` part
// (stdlib only): what a web framework does on every request with its
// templates, JSON and module files, and what a PHP autoloader does when it
// probes for class files.
//
//	smallfiles -mode read -dir DIR -list FILE [-threads 8] [-count 100000] [-seed 1]
//	    Opens, reads whole and closes -count files named (relative to DIR)
//	    in FILE, drawn at random, from -threads OS threads at once.
//
//	smallfiles -mode miss -dir DIR [-threads 8] [-count 20000] [-seed 1]
//	    Stats -count distinct names that do not exist (DIR/miss-N/ClassN.php
//	    over 20 directories that do exist: DIR/miss-0 .. miss-19, made
//	    first), from -threads threads: each a first look-up of that name.
//	    Then stats the same names again (now cached misses).
//
//	smallfiles -mode upload -dir DIR [-count 200] [-seed 1]
//	    PHP's upload pattern: -count files of 200 KB to 5 MB (seeded sizes
//	    and bytes) each written to DIR/.upload-N.tmp, closed, and renamed
//	    to DIR/upload-N; then DIR is fsynced. One thread.
//
//	smallfiles -mode contend -dir DIR -dir2 DIR2 [-count 1000]
//	    Two writers at once, one in DIR and one in DIR2 (the same directory
//	    through two nodes' mounts), each creating -count files of 1 KB
//	    (O_CREAT|O_EXCL, write, close) with names of their own; then both
//	    directories are fsynced and must list 2 x -count names. Prints the
//	    p50, p99 and largest latency of a create (open, write and close).
//
// Prints one "SMALLFILES" line: mode, ops, seconds, ops/s, µs/op (and for
// miss the second pass's). Every loop is bounded by -count.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	mode := flag.String("mode", "read", "read, miss, upload or contend")
	dir := flag.String("dir", "", "the tree to work in")
	dir2 := flag.String("dir2", "", "contend: the same directory through another node's mount")
	list := flag.String("list", "", "read: file of paths relative to -dir, one a line")
	threads := flag.Int("threads", 8, "concurrent threads")
	count := flag.Int("count", 100000, "operations in all")
	seed := flag.Uint64("seed", 1, "seed of the random choice")
	flag.Parse()
	if *dir == "" || *threads < 1 || *count < 1 {
		fail("need -dir, -threads >= 1, -count >= 1")
	}
	runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), *threads))
	switch *mode {
	case "read":
		paths := readList(*list)
		n, d, err := run(*threads, *count, func(i int, rng *rand.Rand, buf []byte) error {
			p := filepath.Join(*dir, paths[rng.IntN(len(paths))])
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.CopyBuffer(io.Discard, f, buf)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			return err
		}, *seed)
		report("read", n, d, err)
	case "miss":
		for k := range 20 {
			if err := os.MkdirAll(filepath.Join(*dir, fmt.Sprintf("miss-%d", k)), 0o755); err != nil {
				fail(err.Error())
			}
		}
		name := func(i int) string {
			return filepath.Join(*dir, fmt.Sprintf("miss-%d", i%20), fmt.Sprintf("Class%d.php", i))
		}
		probe := func(i int, _ *rand.Rand, _ []byte) error {
			if _, err := os.Stat(name(i)); !os.IsNotExist(err) {
				return fmt.Errorf("stat %s: %v, want not exist", name(i), err)
			}
			return nil
		}
		n, d, err := run(*threads, *count, probe, *seed)
		report("miss-first", n, d, err)
		n, d, err = run(*threads, *count, probe, *seed)
		report("miss-again", n, d, err)
	case "upload":
		rng := rand.New(rand.NewPCG(*seed, 0))
		buf := make([]byte, 5<<20)
		for i := range buf {
			buf[i] = byte(rng.Uint32())
		}
		start := time.Now()
		var n int64
		var err error
		for i := range *count {
			size := 200<<10 + rng.IntN(5<<20-200<<10+1)
			off := rng.IntN(len(buf) - size + 1)
			tmp := filepath.Join(*dir, fmt.Sprintf(".upload-%d.tmp", i))
			if err = os.WriteFile(tmp, buf[off:off+size], 0o644); err != nil {
				break
			}
			if err = os.Rename(tmp, filepath.Join(*dir, fmt.Sprintf("upload-%d", i))); err != nil {
				break
			}
			n++
		}
		if err == nil {
			err = syncDir(*dir)
		}
		report("upload", n, time.Since(start), err)
	case "contend":
		if *dir2 == "" {
			fail("contend needs -dir2")
		}
		contend(*dir, *dir2, *count)
	default:
		fail("-mode read, miss, upload or contend")
	}
}

// contend runs the two writers of -mode contend and prints the latencies.
func contend(dirA, dirB string, count int) {
	var wg sync.WaitGroup
	lat := make([][]time.Duration, 2)
	errs := make([]error, 2)
	begin := make(chan struct{})
	start := time.Now()
	for side, dir := range []string{dirA, dirB} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			body := make([]byte, 1024)
			<-begin
			for i := range count {
				t := time.Now()
				f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("w%d-%d", side, i)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
				if err == nil {
					_, err = f.Write(body)
					if cerr := f.Close(); err == nil {
						err = cerr
					}
				}
				if err != nil {
					errs[side] = err
					return
				}
				lat[side] = append(lat[side], time.Since(t))
			}
		}()
	}
	close(begin)
	wg.Wait()
	for _, d := range []string{dirA, dirB} {
		if err := syncDir(d); err != nil {
			fail(err.Error())
		}
	}
	d := time.Since(start)
	for _, err := range errs {
		if err != nil {
			fail(err.Error())
		}
	}
	// Each side's fsync returned once its creates were committed; the
	// other node applies them (and its kernel drops its cached listing)
	// a moment later: wait for that, 10 s at most.
	for _, dir := range []string{dirA, dirB} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			es, err := os.ReadDir(dir)
			if err == nil && len(es) == 2*count {
				break
			}
			if time.Now().After(deadline) {
				fail(fmt.Sprintf("%s lists %d names 10 s after both fsyncs, want %d (%v)", dir, len(es), 2*count, err))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	all := append(lat[0], lat[1]...)
	slices.Sort(all)
	q := func(p float64) float64 { return all[min(len(all)-1, int(p*float64(len(all))))].Seconds() * 1e3 }
	report("contend", int64(len(all)), d, nil)
	fmt.Printf("SMALLFILES mode=contend-latency creates=%d p50_ms=%.3f p99_ms=%.3f max_ms=%.3f\n", len(all), q(0.5), q(0.99), all[len(all)-1].Seconds()*1e3)
}

// syncDir fsyncs directory dir (on a mount: everything it queued before).
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// run calls op count times in all, with index i, from threads goroutines
// locked to OS threads; it returns the calls made, the time and the first
// error (which stops the run).
func run(threads, count int, op func(i int, rng *rand.Rand, buf []byte) error, seed uint64) (int64, time.Duration, error) {
	var next atomic.Int64
	var done atomic.Int64
	var errOnce sync.Once
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for t := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			rng := rand.New(rand.NewPCG(seed, uint64(t)))
			buf := make([]byte, 128<<10)
			for {
				i := int(next.Add(1)) - 1
				if i >= count {
					return
				}
				if err := op(i, rng, buf); err != nil {
					errOnce.Do(func() { firstErr = err })
					next.Store(int64(count))
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	return done.Load(), time.Since(start), firstErr
}

func report(mode string, n int64, d time.Duration, err error) {
	s := d.Seconds()
	fmt.Printf("SMALLFILES mode=%s ops=%d seconds=%.3f ops_per_s=%.0f us_per_op=%.2f\n", mode, n, s, float64(n)/s, s/float64(n)*1e6)
	if err != nil {
		fail(err.Error())
	}
}

func readList(name string) []string {
	f, err := os.Open(name)
	if err != nil {
		fail(err.Error())
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := sc.Text(); l != "" {
			out = append(out, l)
		}
	}
	if err := sc.Err(); err != nil || len(out) == 0 {
		fail(fmt.Sprintf("%s: no paths (%v)", name, err))
	}
	return out
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "smallfiles:", msg)
	os.Exit(1)
}
