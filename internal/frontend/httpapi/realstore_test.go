package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/consensus"
	"github.com/cairn-fs/cairn/internal/frontend/httpapi/fastpath"
	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/store"
	"github.com/cairn-fs/cairn/internal/vfs"
)

// realStore is a store.Local over a blob store on the real file system
// (memory-mapped volumes, sendfile-able files), an in-memory namespace and
// the local log: the GET path of a single node.
func realStore(tb testing.TB) *store.Local {
	tb.Helper()
	bs, err := blob.Open(blob.Config{Dir: tb.TempDir(), FS: vfs.OS(), MinFreeBytes: 1})
	must(tb, err)
	st, _ := realStoreOn(tb, bs)
	return st
}

// realStoreOn is realStore over the blob store bs, which it closes at
// cleanup. It also returns the store's Config, with which a test can open
// a second store over the same blobs and namespace.
func realStoreOn(tb testing.TB, bs *blob.Store) (*store.Local, store.Config) {
	tb.Helper()
	db := kv.NewMem()
	var st *store.Local
	lg, err := consensus.NewLocal(consensus.LocalConfig{KV: db, OnApply: func(i uint64, c []meta.Command, r []meta.Result) {
		st.Applied(i, c, r)
	}})
	must(tb, err)
	cfg := store.DefaultConfig()
	cfg.Blobs, cfg.KV, cfg.Log, cfg.GCInterval = bs, db, lg, 0
	st, err = store.New(cfg)
	must(tb, err)
	tb.Cleanup(func() { st.Close(); lg.Close(); db.Close(); bs.Close() })
	must(tb, st.CreateBucket(context.Background(), store.BucketInfo{Name: "pub", Public: true}))
	return st, cfg
}

// realCorpus puts n files of about 15 KB (10–20 KB) with random content
// into s's bucket pub and returns their paths and contents.
func realCorpus(tb testing.TB, s *store.Local, n int) ([]string, map[string][]byte) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	paths := make([]string, n)
	data := make(map[string][]byte, n)
	for i := range n {
		p := fmt.Sprintf("d%02d/s%d/f%06d.css", i%20, i%4, i)
		b := make([]byte, 10000+rng.IntN(10000))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		_, _, err := s.Put(context.Background(), "pub", p, bytes.NewReader(b), store.PutOptions{Size: int64(len(b))})
		must(tb, err)
		paths[i], data[p] = p, b
	}
	return paths, data
}

func realServer(tb testing.TB, st store.Store, mut func(*Config), srv **Server) string {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Store = st
	cfg.AdminKey = testKey
	if mut != nil {
		mut(&cfg)
	}
	s, err := New(cfg)
	must(tb, err)
	tb.Cleanup(s.Close)
	if srv != nil {
		*srv = s
	}
	return serveServer(tb, s)
}

