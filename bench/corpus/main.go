// Command corpus writes a seeded, deterministic file tree for Cairn's
// benchmarks (bench/read.sh, bench/ingest.sh).
//
//	go run ./bench/corpus -profile small|medium -seed 1 -out DIR [-scale 0.05]
//
// Profiles:
//
//   - small: 20,000 files whose sizes follow a log-normal distribution with a
//     median of 15 KB (sigma 0.8), clamped to 1–200 KB: the LAMP cluster's
//     "470k files averaging 15 KB".
//   - medium: 2,000 files of 500–800 KB (uniform): the static web server with
//     "random reads of 500–800 KB files with 20–30 concurrent readers".
//
// Files are spread over 100 directories: 20 top-level directories, each with
// 4 subdirectories (so paths are one or two levels deep). File contents are
// pseudo-random bytes (ChaCha8), so compression does not flatter anyone.
//
// The same (profile, seed, scale) always gives byte-identical files, paths and
// mtimes. Each file's bytes depend only on the seed and the file's index, so
// files are written in parallel. DIR/paths.txt lists every relative path, one a
// line, in index order; it is written last (via a rename), so its presence
// means the corpus is complete.
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"
)

// KB is the unit of the size parameters (1 KB = 1024 bytes).
const KB = 1024

// Profile describes one corpus shape.
type Profile struct {
	Name  string
	Files int // number of files at scale 1
	// Size distribution: log-normal (Median, Sigma) clamped to [Min, Max]
	// when Sigma > 0; uniform in [Min, Max] when Sigma == 0. Bytes.
	Median int
	Sigma  float64
	Min    int
	Max    int
}

// Profiles are the corpus shapes the benchmarks use.
var Profiles = map[string]Profile{
	"small":  {Name: "small", Files: 20000, Median: 15 * KB, Sigma: 0.8, Min: 1 * KB, Max: 200 * KB},
	"medium": {Name: "medium", Files: 2000, Min: 500 * KB, Max: 800 * KB},
}

// numDirs is the number of directories files are spread over:
// topDirs top-level directories each holding subDirs subdirectories.
const (
	topDirs = 20
	subDirs = 4
	numDirs = topDirs * (1 + subDirs)
)

// File is one planned file of a corpus.
type File struct {
	Index int
	Path  string // slash-separated, relative to the corpus root
	Size  int    // bytes
}

// exts are the file name extensions used, so servers pick varied
// Content-Types as a web tree would make them.
var exts = []string{".html", ".css", ".js", ".png", ".jpg", ".gif", ".txt", ".json"}

// dirs returns the numDirs directory names, top-level first.
func dirs() []string {
	out := make([]string, 0, numDirs)
	for t := 0; t < topDirs; t++ {
		out = append(out, fmt.Sprintf("d%02d", t))
	}
	for t := 0; t < topDirs; t++ {
		for s := 0; s < subDirs; s++ {
			out = append(out, fmt.Sprintf("d%02d/s%d", t, s))
		}
	}
	return out
}

// Plan returns the files of a corpus: paths and sizes, without content.
// scale (0 < scale <= 1 usually) multiplies the number of files; at least one
// file is planned.
func Plan(p Profile, seed uint64, scale float64) []File {
	n := int(math.Round(float64(p.Files) * scale))
	if n < 1 {
		n = 1
	}
	// Distinct streams per profile so "small" and "medium" with the same seed
	// are unrelated.
	rng := rand.New(rand.NewPCG(seed, hashString(p.Name)))
	ds := dirs()
	files := make([]File, n)
	for i := range files {
		var size int
		if p.Sigma > 0 {
			v := math.Exp(math.Log(float64(p.Median)) + p.Sigma*rng.NormFloat64())
			size = int(math.Round(v))
		} else {
			size = p.Min + rng.IntN(p.Max-p.Min+1)
		}
		size = min(max(size, p.Min), p.Max)
		dir := ds[rng.IntN(len(ds))]
		ext := exts[rng.IntN(len(exts))]
		files[i] = File{Index: i, Path: fmt.Sprintf("%s/f%06d%s", dir, i, ext), Size: size}
	}
	return files
}

// hashString is FNV-1a, used to derive an RNG stream from a name.
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// baseTime is the mtime of file 0; file i gets baseTime + i seconds, so
// Last-Modified and ETag-like values are the same on every run.
var baseTime = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// contentReader returns the deterministic content stream of file f.
func contentReader(seed uint64, profile string, f File) io.Reader {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[0:], seed)
	binary.LittleEndian.PutUint64(key[8:], hashString(profile))
	binary.LittleEndian.PutUint64(key[16:], uint64(f.Index))
	binary.LittleEndian.PutUint64(key[24:], 0x636f72707573) // "corpus"
	return io.LimitReader(rand.NewChaCha8(key), int64(f.Size))
}

