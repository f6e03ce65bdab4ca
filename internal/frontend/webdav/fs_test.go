package webdav

import (
	"context"
	"encoding/xml"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	xwebdav "golang.org/x/net/webdav"

	"github.com/cairn-fs/cairn/internal/store"
	"github.com/cairn-fs/cairn/internal/store/storetest"
)

func newStore(t *testing.T) *store.Local {
	t.Helper()
	st := storetest.New(t)
	if err := st.CreateBucket(context.Background(), store.BucketInfo{Name: "bkt"}); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestDeadProps: properties set and removed through the store.
func TestDeadProps(t *testing.T) {
	ctx := context.Background()
	fsys := &fileSystem{st: newStore(t), bucket: "bkt"}
	f, err := fsys.OpenFile(ctx, "/p.txt", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("hi"))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	open := func() xwebdav.DeadPropsHolder {
		// As x/net/webdav's PROPPATCH opens it: O_RDWR must not truncate.
		f, err := fsys.OpenFile(ctx, "/p.txt", os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f.(xwebdav.DeadPropsHolder)
	}
	n4, n5 := xml.Name{Space: "http://ex/", Local: "p4"}, xml.Name{Space: "http://ex/", Local: "p5"}
	if _, err := open().Patch([]xwebdav.Proppatch{{Props: []xwebdav.Property{{XMLName: n4, InnerXML: []byte("v")}, {XMLName: n5, InnerXML: []byte("w")}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := open().Patch([]xwebdav.Proppatch{{Remove: true, Props: []xwebdav.Property{{XMLName: n4}}}}); err != nil {
		t.Fatal(err)
	}
	m, err := open().DeadProps()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m[n4]; ok || string(m[n5].InnerXML) != "w" {
		t.Fatalf("props after removing p4: %+v", m)
	}
	if info, err := fsys.Stat(ctx, "/p.txt"); err != nil || info.Size() != 2 {
		t.Fatalf("patching properties changed the content: %v %v", info, err)
	}
}

// TestLocks: exclusive and shared locks, depth, conditions, and the
// per-request temporary locks that never reach the log.
func TestLocks(t *testing.T) {
	var puts, dels int
	recs := map[string][]byte{}
	ls := NewLocks(func(_ context.Context, tok string, v []byte) error { puts++; recs[tok] = v; return nil },
		func(_ context.Context, tok string) error { dels++; delete(recs, tok); return nil })
	now := time.Now()
	excl := func(root string, zero bool) xwebdav.LockDetails {
		return xwebdav.LockDetails{Root: root, Duration: time.Minute, OwnerXML: "o", ZeroDepth: zero}
	}
	a, err := ls.Create(now, excl("/a", false))
	if err != nil || puts != 1 {
		t.Fatalf("lock /a: %v (puts %d)", err, puts)
	}
	if _, err := ls.Create(now, excl("/a/b", true)); !errors.Is(err, xwebdav.ErrLocked) {
		t.Fatalf("lock under an infinite lock: %v", err)
	}
	if _, err := ls.CreateShared(now, excl("/a", true)); !errors.Is(err, xwebdav.ErrLocked) {
		t.Fatalf("shared lock over an exclusive one: %v", err)
	}
	// Writes: without the token refused, with it confirmed.
	if _, err := ls.Confirm(now, "/a/x", ""); !errors.Is(err, xwebdav.ErrConfirmationFailed) {
		t.Fatalf("write without the token: %v", err)
	}
	if _, err := ls.Confirm(now, "/a/x", "", xwebdav.Condition{Token: a}); err != nil {
		t.Fatalf("write with the token: %v", err)
	}
	if _, err := ls.Confirm(now, "/a/x", "", xwebdav.Condition{Token: a, Not: true}); !errors.Is(err, xwebdav.ErrConfirmationFailed) {
		t.Fatalf("Not of a held token: %v", err)
	}
	// Temporary locks (the handler's, around a write) stay local.
	tmp, err := ls.Create(now, xwebdav.LockDetails{Root: "/other", Duration: -1, ZeroDepth: true})
	if err != nil || puts != 1 {
		t.Fatalf("temporary lock: %v (puts %d)", err, puts)
	}
	if err := ls.Unlock(now, tmp); err != nil || dels != 0 {
		t.Fatalf("temporary unlock: %v (dels %d)", err, dels)
	}
	// Shared locks coexist; an exclusive one conflicts with them.
	s1, err := ls.CreateShared(now, excl("/s", true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ls.CreateShared(now, excl("/s", true)); err != nil {
		t.Fatalf("second shared lock: %v", err)
	}
	if _, err := ls.Create(now, excl("/s", true)); !errors.Is(err, xwebdav.ErrLocked) {
		t.Fatalf("exclusive over shared: %v", err)
	}
	if _, err := ls.Confirm(now, "/s", "", xwebdav.Condition{Token: s1}); err != nil {
		t.Fatalf("write with one shared token: %v", err)
	}
	// Another node loads the records and agrees; expiry frees.
	other := NewLocks(nil, nil)
	other.Load(recs, other.Generation())
	if _, err := other.Confirm(now, "/a/x", ""); !errors.Is(err, xwebdav.ErrConfirmationFailed) {
		t.Fatalf("a lock loaded from the records: %v", err)
	}
	temp := xwebdav.LockDetails{Root: "/a/x", Duration: -1, ZeroDepth: true}
	if _, err := other.Create(now, temp); !errors.Is(err, xwebdav.ErrLocked) {
		t.Fatalf("a write under a loaded lock: %v", err)
	}
	if _, err := other.Create(now.Add(2*time.Minute), temp); err != nil {
		t.Fatalf("a write after the lock expired: %v", err)
	}
	if err := ls.Unlock(now, a); err != nil || dels != 1 {
		t.Fatalf("unlock: %v (dels %d)", err, dels)
	}
}

// TestLocksReloadRace: the node reloads the lock records when they change,
// in the background. A reload that listed the records before a LOCK
// through this node applied must not drop that lock (a client's PUT with
// its token right after the LOCK then failed with 412, and davfs2 left
// the file empty), nor bring back a lock this node released since.
func TestLocksReloadRace(t *testing.T) {
	recs := map[string][]byte{}
	ls := NewLocks(func(_ context.Context, tok string, v []byte) error { recs[tok] = v; return nil },
		func(_ context.Context, tok string) error { delete(recs, tok); return nil })
	now := time.Now()
	excl := func(root string) xwebdav.LockDetails {
		return xwebdav.LockDetails{Root: root, Duration: time.Minute, OwnerXML: "o", ZeroDepth: true}
	}
	old, err := ls.Create(now, excl("/old"))
	if err != nil {
		t.Fatal(err)
	}
	// A reload starts and lists the records: /old only.
	gen := ls.Generation()
	listed := maps.Clone(recs)
	// Meanwhile a LOCK and an UNLOCK through this node.
	tok, err := ls.Create(now, excl("/f.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Unlock(now, old); err != nil {
		t.Fatal(err)
	}
	ls.Load(listed, gen) // the reload ends with what it listed
	if _, err := ls.Confirm(now, "/f.txt", "", xwebdav.Condition{Token: tok}); err != nil {
		t.Fatalf("a PUT with the new lock's token after a stale reload: %v", err)
	}
	if _, err := ls.Create(now, excl("/old")); err != nil {
		t.Fatalf("a stale reload brought back a released lock: %v", err)
	}
	// The next reload lists the records as they are: nothing is kept
	// from before it.
	ls.Load(maps.Clone(recs), ls.Generation())
	if _, err := ls.Confirm(now, "/f.txt", "", xwebdav.Condition{Token: tok}); err != nil {
		t.Fatalf("after a fresh reload: %v", err)
	}
	ls.Load(map[string][]byte{}, ls.Generation()) // another node released everything
	if _, err := ls.Create(now, excl("/f.txt")); err != nil {
		t.Fatalf("a lock released elsewhere still held here: %v", err)
	}
}

// TestExclusiveCreates: MKCOL of an existing collection, and a create
// with O_EXCL or If-None-Match: * whose file another client created
// meanwhile, are refused when they commit (the log decides: one winner
// across nodes), and the PUT's answer is 412.
func TestExclusiveCreates(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	fsys := &fileSystem{st: st, bucket: "bkt"}
	if err := fsys.Mkdir(ctx, "/d", 0); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Mkdir(ctx, "/d", 0); !errors.Is(err, os.ErrExist) {
		t.Fatalf("second MKCOL: %v, want ErrExist", err)
	}
	ex := &exclusivePut{}
	for _, c := range []struct {
		name string
		ctx  context.Context
		flag int
	}{
		{"O_EXCL", ctx, os.O_RDWR | os.O_CREATE | os.O_EXCL},
		{"If-None-Match", context.WithValue(ctx, exclusiveKey{}, ex), os.O_RDWR | os.O_CREATE | os.O_TRUNC},
	} {
		p := "/" + c.name
		f, err := fsys.OpenFile(c.ctx, p, c.flag, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("mine"))
		// Another node's client creates it first.
		if _, _, err := st.Put(ctx, "bkt", p[1:], strings.NewReader("theirs"), store.PutOptions{Size: 6}); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err == nil {
			t.Fatalf("%s: the second create succeeded", c.name)
		}
		if obj, err := st.Open(ctx, "bkt", p[1:]); err != nil || obj.Info().Size != 6 {
			t.Fatalf("%s: the first create's file was replaced: %v", c.name, err)
		}
	}
	if !ex.existed.Load() {
		t.Fatal("the exclusive PUT was not told the file existed")
	}
	rec := httptest.NewRecorder()
	w := &preconditionWriter{ResponseWriter: rec, ex: ex}
	w.WriteHeader(http.StatusMethodNotAllowed)
	w.Write([]byte("Method Not Allowed"))
	if rec.Code != http.StatusPreconditionFailed || strings.Contains(rec.Body.String(), "Method") {
		t.Fatalf("answer %d %q, want 412", rec.Code, rec.Body.String())
	}
}
