package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/frontend/fuse"
	"github.com/cairn-fs/cairn/internal/store"
	"github.com/cairn-fs/cairn/internal/store/storetest"
)

const testKey = "admin-frontend-test-key-0123456789"

// fakeCluster is a Cluster in memory: a cluster map, a Raft configuration
// and status, and the errors its membership changes return.
type fakeCluster struct {
	mu         sync.Mutex
	self       uint64
	raft       RaftStatus
	conf       Membership
	members    map[uint64]Member
	live       map[uint64]string
	under      int64
	removeErr  error  // RemoveFromRaft's answer
	promote    uint64 // EnsureVoters' answer
	calls      []string
	do         func(req *http.Request, id uint64) (*http.Response, error)
	membersErr error
}

func (c *fakeCluster) call(s string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, fmt.Sprintf(s, args...))
}

// called returns the calls made so far and forgets them.
func (c *fakeCluster) called() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = nil
	return out
}

func (c *fakeCluster) ID() uint64             { return c.self }
func (c *fakeCluster) Raft() RaftStatus       { return c.raft }
func (c *fakeCluster) Membership() Membership { return c.conf }
func (c *fakeCluster) Members() ([]Member, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.membersErr != nil {
		return nil, c.membersErr
	}
	var out []Member
	for _, m := range c.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Member) int { return int(a.ID) - int(b.ID) })
	return out, nil
}
func (c *fakeCluster) Member(id uint64) (Member, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.members[id]
	if !ok {
		return Member{}, fmt.Errorf("%w: meta: not found", ErrNoSuchNode)
	}
	return m, nil
}
func (c *fakeCluster) Liveness(id uint64) string {
	if l, ok := c.live[id]; ok {
		return l
	}
	return "alive"
}
func (c *fakeCluster) UnderReplicated() (int64, error) { return c.under, nil }
func (c *fakeCluster) SetState(ctx context.Context, id uint64, s NodeState) error {
	c.call("state %d %d", id, s)
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.members[id]
	m.State = s
	c.members[id] = m
	return nil
}
func (c *fakeCluster) RemoveFromRaft(ctx context.Context, id uint64) error {
	c.call("raft-remove %d", id)
	return c.removeErr
}
func (c *fakeCluster) RemoveFromMap(ctx context.Context, id uint64) error {
	c.call("map-remove %d", id)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.members, id)
	return nil
}
func (c *fakeCluster) EnsureVoters(ctx context.Context) (uint64, error) {
	c.call("ensure-voters")
	return c.promote, nil
}
func (c *fakeCluster) Do(req *http.Request, id uint64) (*http.Response, error) {
	c.call("do %d %s %s", id, req.Method, req.URL)
	if c.do == nil {
		return nil, errors.New("unreachable")
	}
	return c.do(req, id)
}

// kinded is err with a kind, as internal/node gives its errors one.
type kinded struct{ err, kind error }

func (e kinded) Error() string   { return e.err.Error() }
func (e kinded) Unwrap() []error { return []error{e.err, e.kind} }

// threeNodes is a cluster of members 1 (this node, leader), 2 and 3
// (voters), plus 9, a learner without a record.
func threeNodes() *fakeCluster {
	joined := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	return &fakeCluster{self: 1, raft: RaftStatus{Leader: 1, Term: 4, Applied: 40, Commit: 42},
		conf: Membership{Voters: []uint64{1, 2, 3}, Learners: []uint64{9}},
		members: map[uint64]Member{
			1: {ID: 1, URL: "http://n1", ClusterURL: "http://n1", Zone: "a", Weight: 1, State: NodeActive, Joined: joined},
			2: {ID: 2, URL: "http://n2", ClusterURL: "https://c2", Zone: "b", Weight: 1, State: NodeActive},
			3: {ID: 3, URL: "http://n3", Zone: "c", Weight: 1, State: NodeDraining},
		},
		live: map[uint64]string{3: "dead"}}
}

// fakeLocal is a Local with fixed answers.
type fakeLocal struct {
	report    LocalStatus
	started   bool
	mounts    []fuse.Stats
	owners    store.OwnerStats
	lockStats store.LockStats
	owned     []store.OwnedDir
}

