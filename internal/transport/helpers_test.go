package transport

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/minindex"
)

var testSecret = []byte("0123456789abcdef-cluster-secret")

// fakeHandler is a Handler over a map of blobs that records every call.
type fakeHandler struct {
	mu        sync.Mutex
	blobs     map[blob.Hash][]byte
	calls     atomic.Int64
	raft      chan []*raftpb.Message
	snapshots [][32]byte // SHA-256 of each fully applied snapshot body
	snapMeta  [][]byte
	snapErr   error // the error the last snapshot body ended with
	joins     []JoinRequest
	cutAfter  int64    // GetBlob: return a reader that fails after this many bytes (0: off)
	minIdx    []uint64 // minindex.From of each PutBlob's context
}

func newFakeHandler() *fakeHandler {
	return &fakeHandler{blobs: map[blob.Hash][]byte{}, raft: make(chan []*raftpb.Message, 1024)}
}

func (f *fakeHandler) StepRaft(_ context.Context, from NodeID, msgs []*raftpb.Message) error {
	f.calls.Add(1)
	f.raft <- msgs
	return nil
}

func (f *fakeHandler) ApplySnapshot(_ context.Context, from NodeID, meta []byte, body io.Reader) error {
	f.calls.Add(1)
	h := sha256.New()
	_, err := io.Copy(h, body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snapErr = err
	if err != nil {
		return err // nothing applied
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	f.snapshots = append(f.snapshots, sum)
	f.snapMeta = append(f.snapMeta, meta)
	return nil
}

func (f *fakeHandler) PutBlob(ctx context.Context, from NodeID, h blob.Hash, data []byte) error {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.blobs[h] = bytes.Clone(data)
	f.minIdx = append(f.minIdx, minindex.From(ctx))
	return nil
}

type failingReader struct {
	r io.Reader
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, errors.New("disk read failed")
	}
	return n, err
}

func (f *fakeHandler) GetBlob(_ context.Context, from NodeID, h blob.Hash, off, n int64) (io.ReadCloser, int64, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.blobs[h]
	if !ok {
		return nil, 0, blob.ErrNotFound
	}
	if off > int64(len(b)) {
		return nil, 0, ErrBadRequest
	}
	b = b[off:]
	if n >= 0 && n < int64(len(b)) {
		b = b[:n]
	}
	if f.cutAfter > 0 {
		return io.NopCloser(&failingReader{bytes.NewReader(b[:f.cutAfter])}), int64(len(b)), nil
	}
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
}

func (f *fakeHandler) HasBlobs(ctx context.Context, from NodeID, hs []blob.Hash) ([]bool, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.minIdx = append(f.minIdx, minindex.From(ctx))
	out := make([]bool, len(hs))
	for i, h := range hs {
		_, out[i] = f.blobs[h]
	}
	return out, nil
}

func (f *fakeHandler) Join(_ context.Context, from NodeID, req JoinRequest) (JoinResponse, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.joins = append(f.joins, req)
	return JoinResponse{ClusterID: 42, Members: []Member{{ID: 2, PublicURL: "http://b", ClusterURL: "http://b", Voter: true}, {ID: req.ID}}}, nil
}

// countingListener counts accepted connections and checks TCP_NODELAY on
// each.
type countingListener struct {
	net.Listener
	accepts atomic.Int64
	onConn  atomic.Pointer[func(net.Conn)]
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepts.Add(1)
		if f := l.onConn.Load(); f != nil {
			(*f)(c)
		}
	}
	return c, err
}

// testNode is a server for node id on a loopback listener.
type testNode struct {
	id  NodeID
	h   *fakeHandler
	srv *httptest.Server
	ln  *countingListener
}

func startNode(t testing.TB, id NodeID, mod func(*Config)) *testNode {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NodeID, cfg.Secret = id, testSecret
	if mod != nil {
		mod(&cfg)
	}
	h := newFakeHandler()
	s, err := NewServer(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(PathPrefix, s)
	srv := httptest.NewUnstartedServer(mux)
	ln := &countingListener{Listener: srv.Listener}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return &testNode{id: id, h: h, srv: srv, ln: ln}
}

// newClient returns node from's client with addresses of nodes.
func newClient(t testing.TB, from NodeID, mod func(*Config), nodes ...*testNode) *HTTPClient {
	t.Helper()
	addrs := map[NodeID]string{}
	for _, n := range nodes {
		addrs[n.id] = n.srv.URL
	}
	cfg := DefaultConfig()
	cfg.NodeID, cfg.Secret = from, testSecret
	cfg.Addr = func(id NodeID) (string, bool) { a, ok := addrs[id]; return a, ok }
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func raftMsg(from, to NodeID, index uint64, data []byte) *raftpb.Message {
	typ := raftpb.MessageType_MsgApp
	f, tt := uint64(from), uint64(to)
	term := uint64(3)
	return &raftpb.Message{
		Type: &typ, From: &f, To: &tt, Term: &term, Index: &index,
		Entries: []*raftpb.Entry{{Data: data}},
	}
}

// recvRaft waits for n messages on h.
func recvRaft(t *testing.T, h *fakeHandler, n int, within time.Duration) []*raftpb.Message {
	t.Helper()
	var got []*raftpb.Message
	deadline := time.After(within)
	for len(got) < n {
		select {
		case ms := <-h.raft:
			got = append(got, ms...)
		case <-deadline:
			t.Fatalf("got %d of %d raft messages within %v", len(got), n, within)
		}
	}
	return got
}

func startNodeB(b *testing.B) *testNode                { return startNode(b, 2, nil) }
func newClientB(b *testing.B, n *testNode) *HTTPClient { return newClient(b, 1, nil, n) }
