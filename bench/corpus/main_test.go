package main

import (
	"bufio"
	"crypto/sha256"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSmallSizeDistribution(t *testing.T) {
	p := Profiles["small"]
	files := Plan(p, 1, 1)
	if len(files) != 20000 {
		t.Fatalf("small: %d files, want 20000", len(files))
	}
	s := Summarize(files)
	if rel := math.Abs(float64(s.Median)-15*KB) / (15 * KB); rel > 0.10 {
		t.Errorf("small: median %d bytes, want within 10%% of %d", s.Median, 15*KB)
	}
	if s.Min < 1*KB || s.Max > 200*KB {
		t.Errorf("small: sizes %d..%d outside 1..200 KB", s.Min, s.Max)
	}
	// The distribution is spread, not a constant: a log-normal with sigma 0.8
	// puts about 16% of files below median/2.2 and about 16% above median*2.2.
	var below, above int
	for _, f := range files {
		if f.Size < 15*KB/2 {
			below++
		}
		if f.Size > 15*KB*2 {
			above++
		}
	}
	for name, n := range map[string]int{"below median/2": below, "above median*2": above} {
		if frac := float64(n) / float64(len(files)); frac < 0.10 || frac > 0.30 {
			t.Errorf("small: %.1f%% of files %s, want 10–30%%", 100*frac, name)
		}
	}
}

func TestMediumSizeRange(t *testing.T) {
	files := Plan(Profiles["medium"], 1, 1)
	if len(files) != 2000 {
		t.Fatalf("medium: %d files, want 2000", len(files))
	}
	s := Summarize(files)
	if s.Min < 500*KB || s.Max > 800*KB {
		t.Errorf("medium: sizes %d..%d outside 500..800 KB", s.Min, s.Max)
	}
	if s.Median < 600*KB || s.Median > 700*KB {
		t.Errorf("medium: median %d, want near 650 KB (uniform)", s.Median)
	}
}

func TestPlanSpreadsOverDirectories(t *testing.T) {
	files := Plan(Profiles["small"], 1, 1)
	seen := map[string]int{}
	nested := 0
	for _, f := range files {
		dir := filepath.Dir(f.Path)
		seen[dir]++
		if strings.Count(f.Path, "/") == 2 {
			nested++
		}
	}
	if len(seen) != numDirs {
		t.Errorf("files in %d directories, want %d", len(seen), numDirs)
	}
	if nested == 0 || nested == len(files) {
		t.Errorf("%d of %d files nested two levels deep, want some but not all", nested, len(files))
	}
}

func TestPlanDeterministic(t *testing.T) {
	for name, p := range Profiles {
		a, b := Plan(p, 7, 1), Plan(p, 7, 1)
		if len(a) != len(b) {
			t.Fatalf("%s: lengths differ", name)
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%s: file %d differs: %+v vs %+v", name, i, a[i], b[i])
			}
		}
		c := Plan(p, 8, 1)
		same := 0
		for i := range a {
			if a[i].Size == c[i].Size {
				same++
			}
		}
		if same == len(a) {
			t.Errorf("%s: seeds 7 and 8 give the same sizes", name)
		}
	}
}

func TestScale(t *testing.T) {
	if n := len(Plan(Profiles["small"], 1, 0.05)); n != 1000 {
		t.Errorf("small at scale 0.05: %d files, want 1000", n)
	}
	if n := len(Plan(Profiles["medium"], 1, 0.0001)); n != 1 {
		t.Errorf("medium at scale 0.0001: %d files, want 1", n)
	}
}

// TestWriteDeterministic writes the same small corpus twice and compares the
// trees byte for byte, and checks paths.txt and the sizes on disk.
func TestWriteDeterministic(t *testing.T) {
	p := Profiles["small"]
	const scale = 0.01 // 200 files
	d1, d2 := t.TempDir(), t.TempDir()
	files, err := Write(d1, p, 3, scale, 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Write(d2, p, 3, scale, 1); err != nil {
		t.Fatal(err)
	}
	h1, h2 := treeDigest(t, d1), treeDigest(t, d2)
	if len(h1) != len(files)+1 { // + paths.txt
		t.Fatalf("tree has %d files, want %d", len(h1), len(files)+1)
	}
	for path, h := range h1 {
		if h2[path] != h {
			t.Errorf("%s differs between two runs", path)
		}
	}

	// paths.txt lists every file in order, and each has its planned size.
	fh, err := os.Open(filepath.Join(d1, "paths.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	i := 0
	for sc.Scan() {
		if i >= len(files) || sc.Text() != files[i].Path {
			t.Fatalf("paths.txt line %d = %q, want %q", i+1, sc.Text(), files[min(i, len(files)-1)].Path)
		}
		st, err := os.Stat(filepath.Join(d1, filepath.FromSlash(sc.Text())))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != int64(files[i].Size) {
			t.Errorf("%s: %d bytes on disk, planned %d", sc.Text(), st.Size(), files[i].Size)
		}
		i++
	}
	if i != len(files) {
		t.Errorf("paths.txt has %d lines, want %d", i, len(files))
	}

	// Content is not trivially compressible: no file is all one byte and
	// different files differ.
	a, _ := os.ReadFile(filepath.Join(d1, filepath.FromSlash(files[0].Path)))
	b, _ := os.ReadFile(filepath.Join(d1, filepath.FromSlash(files[1].Path)))
	n := min(len(a), len(b))
	if string(a[:n]) == string(b[:n]) {
		t.Error("files 0 and 1 start with the same bytes")
	}
}

func treeDigest(t *testing.T, root string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fh, err := os.Open(path)
		if err != nil {
			return err
		}
		defer fh.Close()
		h := sha256.New()
		if _, err := io.Copy(h, fh); err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		var sum [32]byte
		copy(sum[:], h.Sum(nil))
		out[rel] = sum
		st, _ := d.Info()
		if rel != "paths.txt" && !st.ModTime().Equal(st.ModTime().Truncate(1e9)) {
			t.Errorf("%s: mtime %v not whole seconds", rel, st.ModTime())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