func (l *fakeLocal) Report() LocalStatus { return l.report }
func (l *fakeLocal) Scrub() Scrub        { return l.report.Scrub }
func (l *fakeLocal) StartScrub() (Scrub, bool) {
	st := l.report.Scrub
	st.Running = true
	return st, l.started
}
func (l *fakeLocal) Mounts() []fuse.Stats       { return l.mounts }
func (l *fakeLocal) LockStats() store.LockStats { return l.lockStats }
func (l *fakeLocal) Owners(limit int) (store.OwnerStats, []store.OwnedDir) {
	return l.owners, l.owned[:min(limit, len(l.owned))]
}

// newTest makes the admin front end over a real in-memory store, local,
// and c (nil: a lone node), served by a test server.
func newTest(t *testing.T, c Cluster, local *fakeLocal) (*Handler, *httptest.Server, *store.Local) {
	t.Helper()
	st := storetest.New(t)
	h, srv := newTestOver(t, st, c, local)
	return h, srv, st
}

// newTestOver is newTest over the store st.
func newTestOver(t *testing.T, st Store, c Cluster, local *fakeLocal) (*Handler, *httptest.Server) {
	t.Helper()
	auth, err := access.New(access.Config{AdminKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	if local == nil {
		local = &fakeLocal{}
	}
	cfg := DefaultConfig()
	cfg.Auth, cfg.Store, cfg.Local, cfg.URL, cfg.Logger = auth, st, local, "http://lone", slog.New(slog.DiscardHandler)
	if c != nil {
		cfg.Cluster = c
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	mux := http.NewServeMux()
	for p, hh := range h.Routes() {
		mux.Handle(p, hh)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return h, srv
}

func call(t *testing.T, srv *httptest.Server, method, path, key, body string) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, srv.URL+path, rd)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestNodesView: the cluster map joined with Raft's configuration, by ID;
// a Raft member without a record is listed as unknown; IDs are strings.
func TestNodesView(t *testing.T) {
	_, srv, _ := newTest(t, threeNodes(), nil)
	code, hdr, body := call(t, srv, "GET", NodesPath, testKey, "")
	if code != 200 || hdr.Get("Cache-Control") != "no-store" || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("GET: %d %v %s", code, hdr, body)
	}
	want := `{"self":"1","leader":"1","term":4,"applied_index":40,"commit_index":42,"nodes":[` +
		`{"id":"1","name":"","url":"http://n1","zone":"a","weight":1,"witness":false,"state":"active","liveness":"alive","role":"voter","leader":true,"self":true,"joined":"2025-01-02T03:04:05Z"},` +
		`{"id":"2","name":"","url":"http://n2","cluster_url":"https://c2","zone":"b","weight":1,"witness":false,"state":"active","liveness":"alive","role":"voter","leader":false,"self":false},` +
		`{"id":"3","name":"","url":"http://n3","zone":"c","weight":1,"witness":false,"state":"draining","liveness":"dead","role":"voter","leader":false,"self":false},` +
		`{"id":"9","name":"","url":"","zone":"","weight":0,"witness":false,"state":"unknown","liveness":"","role":"learner","leader":false,"self":false}]}` + "\n"
	if body != want {
		t.Errorf("GET /_cairn/nodes:\n got %s\nwant %s", body, want)
	}
	code, _, body = call(t, srv, "GET", NodesPath+"/2", testKey, "")
	if code != 200 || !strings.HasPrefix(body, `{"id":"2",`) {
		t.Errorf("GET one: %d %s", code, body)
	}
	code, _, body = call(t, srv, "HEAD", NodesPath, testKey, "")
	if code != 200 || body != "" {
		t.Errorf("HEAD: %d %q", code, body)
	}
}

// TestNodesErrors: the refusals and the error table, with the JSON error
// format ({"error","code"}).
func TestNodesErrors(t *testing.T) {
	for _, tc := range []struct {
		name, method, path, key string
		setup                   func(c *fakeCluster)
		status                  int
		code, msg               string
	}{
		{name: "no key", method: "GET", path: NodesPath, status: 401, code: "Unauthorized"},
		{name: "wrong key", method: "GET", path: NodesPath, key: "wrong-key-0123456789", status: 403, code: "AccessDenied"},
		{name: "bad id", method: "GET", path: NodesPath + "/abc", key: testKey, status: 400, code: "BadRequest", msg: `"abc" is not a node ID`},
		{name: "zero id", method: "GET", path: NodesPath + "/0", key: testKey, status: 400, code: "BadRequest"},
		{name: "PUT", method: "PUT", path: NodesPath, key: testKey, status: 405, code: "MethodNotAllowed", msg: "method PUT not allowed (allowed: GET, HEAD)"},
		{name: "GET drain", method: "GET", path: NodesPath + "/2/drain", key: testKey, status: 405, code: "MethodNotAllowed"},
		{name: "unknown action", method: "POST", path: NodesPath + "/2/explode", key: testKey, status: 404, code: "NotFound"},
		{name: "unknown node", method: "GET", path: NodesPath + "/5", key: testKey, status: 404, code: "NoSuchNode", msg: "node 5 is not a member"},
		{name: "drain unknown", method: "POST", path: NodesPath + "/5/drain", key: testKey, status: 404, code: "NoSuchNode", msg: "node 5 is not in the cluster map"},
		{name: "remove unknown", method: "DELETE", path: NodesPath + "/5", key: testKey, status: 404, code: "NoSuchNode"},
		{name: "remove self", method: "DELETE", path: NodesPath + "/1", key: testKey, status: 409, code: "RemovingSelf"},
		{name: "last voter", method: "DELETE", path: NodesPath + "/1?force=1", key: testKey, status: 409, code: "LastVoter",
			setup: func(c *fakeCluster) { c.conf.Voters = []uint64{1} }},
		{name: "last data node", method: "POST", path: NodesPath + "/1/drain", key: testKey, status: 409, code: "LastDataNode",
			setup: func(c *fakeCluster) { delete(c.members, 2) }},
		{name: "bad membership", method: "DELETE", path: NodesPath + "/2", key: testKey, status: 409, code: "BadMembership",
			msg: "remove node 2 from raft: consensus: bad membership change: 2 is busy",
			setup: func(c *fakeCluster) {
				c.removeErr = kinded{errors.New("consensus: bad membership change: 2 is busy"), ErrBadMembership}
			}},
		{name: "unavailable", method: "DELETE", path: NodesPath + "/2", key: testKey, status: 503, code: "Unavailable",
			msg:   "cluster unavailable (no leader or no quorum); try again",
			setup: func(c *fakeCluster) { c.removeErr = fmt.Errorf("%w: no leader", ErrUnavailable) }},
		{name: "timeout", method: "DELETE", path: NodesPath + "/2", key: testKey, status: 503, code: "Unavailable",
			setup: func(c *fakeCluster) { c.removeErr = context.DeadlineExceeded }},
		{name: "invalid", method: "DELETE", path: NodesPath + "/2", key: testKey, status: 400, code: "BadRequest",
			setup: func(c *fakeCluster) { c.removeErr = fmt.Errorf("%w: bad", ErrInvalid) }},
		{name: "internal", method: "GET", path: NodesPath, key: testKey, status: 500, code: "InternalError", msg: "Internal Server Error",
			setup: func(c *fakeCluster) { c.membersErr = errors.New("disk on fire") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := threeNodes()
			if tc.setup != nil {
				tc.setup(c)
			}
			_, srv, _ := newTest(t, c, nil)
			code, hdr, body := call(t, srv, tc.method, tc.path, tc.key, "")
			var e struct{ Error, Code string }
			if err := json.Unmarshal([]byte(body), &e); err != nil || code != tc.status || e.Code != tc.code || !strings.Contains(e.Error, tc.msg) {
				t.Fatalf("%s %s: %d %s, want %d %s %q", tc.method, tc.path, code, body, tc.status, tc.code, tc.msg)
			}
			if hdr.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("no nosniff")
			}
			if code == 401 && hdr.Get("WWW-Authenticate") != `Bearer realm="cairn"` {
				t.Errorf("401 without WWW-Authenticate")
			}
			if code == 405 && hdr.Get("Allow") == "" {
				t.Errorf("405 without Allow")
			}
		})
	}
}

// TestNotACluster: a lone node answers 501 NotACluster, after the key.
func TestNotACluster(t *testing.T) {
	_, srv, _ := newTest(t, nil, nil)
	if code, _, _ := call(t, srv, "GET", NodesPath, "", ""); code != 401 {
		t.Fatalf("no key: %d", code)
	}
	code, _, body := call(t, srv, "GET", NodesPath+"/7", testKey, "")
	if code != 501 || !strings.Contains(body, `"code":"NotACluster"`) || !strings.Contains(body, "not a cluster") {
		t.Fatalf("lone node: %d %s", code, body)
	}
}

// TestDrainRemove: drain, activate and remove call the cluster in order
// and answer the member, or what was removed and promoted.
func TestDrainRemove(t *testing.T) {
	c := threeNodes()
	c.promote = 9
	_, srv, _ := newTest(t, c, nil)
	code, _, body := call(t, srv, "POST", NodesPath+"/2/drain", testKey, "")
	if code != 200 || !strings.Contains(body, `"state":"draining"`) {
		t.Fatalf("drain: %d %s", code, body)
	}
	// Idempotent: no second change.
	if code, _, _ = call(t, srv, "POST", NodesPath+"/2/drain", testKey, ""); code != 200 {
		t.Fatalf("drain again: %d", code)
	}
	code, _, body = call(t, srv, "POST", NodesPath+"/2/activate", testKey, "")
	if code != 200 || !strings.Contains(body, `"state":"active"`) {
		t.Fatalf("activate: %d %s", code, body)
	}
	code, _, body = call(t, srv, "DELETE", NodesPath+"/2", testKey, "")
	if code != 200 || body != `{"removed":"2","promoted":"9"}`+"\n" {
		t.Fatalf("remove: %d %s", code, body)
	}
	want := []string{"state 2 2", "state 2 1", "raft-remove 2", "map-remove 2", "ensure-voters"}
	if got := c.called(); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	// A Raft member without a record: out of Raft only, no promotion for a learner.
	code, _, body = call(t, srv, "DELETE", NodesPath+"/9", testKey, "")
	if got := c.called(); code != 200 || body != `{"removed":"9"}`+"\n" || !slices.Equal(got, []string{"raft-remove 9"}) {
		t.Fatalf("remove a learner without record: %d %s %q", code, body, got)
	}
}

// TestForwardRemoval: a forced removal of the answering node is sent to
// another member, voters first, with the caller's key, and its answer
// relayed; a member refusing the key is a 409, none reachable a 503.
func TestForwardRemoval(t *testing.T) {
	c := threeNodes()
	c.conf = Membership{Voters: []uint64{1, 3}, Learners: []uint64{2}}
	var auth string
	c.do = func(req *http.Request, id uint64) (*http.Response, error) {
		if id == 3 {
			return nil, errors.New("connection refused")
		}
		auth = req.Header.Get("Authorization")
		rec := httptest.NewRecorder()
		rec.Header().Set("Content-Type", "application/json")
		rec.WriteHeader(200)
		rec.WriteString(`{"removed":"1"}` + "\n")
		return rec.Result(), nil
	}
	_, srv, _ := newTest(t, c, nil)
	code, _, body := call(t, srv, "DELETE", NodesPath+"/1?force=1", testKey, "")
	if code != 200 || body != `{"removed":"1"}`+"\n" || auth != "Bearer "+testKey {
		t.Fatalf("forwarded: %d %s (auth %q)", code, body, auth)
	}
	want := []string{"do 3 DELETE http://n3/_cairn/nodes/1?force=1", "do 2 DELETE http://n2/_cairn/nodes/1?force=1"}
	if got := c.called(); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q (voters first)", got, want)
	}

	c.do = func(req *http.Request, id uint64) (*http.Response, error) {
		rec := httptest.NewRecorder()
		rec.WriteHeader(403)
		return rec.Result(), nil
	}
	if code, _, body = call(t, srv, "DELETE", NodesPath+"/1?force=1", testKey, ""); code != 409 || !strings.Contains(body, `"code":"ForwardRefused"`) {
		t.Fatalf("refused: %d %s", code, body)
	}
	c.do = nil
	if code, _, body = call(t, srv, "DELETE", NodesPath+"/1?force=1", testKey, ""); code != 503 || !strings.Contains(body, `"code":"Unavailable"`) {
		t.Fatalf("unreachable: %d %s", code, body)
	}
}

