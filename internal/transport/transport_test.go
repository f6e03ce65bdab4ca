package transport

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/cairn-fs/cairn/internal/blob"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"valid", func(c *Config) {}, true},
		{"no node id", func(c *Config) { c.NodeID = 0 }, false},
		{"short secret", func(c *Config) { c.Secret = []byte("fifteen bytes!!") }, false},
		{"16-byte secret", func(c *Config) { c.Secret = []byte("sixteen bytes!!!") }, true},
		{"negative timeout", func(c *Config) { c.RaftTimeout = -1 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.NodeID, c.Secret = 1, testSecret
			tc.mod(&c)
			err := c.Validate()
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrBadConfig)) {
				t.Fatalf("Validate = %v, want ok=%v", err, tc.ok)
			}
			if _, err := NewServer(c, newFakeHandler()); (err == nil) != tc.ok {
				t.Fatalf("NewServer = %v, want ok=%v", err, tc.ok)
			}
		})
	}
	c := DefaultConfig()
	c.NodeID, c.Secret = 1, testSecret
	if _, err := New(c); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("New without Addr = %v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	n2 := startNode(t, 2, nil)
	c := newClient(t, 1, nil, n2)
	ctx := context.Background()

	data := bytes.Repeat([]byte("cairn!"), 100_000)
	h := blob.Sum(data)
	if err := c.PutBlob(ctx, 2, BlobPut{Hash: h, Data: data}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(n2.h.blobs[h], data) {
		t.Fatal("blob not stored")
	}
	for _, tc := range []struct{ off, n int64 }{{0, -1}, {0, 10}, {7, 1000}, {int64(len(data)) - 3, -1}} {
		rc, err := c.GetBlob(ctx, 2, h, tc.off, tc.n)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		want := data[tc.off:]
		if tc.n >= 0 {
			want = want[:tc.n]
		}
		// The body announces its length (the handler knows it).
		if s, ok := rc.(interface{ Size() int64 }); !ok || s.Size() != int64(len(want)) {
			t.Fatalf("GetBlob(%d,%d): the reader does not announce its %d bytes", tc.off, tc.n, len(want))
		}
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("GetBlob(%d,%d): %d bytes, err %v; want %d", tc.off, tc.n, len(got), err, len(want))
		}
	}
	if _, err := c.GetBlob(ctx, 2, blob.Sum([]byte("nope")), 0, -1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetBlob of a missing blob: %v", err)
	}

	has, err := c.HasBlobs(ctx, 2, []blob.Hash{blob.Sum([]byte("x")), h, {}})
	if err != nil || fmt.Sprint(has) != "[false true false]" {
		t.Fatalf("HasBlobs = %v, %v", has, err)
	}
	if has, err := c.HasBlobs(ctx, 2, nil); err != nil || len(has) != 0 {
		t.Fatalf("HasBlobs(nil) = %v, %v", has, err)
	}

	resp, err := c.Join(ctx, n2.srv.URL+"/", JoinRequest{ID: 7, PublicURL: "http://g:1", ClusterURL: "http://g:2", Zone: "a"})
	if err != nil || resp.ClusterID != 42 || len(resp.Members) != 2 || resp.Members[1].ID != 7 {
		t.Fatalf("Join = %+v, %v", resp, err)
	}
	if j := n2.h.joins[0]; j.ID != 7 || j.Zone != "a" || j.ClusterURL != "http://g:2" {
		t.Fatalf("join request arrived as %+v", j)
	}

	var msgs []*raftpb.Message
	for i := range 100 {
		msgs = append(msgs, raftMsg(1, 2, uint64(i), []byte(fmt.Sprint("entry", i))))
	}
	c.SendRaft(2, msgs[:50])
	c.SendRaft(2, msgs[50:])
	got := recvRaft(t, n2.h, 100, 5*time.Second)
	for i, m := range got {
		if m.GetIndex() != uint64(i) || string(m.GetEntries()[0].GetData()) != fmt.Sprint("entry", i) || m.GetFrom() != 1 {
			t.Fatalf("raft message %d arrived as %v", i, m)
		}
	}

	meta := []byte("snapshot-meta")
	body := bytes.Repeat([]byte("snap"), 10_000)
	if err := c.SendSnapshot(ctx, 2, meta, bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	if len(n2.h.snapshots) != 1 || n2.h.snapshots[0] != sha256.Sum256(body) || string(n2.h.snapMeta[0]) != "snapshot-meta" {
		t.Fatal("snapshot not applied intact")
	}
	if err := c.SendSnapshot(ctx, 2, nil, bytes.NewReader(nil)); err != nil {
		t.Fatalf("empty snapshot: %v", err)
	}

	if err := c.PutBlob(ctx, 99, BlobPut{Hash: h, Data: data}); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("PutBlob to an unknown node: %v", err)
	}
}