// Write creates the corpus under out: the files, then out/paths.txt.
// It may be called on a partly written directory: every file is rewritten.
func Write(out string, p Profile, seed uint64, scale float64, workers int) ([]File, error) {
	files := Plan(p, seed, scale)
	for _, d := range dirs() {
		if err := os.MkdirAll(filepath.Join(out, filepath.FromSlash(d)), 0o755); err != nil {
			return nil, err
		}
	}
	if workers < 1 {
		workers = 1
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		firstEr error
		next    = make(chan File)
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 256*KB)
			for f := range next {
				if err := writeFile(out, seed, p.Name, f, buf); err != nil {
					mu.Lock()
					if firstEr == nil {
						firstEr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, f := range files {
		next <- f
	}
	close(next)
	wg.Wait()
	if firstEr != nil {
		return nil, firstEr
	}
	return files, writePaths(out, files)
}

func writeFile(out string, seed uint64, profile string, f File, buf []byte) error {
	name := filepath.Join(out, filepath.FromSlash(f.Path))
	fh, err := os.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.CopyBuffer(fh, contentReader(seed, profile, f), buf); err != nil {
		fh.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := fh.Close(); err != nil {
		return fmt.Errorf("close %s: %w", name, err)
	}
	mt := baseTime.Add(time.Duration(f.Index) * time.Second)
	return os.Chtimes(name, mt, mt)
}

func writePaths(out string, files []File) error {
	tmp := filepath.Join(out, "paths.txt.tmp")
	fh, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(fh)
	for _, f := range files {
		w.WriteString(f.Path)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		fh.Close()
		return err
	}
	if err := fh.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(out, "paths.txt"))
}

// Stats summarises a plan's sizes.
type Stats struct {
	Files       int
	Total       int64
	Min, Max    int
	Median, P99 int
	Mean        float64
}

// Summarize computes Stats for files.
func Summarize(files []File) Stats {
	sizes := make([]int, len(files))
	var total int64
	for i, f := range files {
		sizes[i] = f.Size
		total += int64(f.Size)
	}
	slices.Sort(sizes)
	s := Stats{Files: len(files), Total: total}
	if len(sizes) == 0 {
		return s
	}
	s.Min, s.Max = sizes[0], sizes[len(sizes)-1]
	s.Median = sizes[len(sizes)/2]
	s.P99 = sizes[min(len(sizes)-1, len(sizes)*99/100)]
	s.Mean = float64(total) / float64(len(sizes))
	return s
}

func main() {
	profile := flag.String("profile", "small", "corpus profile: small or medium")
	seed := flag.Uint64("seed", 1, "RNG seed")
	out := flag.String("out", "", "output directory (created)")
	scale := flag.Float64("scale", 1, "fraction of the profile's file count to write (e.g. 0.05 for a smoke run)")
	jobs := flag.Int("jobs", runtime.NumCPU(), "parallel file writers")
	dry := flag.Bool("n", false, "print the size statistics only; write nothing")
	flag.Parse()

	p, ok := Profiles[*profile]
	if !ok {
		fatal(fmt.Errorf("unknown profile %q (want small or medium)", *profile))
	}
	if *scale <= 0 {
		fatal(errors.New("-scale must be > 0"))
	}
	if *dry {
		report(p, *seed, *scale, Summarize(Plan(p, *seed, *scale)), 0)
		return
	}
	if *out == "" {
		fatal(errors.New("-out DIR is required"))
	}
	start := time.Now()
	files, err := Write(*out, p, *seed, *scale, *jobs)
	if err != nil {
		fatal(err)
	}
	report(p, *seed, *scale, Summarize(files), time.Since(start))
}

func report(p Profile, seed uint64, scale float64, s Stats, took time.Duration) {
	fmt.Fprintf(os.Stderr, "corpus %s seed=%d scale=%g: %d files, %.1f MB total, size min %d / median %d / mean %.0f / p99 %d / max %d bytes",
		p.Name, seed, scale, s.Files, float64(s.Total)/1e6, s.Min, s.Median, s.Mean, s.P99, s.Max)
	if took > 0 {
		fmt.Fprintf(os.Stderr, " (written in %s)", took.Round(time.Millisecond))
	}
	fmt.Fprintln(os.Stderr)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "corpus:", err)
	os.Exit(1)
}
