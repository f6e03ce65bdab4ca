package kv

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
)

// ingestDir is the directory, inside a Pebble store's directory, that
// holds the sstables of ingests in progress (emptied at open: a crash
// before Apply leaves files nothing refers to).
const ingestDir = "ingest-staging"

// ingestFileMax is the size at which an ingest's sstable is cut: it bounds
// the memory of one writer (its index and filter) whatever the total.
var ingestFileMax int64 = 128 << 20

var ingestSeq atomic.Uint64

// NewIngest implements Store: the changes become sstables in
// DIR/ingest-staging, ingested by Apply (pebble.DB.Ingest: one version
// edit, atomic and synced; each file gets a sequence number above every
// write before it, so its deletes hide older values and open snapshots
// keep theirs).
func (s *pebbleStore) NewIngest() (Ingest, error) {
	dir := s.fs.PathJoin(s.dir, ingestDir)
	if err := s.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("kv: ingest: %w", err)
	}
	return &pebbleIngest{s: s, dir: dir, id: ingestSeq.Add(1)}, nil
}

type pebbleIngest struct {
	s      *pebbleStore
	dir    string
	id     uint64
	w      *sstable.Writer
	last   []byte // the current file's last key
	paths  []string
	staged int64
	inFile int64 // bytes written into the current file
	done   bool
}

func (g *pebbleIngest) writer() (*sstable.Writer, error) {
	if g.done {
		return nil, fmt.Errorf("kv: ingest used after Apply or Abort")
	}
	if g.w != nil {
		return g.w, nil
	}
	p := g.s.fs.PathJoin(g.dir, fmt.Sprintf("%d-%d.sst", g.id, len(g.paths)))
	f, err := g.s.fs.Create(p, "")
	if err != nil {
		return nil, fmt.Errorf("kv: ingest: %w", err)
	}
	g.paths = append(g.paths, p)
	g.w = sstable.NewWriter(objstorageprovider.NewFileWritable(f), g.s.opts.MakeWriterOptions(0, g.s.db.TableFormat()))
	g.last = g.last[:0]
	return g.w, nil
}

func (g *pebbleIngest) check(key []byte) error {
	if len(g.last) > 0 && bytes.Compare(key, g.last) <= 0 {
		return fmt.Errorf("kv: ingest: key %q after %q: out of order", key, g.last)
	}
	g.last = append(g.last[:0], key...)
	return nil
}

func (g *pebbleIngest) Set(key, value []byte) error {
	w, err := g.writer()
	if err != nil {
		return err
	}
	if err := g.check(key); err != nil {
		return err
	}
	if err := w.Set(key, value); err != nil {
		return fmt.Errorf("kv: ingest: %w", err)
	}
	g.staged += int64(len(key) + len(value))
	g.inFile += int64(len(key) + len(value))
	return g.maybeCut()
}

func (g *pebbleIngest) Delete(key []byte) error {
	w, err := g.writer()
	if err != nil {
		return err
	}
	if err := g.check(key); err != nil {
		return err
	}
	if err := w.Delete(key); err != nil {
		return fmt.Errorf("kv: ingest: %w", err)
	}
	g.staged += int64(len(key))
	g.inFile += int64(len(key))
	return g.maybeCut()
}

func (g *pebbleIngest) maybeCut() error {
	if g.inFile < ingestFileMax {
		return nil
	}
	// The next file starts after this one's last key: they do not overlap.
	last := append([]byte(nil), g.last...)
	if err := g.Cut(); err != nil {
		return err
	}
	g.last = last
	return nil
}

// Cut implements Ingest.
func (g *pebbleIngest) Cut() error {
	if g.w == nil {
		return nil
	}
	err := g.w.Close() // writes the footer, syncs and closes the file
	g.w, g.inFile = nil, 0
	g.last = g.last[:0]
	if err != nil {
		return fmt.Errorf("kv: ingest: %w", err)
	}
	return nil
}

func (g *pebbleIngest) Staged() int64 { return g.staged }

// Apply implements Ingest.
func (g *pebbleIngest) Apply() error {
	if err := g.Cut(); err != nil {
		g.Abort()
		return err
	}
	g.done = true
	defer g.remove()
	if len(g.paths) == 0 {
		return nil
	}
	// Like a commit: batches drop the values they cached (pebbleBatch.Get).
	g.s.started.Add(1)
	defer g.s.finished.Add(1)
	if err := g.s.db.Ingest(context.Background(), g.paths); err != nil {
		return fmt.Errorf("kv: ingest %d files: %w", len(g.paths), err)
	}
	return nil
}

// Abort implements Ingest.
func (g *pebbleIngest) Abort() error {
	if g.w != nil {
		g.w.Close()
		g.w = nil
	}
	g.done = true
	g.remove()
	return nil
}

func (g *pebbleIngest) remove() {
	for _, p := range g.paths {
		g.s.fs.Remove(p) // ingested files were linked or copied into the store
	}
	g.paths = nil
}

// clearIngests removes what ingests in progress left behind (a crash).
func clearIngests(s *pebbleStore) {
	dir := s.fs.PathJoin(s.dir, ingestDir)
	names, err := s.fs.List(dir)
	if err != nil {
		return
	}
	for _, n := range names {
		s.fs.Remove(s.fs.PathJoin(dir, n))
	}
}

// memIngest stages the changes of an ingest into a memStore in memory
// (tests; the in-memory store holds everything in memory anyway).
type memIngest struct {
	s    *memStore
	sets [][2][]byte // value nil: delete
	last []byte
	n    int64
	done bool
}

// NewIngest implements Store.
func (s *memStore) NewIngest() (Ingest, error) { return &memIngest{s: s}, nil }

func (g *memIngest) add(key, value []byte) error {
	if g.done {
		return fmt.Errorf("kv: ingest used after Apply or Abort")
	}
	if g.last != nil && bytes.Compare(key, g.last) <= 0 {
		return fmt.Errorf("kv: ingest: key %q after %q: out of order", key, g.last)
	}
	g.last = bytes.Clone(key)
	g.sets = append(g.sets, [2][]byte{bytes.Clone(key), value})
	g.n += int64(len(key) + len(value))
	return nil
}

func (g *memIngest) Set(key, value []byte) error {
	return g.add(key, append([]byte{}, value...))
}
func (g *memIngest) Delete(key []byte) error { return g.add(key, nil) }
func (g *memIngest) Cut() error              { g.last = nil; return nil }
func (g *memIngest) Staged() int64           { return g.n }
func (g *memIngest) Abort() error            { g.done, g.sets = true, nil; return nil }

func (g *memIngest) Apply() error {
	if g.done {
		return fmt.Errorf("kv: ingest used after Apply or Abort")
	}
	g.done = true
	b := g.s.NewBatch()
	defer b.Close()
	for _, kv := range g.sets {
		var err error
		if kv[1] == nil {
			err = b.Delete(kv[0])
		} else {
			err = b.Set(kv[0], kv[1])
		}
		if err != nil {
			return err
		}
	}
	return b.Commit(true)
}