func TestRaftMessagesOfAnotherNodeRejected(t *testing.T) {
	n2 := startNode(t, 2, nil)
	unreachable := make(chan error, 10)
	c := newClient(t, 1, func(c *Config) {
		c.OnUnreachable = func(to NodeID, err error) { unreachable <- err }
	}, n2)
	c.SendRaft(2, []*raftpb.Message{raftMsg(5, 2, 1, nil)}) // From is not the sender
	select {
	case err := <-unreachable:
		if !errors.Is(err, ErrBadRequest) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no error reported")
	}
	if n2.h.calls.Load() != 0 {
		t.Fatal("handler called")
	}
}

func TestPutBlobWrongHash(t *testing.T) {
	n2 := startNode(t, 2, nil)
	c := newClient(t, 1, nil, n2)
	err := c.PutBlob(context.Background(), 2, BlobPut{Hash: blob.Sum([]byte("other")), Data: []byte("data")})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("PutBlob with a wrong hash: %v", err)
	}
	if n2.h.calls.Load() != 0 || len(n2.h.blobs) != 0 {
		t.Fatal("handler called for a blob that does not match its hash")
	}
	big := make([]byte, blob.MaxSize+1)
	if err := c.PutBlob(context.Background(), 2, BlobPut{Hash: blob.Sum(big), Data: big}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("PutBlob of MaxSize+1 bytes: %v", err)
	}
}