// TestStatus: a lone node's view; a cluster's, with each member's report
// fetched from it (an error for one that does not answer) and its lag.
func TestStatus(t *testing.T) {
	local := &fakeLocal{report: LocalStatus{AppliedIndex: 7, CommitIndex: 7, Disk: Disk{Blobs: 3}}}
	_, srv, _ := newTest(t, nil, local)
	code, _, body := call(t, srv, "GET", StatusPath, testKey, "")
	var v statusJSON
	if err := json.Unmarshal([]byte(body), &v); code != 200 || err != nil || v.Cluster || len(v.Nodes) != 1 ||
		v.Nodes[0].URL != "http://lone" || v.Nodes[0].Report == nil || v.Nodes[0].Report.Disk.Blobs != 3 || v.Locks == nil {
		t.Fatalf("lone status: %d %s", code, body)
	}
	if !strings.Contains(body, `"locks":[]`) {
		t.Errorf("no lock: want an empty list: %s", body)
	}
	code, _, body = call(t, srv, "GET", StatusPath+"?local=1", testKey, "")
	if code != 200 || !strings.HasPrefix(body, `{"id":"0","applied_index":7,"commit_index":7,"disk":{`) {
		t.Fatalf("local: %d %s", code, body)
	}
	if code, _, _ := call(t, srv, "POST", StatusPath, testKey, ""); code != 405 {
		t.Fatalf("POST: %d", code)
	}

	c := threeNodes()
	c.under = 5
	c.do = func(req *http.Request, id uint64) (*http.Response, error) {
		if id == 3 {
			return nil, errors.New("connection refused")
		}
		if req.URL.String() != "http://n2/_cairn/status?local=1" || req.Header.Get("Authorization") != "Bearer "+testKey {
			return nil, fmt.Errorf("unexpected %s", req.URL)
		}
		rec := httptest.NewRecorder()
		rec.WriteString(`{"id":"2","applied_index":30,"commit_index":42}`)
		return rec.Result(), nil
	}
	local.report.ID, local.report.CommitIndex = 1, 42
	_, srv, _ = newTest(t, c, local)
	code, _, body = call(t, srv, "GET", StatusPath, testKey, "")
	v = statusJSON{}
	if err := json.Unmarshal([]byte(body), &v); code != 200 || err != nil || !v.Cluster || v.Self != 1 || v.Leader != 1 ||
		v.Term != 4 || v.UnderReplicated != 5 || len(v.Nodes) != 4 {
		t.Fatalf("cluster status: %d %v %s", code, err, body)
	}
	n1, n2, n3, n9 := v.Nodes[0], v.Nodes[1], v.Nodes[2], v.Nodes[3]
	if !n1.Self || n1.Report == nil || n1.Lag != 35 || n2.Report == nil || n2.Report.AppliedIndex != 30 || n2.Lag != 12 ||
		n3.Report != nil || !strings.Contains(n3.Error, "unreachable: connection refused") || n3.Live != "dead" ||
		n9.Error != "no URL in the cluster map" {
		t.Errorf("members: %s", body)
	}
}

