package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cairn-fs/cairn/internal/store"
)

// barrierFake is a fakeStore with a read barrier that counts its calls and
// records which reads were made with a consistent context.
type barrierFake struct {
	*fakeStore
	calls      atomic.Int32
	consistent atomic.Int32 // Open, Stat, Bucket and List calls with a WithConsistent ctx
	mu         sync.Mutex
	err        error
}

func (b *barrierFake) Barrier(ctx context.Context) error {
	if !store.IsConsistent(ctx) {
		panic("Barrier without a consistent context")
	}
	b.calls.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

func (b *barrierFake) note(ctx context.Context) {
	if store.IsConsistent(ctx) {
		b.consistent.Add(1)
	}
}

func (b *barrierFake) Open(ctx context.Context, bucket, p string) (store.Object, error) {
	b.note(ctx)
	return b.fakeStore.Open(ctx, bucket, p)
}

func (b *barrierFake) Stat(ctx context.Context, bucket, p string) (store.ObjectInfo, error) {
	b.note(ctx)
	return b.fakeStore.Stat(ctx, bucket, p)
}

func (b *barrierFake) Bucket(ctx context.Context, name string) (store.BucketInfo, error) {
	b.note(ctx)
	return b.fakeStore.Bucket(ctx, name)
}

func (b *barrierFake) List(ctx context.Context, bucket string, o store.ListOptions) (store.ListResult, error) {
	b.note(ctx)
	return b.fakeStore.List(ctx, bucket, o)
}

func withBarrier(bf *barrierFake) func(*Config) {
	return func(c *Config) {
		bf.fakeStore = c.Store.(*fakeStore)
		c.Store = bf
	}
}

func TestConsistentReadRunsBarrier(t *testing.T) {
	bf := &barrierFake{}
	e := newEnv(t, withBarrier(bf))
	e.put("/pub/f.txt", "hello")
	e.put("/priv/g.txt", "secret")
	for _, tc := range []struct {
		method, target string
		hdr            []string
		status         int
		barrier        bool
	}{
		{"GET", "/pub/f.txt", nil, 200, false},
		{"GET", "/pub/f.txt?consistent=0", nil, 200, false},
		{"GET", "/pub/f.txt?v=3", []string{"X-Cairn-Consistent: 0"}, 200, false},
		{"GET", "/pub/f.txt?consistent=1", nil, 200, true},
		{"GET", "/pub/f.txt?x=1&consistent=true", nil, 200, true},
		{"GET", "/pub/f.txt", []string{"X-Cairn-Consistent: 1"}, 200, true},
		{"HEAD", "/pub/f.txt", []string{"X-Cairn-Consistent: true"}, 200, true},
		{"GET", "/pub/f.txt?consistent=1", []string{"Range: bytes=1-2"}, 206, true},
		{"GET", "/pub/missing?consistent=1", nil, 404, true},
		{"GET", "/pub/?consistent=1", []string{"Accept: application/json"}, 200, true},
		{"GET", "/pub/", []string{"X-Cairn-Consistent: 1"}, 200, true},
		{"GET", "/pub/f.txt.md5?consistent=1", nil, 200, true},
		{"GET", "/priv/g.txt?consistent=1", []string{"key: admin"}, 200, true},
		// Authentication comes first: no barrier for a bad key.
		{"GET", "/pub/f.txt?consistent=1", []string{"Authorization: Bearer wrong"}, 403, false},
	} {
		calls, cons := bf.calls.Load(), bf.consistent.Load()
		w := e.do(tc.method, tc.target, nil, tc.hdr...)
		if w.Code != tc.status {
			t.Fatalf("%s %s %v: %d %s, want %d", tc.method, tc.target, tc.hdr, w.Code, w.Body, tc.status)
		}
		gotCalls, gotCons := bf.calls.Load()-calls, bf.consistent.Load()-cons
		if tc.barrier && (gotCalls != 1 || gotCons == 0) || !tc.barrier && (gotCalls != 0 || gotCons != 0) {
			t.Fatalf("%s %s %v: %d barrier calls, %d consistent reads; want barrier=%v (once)",
				tc.method, tc.target, tc.hdr, gotCalls, gotCons, tc.barrier)
		}
	}
}

func TestConsistentReadBarrierFails(t *testing.T) {
	bf := &barrierFake{err: fmt.Errorf("%w: consistent read: no leader", store.ErrUnavailable)}
	e := newEnv(t, withBarrier(bf))
	e.put("/pub/f.txt", "hello")
	for _, tc := range []struct {
		target string
		hdr    []string
	}{
		{"/pub/f.txt?consistent=1", nil},
		{"/pub/f.txt", []string{"X-Cairn-Consistent: 1"}},
		{"/pub/?consistent=1", []string{"Accept: application/json"}},
	} {
		w := e.do("GET", tc.target, nil, tc.hdr...)
		expect(t, w, http.StatusServiceUnavailable, "Unavailable")
		if !strings.Contains(w.Body.String(), "no leader confirmed the read index") {
			t.Fatalf("%s: body %s does not say why", tc.target, w.Body)
		}
	}
	// A plain read does not depend on the leader.
	if w := e.do("GET", "/pub/f.txt", nil); w.Code != 200 {
		t.Fatalf("plain read: %d", w.Code)
	}
}

// TestConsistentReadFastPathHandsOff: through Serve, a consistent request
// is answered by net/http (with the barrier), on a connection the fast
// path keeps serving otherwise, and the answers match the handler's.
func TestConsistentReadFastPathHandsOff(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprint("fail=", fail), func(t *testing.T) {
			bf := &barrierFake{}
			if fail {
				bf.err = fmt.Errorf("%w: consistent read: no leader", store.ErrUnavailable)
			}
			e, addr := fastEnv(t, withBarrier(bf))
			want := 200
			if fail {
				want = 503
			}
			for _, tc := range []struct{ target, extra string }{
				{"/pub/f.txt?consistent=1", ""},
				{"/pub/f.txt?consisten%74=1", ""},
				{"/pub/f.txt", "X-Cairn-Consistent: 1\r\n"},
				{"/pub/f.txt", "x-cairn-consistent: true\r\n"},
			} {
				c := dial(t, addr)
				br := bufio.NewReader(c)
				calls, served := bf.calls.Load(), e.s.fast.Counts().Served
				_, err := io.WriteString(c, fmt.Sprintf("GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n", tc.target, tc.extra))
				must(t, err)
				resp, body := readResp(t, br, "GET")
				if resp.StatusCode != want || (!fail && body != "hello world") {
					t.Fatalf("%s %q: %d %q, want %d", tc.target, tc.extra, resp.StatusCode, body, want)
				}
				if bf.calls.Load()-calls != 1 {
					t.Fatalf("%s %q: %d barrier calls", tc.target, tc.extra, bf.calls.Load()-calls)
				}
				if e.s.fast.Counts().Served != served {
					t.Fatalf("%s %q: answered by the fast path", tc.target, tc.extra)
				}
				c.Close()
			}
			// A plain GET with a query stays on the fast path, without a barrier.
			c := dial(t, addr)
			defer c.Close()
			calls, served := bf.calls.Load(), e.s.fast.Counts().Served
			_, err := io.WriteString(c, "GET /pub/f.txt?v=1 HTTP/1.1\r\nHost: x\r\n\r\n")
			must(t, err)
			if resp, _ := readResp(t, bufio.NewReader(c), "GET"); resp.StatusCode != 200 {
				t.Fatalf("plain GET: %d", resp.StatusCode)
			}
			if bf.calls.Load() != calls || e.s.fast.Counts().Served != served+1 {
				t.Fatalf("plain GET with a query: barrier %d, fast %d", bf.calls.Load()-calls, e.s.fast.Counts().Served-served)
			}
		})
	}
}