// TestFastRealStoreBodies checks the bodies of GETs through the fast path
// over a real store, sent from the volume files (sendfile) or copied, with
// ranges, pipelining and a body cut by a client gone.
func TestFastRealStoreBodies(t *testing.T) {
	st := realStore(t)
	paths, data := realCorpus(t, st, 50)
	big := bytes.Repeat([]byte("0123456789abcdef"), 300<<10/16) // 300 KB, one blob
	_, _, err := st.Put(context.Background(), "pub", "big.bin", bytes.NewReader(big), store.PutOptions{Size: int64(len(big))})
	must(t, err)
	paths, data["big.bin"] = append(paths, "big.bin"), big
	for _, sendfile := range []bool{true, false} {
		t.Run("sendfile="+strconv.FormatBool(sendfile), func(t *testing.T) {
			var srv *Server
			addr := realServer(t, st, func(c *Config) { c.DisableSendfile = !sendfile }, &srv)
			c := dial(t, addr)
			// Pipelined: every request in one write.
			var all bytes.Buffer
			for _, p := range paths {
				fmt.Fprintf(&all, "GET /pub/%s HTTP/1.1\r\nHost: x\r\n\r\n", p)
				fmt.Fprintf(&all, "GET /pub/%s HTTP/1.1\r\nHost: x\r\nRange: bytes=7-4999\r\n\r\n", p)
			}
			_, err := c.Write(all.Bytes())
			must(t, err)
			br := bufio.NewReader(c)
			for _, p := range paths {
				resp, body := readResp(t, br, "GET")
				if resp.StatusCode != 200 || body != string(data[p]) {
					t.Fatalf("%s: status %d, %d bytes, want 200 and %d bytes", p, resp.StatusCode, len(body), len(data[p]))
				}
				resp, body = readResp(t, br, "GET")
				if resp.StatusCode != 206 || body != string(data[p][7:5000]) {
					t.Fatalf("%s range: status %d, %d bytes", p, resp.StatusCode, len(body))
				}
			}
			want := int64(0) // bodies large enough for sendfile
			for _, p := range paths {
				if len(data[p]) >= fastpath.SendfileMin {
					want++
				}
				if 4993 >= fastpath.SendfileMin {
					want++
				}
			}
			if got := srv.fast.Counts().SentFile; sendfile && (got != want || want == 0) {
				t.Fatalf("%d of %d bodies sent with sendfile", got, want)
			} else if !sendfile && got != 0 {
				t.Fatalf("%d bodies sent with sendfile, which is off", got)
			}
		})
	}
}

// BenchmarkFastGetRealStore: keep-alive GETs of random 10–20 KB files out of
// 2,000 through the fast path and a real store on loopback, one GET at a time
// on each of conns connections (as wrk does), client included.
func BenchmarkFastGetRealStore(b *testing.B) {
	st := realStore(b)
	paths, data := realCorpus(b, st, 2000)
	for _, mode := range []string{"sendfile", "copy"} {
		addr := realServer(b, st, func(c *Config) { c.DisableSendfile = mode == "copy" }, nil)
		for _, conns := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/conns=%d", mode, conns), func(b *testing.B) {
				var bytesRead atomic.Int64
				var seed atomic.Uint64
				b.ReportAllocs()
				b.SetParallelism(max(1, conns/runtime.GOMAXPROCS(0))) // conns goroutines
				b.RunParallel(func(pb *testing.PB) {
					c, err := net.Dial("tcp", addr)
					if err != nil {
						b.Error(err)
						return
					}
					defer c.Close()
					rng := rand.New(rand.NewPCG(seed.Add(1), 7))
					br := bufio.NewReaderSize(c, 64<<10)
					var req []byte
					for pb.Next() {
						p := paths[rng.IntN(len(paths))]
						req = append(append(append(req[:0], "GET /pub/"...), p...), " HTTP/1.1\r\nHost: b\r\n\r\n"...)
						if _, err := c.Write(req); err != nil {
							b.Error(err)
							return
						}
						resp, err := http.ReadResponse(br, nil)
						if err != nil {
							b.Error(err)
							return
						}
						n, _ := io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 || n != int64(len(data[p])) {
							b.Errorf("%s: %d, %d bytes", p, resp.StatusCode, n)
							return
						}
						bytesRead.Add(n)
					}
				})
			})
		}
	}
}

// directConn drives a planner as a fast-path connection does, without a
// socket (lending and sendfile off): parse and decode the request, plan
// it, read a BodyRead body into the write buffer, and Done.
type directConn struct {
	pl      fastpath.Planner
	req     fastpath.Request
	plan    fastpath.Plan
	path    []byte
	scratch [fastpath.ScratchSize]byte
}

var directDate = []byte("Mon, 02 Jan 2006 15:04:05 GMT")