// recorder captures the requests a client sends, with their bodies.
type recorder struct {
	rt   http.RoundTripper
	mu   sync.Mutex
	reqs []*http.Request
	body [][]byte
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var b []byte
	if req.Body != nil {
		b, _ = io.ReadAll(req.Body)
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.body = append(r.body, b)
	r.mu.Unlock()
	return r.rt.RoundTrip(req)
}

// resend sends a copy of captured request i with body b, and returns the status.
func (r *recorder) resend(t *testing.T, i int, b []byte, trailer http.Header) int {
	t.Helper()
	orig := r.reqs[i]
	req, err := http.NewRequest(orig.Method, orig.URL.String(), bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = orig.Header.Clone()
	if trailer != nil {
		req.ContentLength = -1
		req.Body = io.NopCloser(bytes.NewReader(b)) // unknown length: chunked, with trailer
		req.Trailer = trailer
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

func TestAuthFailures(t *testing.T) {
	ctx := context.Background()
	data := []byte("some blob bytes")
	h := blob.Sum(data)

	t.Run("wrong secret", func(t *testing.T) {
		n2 := startNode(t, 2, nil)
		c := newClient(t, 1, func(c *Config) { c.Secret = []byte("another-secret-of-the-same-size") }, n2)
		if err := c.PutBlob(ctx, 2, BlobPut{Hash: h, Data: data}); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("err = %v", err)
		}
		if _, err := c.HasBlobs(ctx, 2, []blob.Hash{h}); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("err = %v", err)
		}
		if _, err := c.Join(ctx, n2.srv.URL, JoinRequest{ID: 1}); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("err = %v", err)
		}
		if err := c.SendSnapshot(ctx, 2, []byte("m"), strings.NewReader("body")); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("err = %v", err)
		}
		if n := n2.h.calls.Load(); n != 0 {
			t.Fatalf("handler called %d times", n)
		}
	})

	for _, skew := range []time.Duration{-time.Minute, time.Minute} {
		t.Run(fmt.Sprintf("timestamp %v", skew), func(t *testing.T) {
			n2 := startNode(t, 2, nil)
			c := newClient(t, 1, func(c *Config) { c.Now = func() time.Time { return time.Now().Add(skew) } }, n2)
			if err := c.PutBlob(ctx, 2, BlobPut{Hash: h, Data: data}); !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("err = %v", err)
			}
			if n2.h.calls.Load() != 0 {
				t.Fatal("handler called")
			}
		})
	}

	t.Run("sent to another node", func(t *testing.T) {
		n2 := startNode(t, 2, nil)
		// The client believes node 3 lives at node 2's address.
		c := newClient(t, 1, func(c *Config) {
			c.Addr = func(NodeID) (string, bool) { return n2.srv.URL, true }
		})
		if err := c.PutBlob(ctx, 3, BlobPut{Hash: h, Data: data}); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("err = %v", err)
		}
		if n2.h.calls.Load() != 0 {
			t.Fatal("handler called")
		}
	})

	t.Run("missing headers", func(t *testing.T) {
		n2 := startNode(t, 2, nil)
		resp, err := http.Post(n2.srv.URL+pathHas, "application/octet-stream", bytes.NewReader(h[:]))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || n2.h.calls.Load() != 0 {
			t.Fatalf("status %d, %d calls", resp.StatusCode, n2.h.calls.Load())
		}
	})

	t.Run("replay and tampered body", func(t *testing.T) {
		n2 := startNode(t, 2, nil)
		c := newClient(t, 1, nil, n2)
		rec := &recorder{rt: c.rt}
		c.rt = rec
		if err := c.PutBlob(ctx, 2, BlobPut{Hash: h, Data: data}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.HasBlobs(ctx, 2, []blob.Hash{h}); err != nil {
			t.Fatal(err)
		}
		calls := n2.h.calls.Load()
		if st := rec.resend(t, 0, rec.body[0], nil); st != http.StatusUnauthorized {
			t.Fatalf("replayed PutBlob: status %d", st)
		}
		if st := rec.resend(t, 1, rec.body[1], nil); st != http.StatusUnauthorized {
			t.Fatalf("replayed HasBlobs: status %d", st)
		}
		// Same headers, other body: the content digest does not match.
		tampered := bytes.Clone(rec.body[1])
		tampered[0] ^= 1
		c.rt = rec.rt
		rec2 := &recorder{rt: c.rt}
		c.rt = rec2
		if _, err := c.HasBlobs(ctx, 2, []blob.Hash{h}); err != nil {
			t.Fatal(err)
		}
		calls++
		// A fresh capture, sent with a tampered body before the genuine
		// one is: the nonce is unused, only the body gives it away.
		orig := rec2.reqs[0]
		req, _ := http.NewRequest(orig.Method, orig.URL.String(), bytes.NewReader(tampered))
		req.Header = orig.Header.Clone()
		req.Header.Set(hdrNonce, strings.Repeat("ab", 16))
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("tampered HasBlobs (new nonce): status %d", resp.StatusCode)
		}
		if n := n2.h.calls.Load(); n != calls {
			t.Fatalf("handler called %d times, want %d", n, calls)
		}
	})

	t.Run("tampered body of an unsent request", func(t *testing.T) {
		// Capture a request, do not let it reach the server, then send it
		// with a different body: the signature covers the body digest.
		n2 := startNode(t, 2, nil)
		c := newClient(t, 1, nil, n2)
		var captured *http.Request
		c.rt = rtFunc(func(req *http.Request) (*http.Response, error) {
			captured = req
			return nil, errors.New("captured")
		})
		_ = c.PutBlob(ctx, 2, BlobPut{Hash: h, Data: data})
		other := []byte("other blob bytes")
		req, _ := http.NewRequest(captured.Method, captured.URL.String(), bytes.NewReader(other))
		req.Header = captured.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// PutBlob's signed digest is the blob's name, so bytes that do not
		// match it are refused as corrupt (422) rather than 401: either
		// way the handler is never called.
		if resp.StatusCode != http.StatusUnprocessableEntity || n2.h.calls.Load() != 0 {
			t.Fatalf("tampered PutBlob: status %d, %d calls", resp.StatusCode, n2.h.calls.Load())
		}
	})

	t.Run("tampered snapshot stream", func(t *testing.T) {
		n2 := startNode(t, 2, nil)
		c := newClient(t, 1, nil, n2)
		var captured *http.Request
		var capturedBody []byte
		c.rt = rtFunc(func(req *http.Request) (*http.Response, error) {
			captured = req
			capturedBody, _ = io.ReadAll(req.Body) // sets the trailer at EOF
			return nil, errors.New("captured")
		})
		body := bytes.Repeat([]byte("snapshot data "), 5000)
		_ = c.SendSnapshot(ctx, 2, []byte("meta"), bytes.NewReader(body))
		tampered := bytes.Clone(capturedBody)
		tampered[len(tampered)-100] ^= 1
		rec := &recorder{reqs: []*http.Request{captured}}
		if st := rec.resend(t, 0, tampered, captured.Trailer.Clone()); st != http.StatusUnauthorized {
			t.Fatalf("tampered snapshot: status %d", st)
		}
		if len(n2.h.snapshots) != 0 || !errors.Is(n2.h.snapErr, ErrUnauthorized) {
			t.Fatalf("tampered snapshot applied (%d) or body ended with %v", len(n2.h.snapshots), n2.h.snapErr)
		}
		// No trailer at all.
		if st := rec.resend(t, 0, capturedBody, http.Header{}); st != http.StatusUnauthorized {
			t.Fatalf("snapshot without trailer: status %d", st)
		}
		// Tampered meta: refused before the handler is called.
		calls := n2.h.calls.Load()
		tm := bytes.Clone(capturedBody)
		tm[5] ^= 1
		if st := rec.resend(t, 0, tm, captured.Trailer.Clone()); st != http.StatusUnauthorized {
			t.Fatalf("tampered snapshot meta: status %d", st)
		}
		if n2.h.calls.Load() != calls || len(n2.h.snapshots) != 0 {
			t.Fatal("handler called with tampered meta")
		}
	})
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestReplayCacheRotation(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := newReplayCache(time.Second, 3)
	n := func(b byte) [16]byte { return [16]byte{b} }
	if c.add(n(1), t0) != addFresh || c.add(n(1), t0) != addReplay {
		t.Fatal("replay in the same generation not caught")
	}
	// Still remembered 2×skew later (one rotation).
	if c.add(n(2), t0.Add(2*time.Second)) != addFresh || c.add(n(1), t0.Add(2*time.Second)) != addReplay {
		t.Fatal("replay after one rotation not caught")
	}
	if c.add(n(3), t0.Add(2*time.Second)) != addFresh || c.add(n(4), t0.Add(2*time.Second)) != addFull {
		t.Fatal("full cache not reported")
	}
	// Forgotten once outside any window.
	if c.add(n(1), t0.Add(10*time.Second)) != addFresh {
		t.Fatal("old nonce not forgotten")
	}
}

