package kv

import (
	"fmt"
	"strings"
	"testing"

	pvfs "github.com/cockroachdb/pebble/v2/vfs"
)

// An ingest replaces values, deletes keys and adds new ones in one step;
// a snapshot taken before keeps the old view; a batch opened before reads
// the new values (it caches nothing across the ingest); keys out of order
// are refused; an aborted ingest changes nothing.
func TestIngest(t *testing.T) {
	forEach(t, func(t *testing.T, s Store) {
		mustSet(t, s, "a", "1", "b", "1", "c", "1", "y", "1")
		snap := s.Snapshot()
		defer snap.Close()
		bt := s.NewBatch()
		defer bt.Close()
		if v, err := bt.Get([]byte("b")); err != nil || string(v) != "1" {
			t.Fatalf("batch read b: %q, %v", v, err)
		}
		g, err := s.NewIngest()
		if err != nil {
			t.Fatal(err)
		}
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(g.Delete([]byte("a")))
		must(g.Set([]byte("b"), []byte("2")))
		must(g.Set([]byte("d"), []byte("2")))
		if err := g.Set([]byte("c"), []byte("2")); err == nil {
			t.Fatal("a key out of order was taken")
		}
		must(g.Cut())
		must(g.Set([]byte("x"), []byte("2")))
		must(g.Delete([]byte("y")))
		if got := scanAll(t, s, nil, nil); got != "a=1 b=1 c=1 y=1" {
			t.Fatalf("before Apply: %s", got)
		}
		must(g.Apply())
		if got := scanAll(t, s, nil, nil); got != "b=2 c=1 d=2 x=2" {
			t.Fatalf("after Apply: %s", got)
		}
		if got := scanAll(t, snap, nil, nil); got != "a=1 b=1 c=1 y=1" {
			t.Fatalf("a snapshot from before: %s", got)
		}
		if v, err := bt.Get([]byte("b")); err != nil || string(v) != "2" {
			t.Fatalf("batch read b after the ingest: %q, %v", v, err)
		}
		if err := g.Set([]byte("z"), nil); err == nil {
			t.Fatal("a used ingest took a change")
		}

		g, err = s.NewIngest()
		must(err)
		must(g.Set([]byte("e"), []byte("3")))
		must(g.Abort())
		if got := scanAll(t, s, nil, nil); got != "b=2 c=1 d=2 x=2" {
			t.Fatalf("after Abort: %s", got)
		}
	})
}

// Files are cut at ingestFileMax (a writer's memory stays bounded); many
// files apply as one.
func TestIngestManyFiles(t *testing.T) {
	old := ingestFileMax
	ingestFileMax = 1 << 10
	defer func() { ingestFileMax = old }()
	fs := pvfs.NewMem()
	s, err := OpenPebble("db", PebbleConfig{FS: fs, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g, err := s.NewIngest()
	if err != nil {
		t.Fatal(err)
	}
	val := strings.Repeat("v", 100)
	for i := range 200 {
		if err := g.Set(fmt.Appendf(nil, "k%05d", i), []byte(val)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(g.(*pebbleIngest).paths); n < 10 {
		t.Fatalf("%d files for 20 KB at 1 KB a file", n)
	}
	if err := g.Apply(); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := s.Scan(nil, nil, func(k, v []byte) bool { n++; return string(v) == val }); err != nil || n != 200 {
		t.Fatalf("%d keys after the ingest, %v", n, err)
	}
	if left, _ := fs.List("db/" + ingestDir); len(left) != 0 {
		t.Fatalf("staging files left: %v", left)
	}
}

// A crash before Apply leaves staging files: the next open removes them
// and the store holds nothing of them.
func TestIngestLeftoversCleared(t *testing.T) {
	fs := pvfs.NewMem()
	s, err := OpenPebble("db", PebbleConfig{FS: fs, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.NewIngest()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Set([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := g.Cut(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = OpenPebble("db", PebbleConfig{FS: fs, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if left, _ := fs.List("db/" + ingestDir); len(left) != 0 {
		t.Fatalf("staging files left after open: %v", left)
	}
	if _, err := s.Get([]byte("k")); err != ErrNotFound {
		t.Fatalf("a key of an ingest never applied: %v", err)
	}
}