// countsStore is a store whose owner counts are given.
type countsStore struct {
	*store.Local
	counts []store.NodeDirs
	err    error
	limit  int // the last limit asked for
}

func (s *countsStore) DirOwnerCounts(ctx context.Context, limit int) ([]store.NodeDirs, error) {
	s.limit = limit
	return s.counts, s.err
}

// TestStatusOwners: the owners section of the status view: this node's
// counters and its first directories (from Local), and each node's count
// from the log: every member listed, 0 for one without a directory, a
// node the log names that is no member, a bounded count marked "more".
func TestStatusOwners(t *testing.T) {
	owners := func(body string) string {
		t.Helper()
		var v struct {
			Owners json.RawMessage `json:"owners"`
		}
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		return string(v.Owners)
	}
	// A lone node, nothing owned: empty lists.
	_, srv, st := newTest(t, nil, nil)
	code, _, body := call(t, srv, "GET", StatusPath, testKey, "")
	if want := `{"node":"0","owned":0,"claims":0,"recalls":0,"handed_over":0,"fenced":0,"lost":0,"dirs":[],"by_node":[]}`; code != 200 || owners(body) != want {
		t.Fatalf("nothing owned: %d\n got %s\nwant %s", code, owners(body), want)
	}
	// A lone node owning a directory: the log's count is the real store's.
	ctx := context.Background()
	if err := st.CreateBucket(ctx, store.BucketInfo{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Mkdir(ctx, "web", "d", store.Attrs{}); err != nil {
		t.Fatal(err)
	}
	info, err := st.Stat(ctx, "web", "d")
	if err != nil {
		t.Fatal(err)
	}
	_, done, err := st.Own(ctx, info.Ino, "web/d")
	if err != nil {
		t.Fatal(err)
	}
	done()
	since := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	local := &fakeLocal{owners: store.OwnerStats{Owned: 1, Claims: 2, Recalls: 3, HandedOver: 4, Fenced: 5, Lost: 6},
		owned:     []store.OwnedDir{{Dir: info.Ino, Path: "web/d", Epoch: 9, Since: since}},
		lockStats: store.LockStats{Commits: 7, Grants: 5, Waits: 2, Refused: 1, Lost: 1, Held: 3, LocalGrants: 4, Recalled: 8, Returned: 9, Rights: 2}}
	_, srv = newTestOver(t, st, nil, local)
	_, _, body = call(t, srv, "GET", StatusPath, testKey, "")
	// This node's lock counters ride along (the File locks section).
	if want := `"lock_stats":{"commits":7,"grants":5,"waits":2,"refused":1,"lost":1,"local_grants":4,"recalled":8,"returned":9,"rights":2,"files":3}`; !strings.Contains(body, want) {
		t.Errorf("status without this node's lock counters %s: %s", want, body)
	}
	want := fmt.Sprintf(`{"node":"0","owned":1,"claims":2,"recalls":3,"handed_over":4,"fenced":5,"lost":6,`+
		`"dirs":[{"ino":"%d","path":"web/d","epoch":"9","since":"2025-01-02T03:04:05Z"}],"by_node":[{"node":"1","dirs":1}]}`, info.Ino)
	if got := owners(body); got != want {
		t.Errorf("lone node:\n got %s\nwant %s", got, want)
	}

	// A cluster: members 1, 2, 3 and 9; the log also names node 7.
	local = &fakeLocal{report: LocalStatus{ID: 1}, owners: store.OwnerStats{Owned: 150, Claims: 1}}
	for i := range 150 {
		local.owned = append(local.owned, store.OwnedDir{Dir: uint64(100 + i), Path: fmt.Sprintf("web/d%03d", i), Epoch: 1, Since: since})
	}
	cs := &countsStore{Local: st, counts: []store.NodeDirs{{Node: 1, Dirs: 150}, {Node: 3, Dirs: ownerCountLimit, More: true}, {Node: 7, Dirs: 1}}}
	_, srv = newTestOver(t, cs, threeNodes(), local)
	_, _, body = call(t, srv, "GET", StatusPath, testKey, "")
	var v statusJSON
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	o := v.Owners
	if o.Node != 1 || o.Owned != 150 || len(o.Dirs) != ownedDirsShown || o.Dirs[0].Path != "web/d000" || cs.limit != ownerCountLimit {
		t.Errorf("cluster owners: node %d, owned %d, %d dirs, count limit %d: %s", o.Node, o.Owned, len(o.Dirs), cs.limit, owners(body))
	}
	if got, want := o.ByNode, []store.NodeDirs{{Node: 1, Dirs: 150}, {Node: 2}, {Node: 3, Dirs: ownerCountLimit, More: true}, {Node: 7, Dirs: 1}, {Node: 9}}; !slices.Equal(got, want) {
		t.Errorf("by node %+v, want %+v", got, want)
	}
	if !strings.Contains(body, `{"node":"3","dirs":10000,"more":true}`) || !strings.Contains(body, `{"node":"2","dirs":0}`) {
		t.Errorf("by node JSON: %s", owners(body))
	}
	// The log cannot be read: said, and no count shown.
	cs.err = errors.New("store: corrupt")
	_, _, body = call(t, srv, "GET", StatusPath, testKey, "")
	if got := owners(body); !strings.Contains(got, `"by_node":[],"error":"counting the directories of each node: store: corrupt"`) {
		t.Errorf("counts failing: %s", got)
	}
}

// TestScrubEndpoint: GET shows the progress; POST starts a pass (202, or
// 200 when one runs); other methods are 405.
func TestScrubEndpoint(t *testing.T) {
	local := &fakeLocal{report: LocalStatus{Scrub: Scrub{CorruptCopies: 2, Passes: 1}}, started: true}
	_, srv, _ := newTest(t, nil, local)
	code, _, body := call(t, srv, "GET", ScrubPath, testKey, "")
	if code != 200 || !strings.Contains(body, `"corrupt_copies":2`) || !strings.Contains(body, `"started":false`) {
		t.Fatalf("GET: %d %s", code, body)
	}
	code, _, body = call(t, srv, "POST", ScrubPath, testKey, "")
	if code != 202 || !strings.Contains(body, `"started":true`) || !strings.Contains(body, `"running":true`) {
		t.Fatalf("POST: %d %s", code, body)
	}
	local.started = false
	if code, _, body = call(t, srv, "POST", ScrubPath, testKey, ""); code != 200 || !strings.Contains(body, `"started":false`) {
		t.Fatalf("POST while running: %d %s", code, body)
	}
	if code, _, _ = call(t, srv, "DELETE", ScrubPath, testKey, ""); code != 405 {
		t.Fatalf("DELETE: %d", code)
	}
}

// TestMountsView: per-op means, shares and the p99's bucket, most time
// first.
func TestMountsView(t *testing.T) {
	var lookup, read fuse.OpStats
	lookup.Op, lookup.Calls, lookup.Seconds = fuse.OpLookup, 100, 0.01
	read.Op, read.Calls, read.Seconds, read.Errors = fuse.OpRead, 10, 0.09, 1
	for i := range fuse.LatencyBounds {
		if fuse.LatencyBounds[i] >= 100e-6 {
			lookup.Buckets[i] = 100
		}
		if fuse.LatencyBounds[i] >= 10e-3 {
			read.Buckets[i] = 10
		}
	}
	local := &fakeLocal{mounts: []fuse.Stats{{Bucket: "b", Dir: "/mnt", Ops: []fuse.OpStats{lookup, read},
		QueueItems: 2, QueueOldest: 1500 * time.Microsecond}}}
	_, srv, _ := newTest(t, nil, local)
	code, _, body := call(t, srv, "GET", MountsPath, testKey, "")
	var v struct{ Mounts []mountJSON }
	if err := json.Unmarshal([]byte(body), &v); code != 200 || err != nil || len(v.Mounts) != 1 {
		t.Fatalf("GET: %d %s", code, body)
	}
	m := v.Mounts[0]
	if m.Calls != 110 || m.QueueItems != 2 || m.QueueOldestMs != 1.5 || len(m.Ops) != 2 || m.Ops[0].Op != fuse.OpRead.String() {
		t.Fatalf("mount: %+v", m)
	}
	if r := m.Ops[0]; r.Errors != 1 || r.MeanMicros < 8999 || r.MeanMicros > 9001 || r.ShareOfTime != 0.9 || r.P99UpToMicro != 10e3 {
		t.Errorf("read: %+v", r)
	}
	if l := m.Ops[1]; l.P99UpToMicro != 100 {
		t.Errorf("lookup: %+v", l)
	}
}

// TestKeysAndRules: keys and rules through the store's records: create,
// list (no secret), get, revoke; bad requests; unknown IDs.
func TestKeysAndRules(t *testing.T) {
	_, srv, st := newTest(t, nil, nil)
	code, _, body := call(t, srv, "POST", KeysPath, testKey, `{"name":"ci","buckets":["web/build"],"allow":"read,list","expires":"24h"}`)
	var k keyJSON
	if err := json.Unmarshal([]byte(body), &k); code != 201 || err != nil || k.Secret == "" || k.ID == "" || len(k.Grants) != 1 || k.Expires.IsZero() {
		t.Fatalf("create: %d %s", code, body)
	}
	recs, err := st.ListRecords(context.Background(), store.RecordKey)
	if err != nil || len(recs) != 1 || recs[0].Name != k.ID {
		t.Fatalf("records: %+v %v", recs, err)
	}
	code, _, body = call(t, srv, "GET", KeysPath, testKey, "")
	if code != 200 || strings.Contains(body, k.Secret) || !strings.Contains(body, `"name":"ci"`) {
		t.Fatalf("list: %d %s", code, body)
	}
	if code, _, body = call(t, srv, "GET", KeysPath+"/"+k.ID, testKey, ""); code != 200 || strings.Contains(body, k.Secret) {
		t.Fatalf("get: %d %s", code, body)
	}
	for _, tc := range []struct{ body, msg string }{
		{`{`, "bad key request"},
		{`{"name":"x","allow":"fly"}`, ""},
		{`{"name":"x","buckets":["Bad_Bucket"]}`, `Bad_Bucket`},
		{`{"name":"x","expires":"-1h"}`, `want a positive duration`},
	} {
		if code, _, body := call(t, srv, "POST", KeysPath, testKey, tc.body); code != 400 || !strings.Contains(body, `"code":"BadRequest"`) || !strings.Contains(body, tc.msg) {
			t.Errorf("create %s: %d %s", tc.body, code, body)
		}
	}
	if code, _, _ = call(t, srv, "DELETE", KeysPath+"/"+k.ID, testKey, ""); code != 204 {
		t.Fatalf("revoke: %d", code)
	}
	if code, _, body = call(t, srv, "DELETE", KeysPath+"/"+k.ID, testKey, ""); code != 404 || !strings.Contains(body, `"code":"NoSuchKey"`) {
		t.Fatalf("revoke again: %d %s", code, body)
	}
	if code, _, body = call(t, srv, "GET", KeysPath+"/nope", testKey, ""); code != 404 || !strings.Contains(body, `"code":"NoSuchKey"`) {
		t.Fatalf("get unknown: %d %s", code, body)
	}
	if code, _, _ = call(t, srv, "PUT", KeysPath, testKey, ""); code != 405 {
		t.Fatalf("PUT keys: %d", code)
	}

	for _, r := range []string{`{"bucket":"web","path_prefix":"private/","deny":451}`, `{"user_agent":"(?i)badbot","deny":403}`} {
		if code, _, body := call(t, srv, "POST", RulesPath, testKey, r); code != 201 || !strings.Contains(body, `"id":"r`) {
			t.Fatalf("add rule %s: %d %s", r, code, body)
		}
	}
	code, _, body = call(t, srv, "GET", RulesPath, testKey, "")
	if code != 200 || !strings.HasPrefix(body, `[{"id":"r2","user_agent":"(?i)badbot"`) || !strings.Contains(body, `{"id":"r1","bucket":"web"`) {
		t.Fatalf("rules (cluster rules first): %d %s", code, body)
	}
	for _, r := range []string{`{"deny":403,"color":"red"}`, `{"rate":-1}`, `{"bucket":"Bad_Bucket","deny":403}`} {
		if code, _, body := call(t, srv, "POST", RulesPath, testKey, r); code != 400 || !strings.Contains(body, `"code":"BadRule"`) {
			t.Errorf("bad rule %s: %d %s", r, code, body)
		}
	}
	if code, _, _ = call(t, srv, "DELETE", RulesPath+"/r1", testKey, ""); code != 204 {
		t.Fatalf("delete r1: %d", code)
	}
	if code, _, body = call(t, srv, "DELETE", RulesPath+"/1", testKey, ""); code != 404 || !strings.Contains(body, `"code":"NoSuchRule"`) {
		t.Fatalf("delete again: %d %s", code, body)
	}
	if code, _, _ = call(t, srv, "GET", RulesPath+"/r2", testKey, ""); code != 405 {
		t.Fatalf("GET one rule: %d", code)
	}
}

// TestUsageHistoryLogs: the page's data endpoints need the key, answer
// GET and HEAD only, and show the store's buckets, the sampled history
// and the log ring's records.
func TestUsageHistoryLogs(t *testing.T) {
	auth, err := access.New(access.Config{AdminKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	st := storetest.New(t)
	ctx := context.Background()
	if err := st.CreateBucket(ctx, store.BucketInfo{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a.txt", "d/b.txt"} {
		if _, _, err := st.Put(ctx, "web", p, strings.NewReader("hello"), store.PutOptions{Size: 5}); err != nil {
			t.Fatal(err)
		}
	}
	ring := NewLogRing(slog.DiscardHandler, 0)
	cfg := DefaultConfig()
	cfg.Auth, cfg.Store, cfg.Local, cfg.Logs, cfg.Logger = auth, st, &fakeLocal{}, ring, slog.New(ring)
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	mux := http.NewServeMux()
	for p, hh := range h.Routes() {
		mux.Handle(p, hh)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, p := range []string{HistoryPath, LogsPath, UsagePath} {
		if code, _, _ := call(t, srv, "GET", p, "", ""); code != 401 {
			t.Errorf("%s without key: %d", p, code)
		}
		if code, _, _ := call(t, srv, "POST", p, testKey, ""); code != 405 {
			t.Errorf("POST %s: %d", p, code)
		}
	}
	code, _, body := call(t, srv, "GET", UsagePath, testKey, "")
	if code != 200 || !strings.Contains(body, `"buckets":[{"name":"web","files":2,"bytes":10,"complete":true}]`) {
		t.Errorf("usage: %d %s", code, body)
	}
	slog.New(ring).Warn("disk is slow")
	code, _, body = call(t, srv, "GET", LogsPath, testKey, "")
	if code != 200 || !strings.Contains(body, `"msg":"disk is slow"`) {
		t.Errorf("logs: %d %s", code, body)
	}
	code, hdr, body := call(t, srv, "GET", HistoryPath, testKey, "")
	if code != 200 || !strings.Contains(body, `"interval_seconds":5`) || hdr.Get("Cache-Control") != "no-store" {
		t.Errorf("history: %d %s", code, body)
	}
	code, hdr, _ = call(t, srv, "GET", UIPath, "", "")
	if code != 200 || hdr.Get("Content-Security-Policy") != ContentSecurityPolicy {
		t.Errorf("page: %d %v", code, hdr)
	}
}