func TestNoDelayOnClientConnections(t *testing.T) {
	var serverNoDelay []int
	var mu sync.Mutex
	n2 := startNode(t, 2, nil)
	onConn := func(c net.Conn) {
		v := noDelay(t, c)
		mu.Lock()
		serverNoDelay = append(serverNoDelay, v)
		mu.Unlock()
	}
	n2.ln.onConn.Store(&onConn)
	c := newClient(t, 1, nil, n2)
	var dialed []int
	c.onDial = func(conn net.Conn) { dialed = append(dialed, noDelay(t, conn)) }
	if _, err := c.HasBlobs(context.Background(), 2, []blob.Hash{{}}); err != nil {
		t.Fatal(err)
	}
	if len(dialed) != 1 || dialed[0] == 0 {
		t.Fatalf("client connections' TCP_NODELAY: %v", dialed)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(serverNoDelay) != 1 || serverNoDelay[0] == 0 {
		t.Fatalf("server connections' TCP_NODELAY: %v", serverNoDelay)
	}
}

func TestConnectionReuse(t *testing.T) {
	n2 := startNode(t, 2, nil)
	c := newClient(t, 1, nil, n2)
	ctx := context.Background()
	data := bytes.Repeat([]byte{7}, 200<<10)
	h := blob.Sum(data)
	for i := range 100 {
		if err := c.PutBlob(ctx, 2, BlobPut{Hash: h, Data: data}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.HasBlobs(ctx, 2, []blob.Hash{h}); err != nil {
			t.Fatal(err)
		}
		rc, err := c.GetBlob(ctx, 2, h, int64(i), 1000)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, rc); err != nil {
			t.Fatal(err)
		}
		rc.Close()
	}
	if n := n2.ln.accepts.Load(); n != 1 {
		t.Fatalf("300 sequential calls dialed %d connections, want 1", n)
	}
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for range 50 {
				if err := c.PutBlob(ctx, 2, BlobPut{Hash: h, Data: data}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Pooling bounds dials near the concurrency; on a loaded machine a few
	// extra dials happen while a returned connection is not yet idle. A pool
	// that did not work would dial once per call (hundreds).
	if n := n2.ln.accepts.Load(); n > 2*workers {
		t.Fatalf("%d concurrent callers dialed %d connections in all", workers, n)
	}
}

// hungListener accepts connections and never answers.
func hungListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

func TestHungPeer(t *testing.T) {
	hung := hungListener(t)
	n2 := startNode(t, 2, nil)
	unreachable := make(chan NodeID, 100)
	c := newClient(t, 1, func(c *Config) {
		c.ControlTimeout = 300 * time.Millisecond
		c.RaftTimeout = 200 * time.Millisecond
		c.RaftQueueLen = 256
		c.OnUnreachable = func(to NodeID, err error) {
			if !errors.Is(err, ErrUnavailable) {
				t.Errorf("unreachable error %v does not wrap ErrUnavailable", err)
			}
			select {
			case unreachable <- to:
			default:
			}
		}
		base := c.Addr
		c.Addr = func(id NodeID) (string, bool) {
			if id == 9 {
				return hung, true
			}
			return base(id)
		}
	}, n2)

	// A control call with a ctx deadline fails within it.
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.HasBlobs(ctx, 9, []blob.Hash{{}})
	if el := time.Since(start); !errors.Is(err, ErrUnavailable) || el > 600*time.Millisecond {
		t.Fatalf("HasBlobs to a hung peer: %v after %v", err, el)
	}
	// Without one, ControlTimeout bounds it.
	start = time.Now()
	_, err = c.Join(context.Background(), hung, JoinRequest{ID: 1})
	if el := time.Since(start); !errors.Is(err, ErrUnavailable) || el > 900*time.Millisecond {
		t.Fatalf("Join to a hung peer: %v after %v", err, el)
	}

	// Raft traffic to the hung peer does not hold up traffic to others.
	for i := range 200 {
		c.SendRaft(9, []*raftpb.Message{raftMsg(1, 9, uint64(i), nil)})
		c.SendRaft(2, []*raftpb.Message{raftMsg(1, 2, uint64(i), nil)})
	}
	start = time.Now()
	recvRaft(t, n2.h, 200, 5*time.Second)
	if el := time.Since(start); el > time.Second {
		t.Fatalf("messages to a live peer took %v next to a hung one", el)
	}
	select {
	case id := <-unreachable:
		if id != 9 {
			t.Fatalf("node %d reported unreachable", id)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("hung peer never reported unreachable")
	}
}

// patternReader yields n pseudo-random bytes without holding them.
type patternReader struct {
	n, x uint64
}

func (p *patternReader) Read(b []byte) (int, error) {
	if p.n == 0 {
		return 0, io.EOF
	}
	if uint64(len(b)) > p.n {
		b = b[:p.n]
	}
	for i := 0; i < len(b); i += 8 {
		p.x ^= p.x << 13
		p.x ^= p.x >> 7
		p.x ^= p.x << 17
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], p.x)
		copy(b[i:], w[:])
	}
	p.n -= uint64(len(b))
	return len(b), nil
}

func TestLargeSnapshotBoundedMemory(t *testing.T) {
	const size = 64 << 20
	n2 := startNode(t, 2, nil)
	c := newClient(t, 1, nil, n2)
	want := sha256.New() // hashes what was sent, as it is sent
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := c.SendSnapshot(context.Background(), 2, []byte("meta"), io.TeeReader(&patternReader{n: size, x: 88172645463325252}, want))
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if len(n2.h.snapshots) != 1 || !bytes.Equal(n2.h.snapshots[0][:], want.Sum(nil)) {
		t.Fatal("snapshot body arrived changed")
	}
	// Both ends are in this process: everything either allocated while
	// moving 64 MiB must stay far below the body's size.
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("streaming %d MiB allocated %d KiB", size>>20, alloc>>10)
	if alloc > 8<<20 {
		t.Fatalf("streaming %d MiB allocated %d MiB", size>>20, alloc>>20)
	}
}

func TestSnapshotSourceError(t *testing.T) {
	n2 := startNode(t, 2, nil)
	c := newClient(t, 1, nil, n2)
	src := io.MultiReader(strings.NewReader("partial"), &failingReader{strings.NewReader("")})
	err := c.SendSnapshot(context.Background(), 2, nil, src)
	if err == nil || !strings.Contains(err.Error(), "disk read failed") {
		t.Fatalf("err = %v", err)
	}
	if len(n2.h.snapshots) != 0 {
		t.Fatal("a cut snapshot was applied")
	}
}

func TestSnapshotStall(t *testing.T) {
	hung := hungListener(t)
	c := newClient(t, 1, func(c *Config) {
		c.SnapshotStallTimeout = 200 * time.Millisecond
		c.Addr = func(NodeID) (string, bool) { return hung, true }
	})
	start := time.Now()
	// The hung peer never reads: the socket buffers fill, the body stalls.
	err := c.SendSnapshot(context.Background(), 9, nil, &patternReader{n: 1 << 30, x: 1})
	if el := time.Since(start); err == nil || el > 5*time.Second {
		t.Fatalf("snapshot to a hung peer: %v after %v", err, el)
	}
}

func TestGetBlobCutMidBody(t *testing.T) {
	n2 := startNode(t, 2, nil)
	c := newClient(t, 1, nil, n2)
	data := bytes.Repeat([]byte("x"), 1<<20)
	h := blob.Sum(data)
	if err := c.PutBlob(context.Background(), 2, BlobPut{Hash: h, Data: data}); err != nil {
		t.Fatal(err)
	}
	n2.h.mu.Lock()
	n2.h.cutAfter = 100 << 10
	n2.h.mu.Unlock()
	rc, err := c.GetBlob(context.Background(), 2, h, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err == nil {
		t.Fatalf("a body cut after %d bytes read as complete", len(got))
	}
}

func TestRaftQueueFullDrops(t *testing.T) {
	hung := hungListener(t)
	var mu sync.Mutex
	var errs []error
	c := newClient(t, 1, func(c *Config) {
		c.RaftQueueLen = 4
		c.RaftTimeout = 5 * time.Second // the sender stays stuck on its first batch
		c.Addr = func(NodeID) (string, bool) { return hung, true }
		c.OnUnreachable = func(to NodeID, err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	})
	msgs := make([]*raftpb.Message, 100)
	for i := range msgs {
		msgs[i] = raftMsg(1, 9, uint64(i), nil)
	}
	start := time.Now()
	c.SendRaft(9, msgs)
	if el := time.Since(start); el > 100*time.Millisecond {
		t.Fatalf("SendRaft blocked %v", el)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(errs) == 0 || !strings.Contains(errs[0].Error(), "full") {
		t.Fatalf("queue overflow not reported: %v", errs)
	}
}

func BenchmarkPutBlob16K(b *testing.B) {
	n2 := startNodeB(b)
	c := newClientB(b, n2)
	data := bytes.Repeat([]byte{1}, 16<<10)
	h := blob.Sum(data)
	b.SetBytes(int64(len(data)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := c.PutBlob(context.Background(), 2, BlobPut{Hash: h, Data: data}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkHasBlobs(b *testing.B) {
	n2 := startNodeB(b)
	c := newClientB(b, n2)
	for b.Loop() {
		if _, err := c.HasBlobs(context.Background(), 2, []blob.Hash{{}}); err != nil {
			b.Fatal(err)
		}
	}
}
