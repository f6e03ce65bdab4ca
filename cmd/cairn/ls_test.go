package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
)

// countWriter counts what the command prints, holding none of it.
type countWriter struct{ lines, bytes int64 }

func (w *countWriter) Write(p []byte) (int, error) {
	for _, c := range p {
		if c == '\n' {
			w.lines++
		}
	}
	w.bytes += int64(len(p))
	return len(p), nil
}

// `cairn ls -r` of a tree of 1,000,000 files holds one page at a time
// (issue 35): a server made up for the test answers the recursive listing
// in pages of 1,000, made as they are asked for; half way, the command
// holds less than 8 MB (the entries read so far would take over 100 MB).
func TestLsRecursiveMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("a listing of a million entries")
	}
	const total, page = 1_000_000, 1000
	heap := func() int64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	var before, held atomic.Int64
	var pages atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/web/" || r.URL.Query().Get("recursive") != "1" {
			http.NotFound(w, r)
			return
		}
		start := 0
		if a := r.URL.Query().Get("after"); a != "" {
			n, err := strconv.Atoi(a)
			if err != nil {
				http.Error(w, "bad after", http.StatusBadRequest)
				return
			}
			start = n
		}
		if pages.Add(1) == total/page/2 {
			held.Store(heap() - before.Load())
		}
		type entry struct {
			Bucket string `json:"bucket"`
			Path   string `json:"path"`
			Size   int64  `json:"size"`
		}
		out := struct {
			Entries   []entry `json:"entries"`
			Truncated bool    `json:"truncated"`
			NextToken string  `json:"next_token,omitempty"`
		}{}
		for i := start; i < min(start+page, total); i++ {
			out.Entries = append(out.Entries, entry{"web", fmt.Sprintf("d%04d/f%07d.jpg", i/100, i), int64(i % 2048)})
		}
		if end := start + page; end < total {
			out.Truncated, out.NextToken = true, strconv.Itoa(end)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	root := newRootCmd()
	var out, errw countWriter
	root.SetOut(&out)
	root.SetErr(&errw)
	root.SetArgs([]string{"ls", "-r", "web/", "--server", srv.URL, "--key", "ls-test-key-0123456789abcdef"})
	before.Store(heap())
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if out.lines != total || pages.Load() != total/page {
		t.Fatalf("%d lines printed from %d pages, want %d from %d", out.lines, pages.Load(), total, total/page)
	}
	t.Logf("%d lines (%d MB) from %d pages; %.1f MB held half way", out.lines, out.bytes>>20, pages.Load(), float64(held.Load())/(1<<20))
	if held.Load() > 8<<20 {
		t.Errorf("ls -r held %.1f MB half way through a million entries", float64(held.Load())/(1<<20))
	}
}