// answer answers raw into buf and returns buf with the answer; ok is
// false for a hand-off, or a body the connection would send from a file
// or a map, or stream.
func (d *directConn) answer(raw, buf []byte) (_ []byte, ok bool) {
	var v fastpath.Verdict
	if d.req, v = fastpath.Parse(raw, fastpath.ReadBufSize); v != fastpath.ParseOK {
		return buf, false
	}
	if d.path, ok = d.req.DecodePath(d.path); !ok {
		return buf, false
	}
	d.req.Start, d.req.Date = time.Now(), directDate
	p := &d.plan
	*p = fastpath.Plan{Buf: buf, Scratch: d.scratch[:0]}
	headStart := len(buf)
	if !d.pl.Plan(&d.req, p) {
		return buf, false
	}
	if p.Body == fastpath.BodyRead {
		n := int(p.N)
		b := slices.Grow(p.Buf, n)
		if m, err := p.Source.ReadAt(b[len(b):len(b)+n], p.Off); m < n {
			p.Buf = b[:headStart]
			d.pl.Unreadable(&d.req, p, err)
		} else {
			p.Buf, p.Bytes = b[:len(b)+n], int64(n)
		}
	}
	d.pl.Done(&d.req, p)
	return p.Buf, p.Body == fastpath.BodyNone || p.Body == fastpath.BodyRead
}

// BenchmarkServeFastRealStore measures the fast path's own work for a GET
// of a random 10–20 KB file out of 2,000 over a real store, without the
// network: parsing, the planner (the front door, openRead, planning,
// encoding the head) and copying the body into the write buffer (the
// sendfile path needs a socket).
func BenchmarkServeFastRealStore(b *testing.B) {
	st := realStore(b)
	paths, data := realCorpus(b, st, 2000)
	cfg := DefaultConfig()
	cfg.Store, cfg.AdminKey = st, testKey
	s, err := New(cfg)
	must(b, err)
	b.Cleanup(s.Close)
	reqs := make([][]byte, len(paths))
	for i, p := range paths {
		reqs[i] = []byte("GET /pub/" + p + " HTTP/1.1\r\nHost: b\r\nUser-Agent: wrk\r\n\r\n")
	}
	fc := &directConn{pl: &s.planner}
	wb := make([]byte, 0, fastpath.MaxBody+16<<10)
	rng := rand.New(rand.NewPCG(3, 4))
	b.ReportAllocs()
	b.SetBytes(15000)
	for b.Loop() {
		i := rng.IntN(len(reqs))
		var ok bool
		if wb, ok = fc.answer(reqs[i], wb[:0]); !ok || len(wb) < len(data[paths[i]]) {
			b.Fatalf("%s: %d bytes", paths[i], len(wb))
		}
	}
}

// TestServeFastRealStoreAllocs holds the fast path over the real store to
// one allocation per GET of a cached small file (the request path as a
// string): the store's Open of a cached file allocates nothing, and the
// head of a plain GET comes from the object's memo.
func TestServeFastRealStoreAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	st := realStore(t)
	paths, data := realCorpus(t, st, 20)
	cfg := DefaultConfig()
	cfg.Store, cfg.AdminKey = st, testKey
	s, err := New(cfg)
	must(t, err)
	t.Cleanup(s.Close)
	fc := &directConn{pl: &s.planner}
	wb := make([]byte, 0, fastpath.MaxBody+16<<10)
	reqs := make([][]byte, len(paths))
	for i, p := range paths {
		reqs[i] = []byte("GET /pub/" + p + " HTTP/1.1\r\nHost: b\r\n\r\n")
	}
	i := 0
	get := func() {
		p := paths[i%len(paths)]
		var ok bool
		wb, ok = fc.answer(reqs[i%len(paths)], wb[:0])
		i++
		if !ok || len(wb) < len(data[p]) {
			t.Fatalf("%s: %d bytes", p, len(wb))
		}
	}
	for range paths {
		get() // the first GET of each file fills the path cache and the memo
	}
	allocs := testing.AllocsPerRun(200, get)
	if allocs > 1 {
		t.Fatalf("a fast-path GET over the real store allocates %v times, budget 1", allocs)
	}
	t.Logf("%v allocations per GET", allocs)
}
