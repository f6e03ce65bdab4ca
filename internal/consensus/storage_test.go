package consensus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	pvfs "github.com/cockroachdb/pebble/v2/vfs"
	"io"
	"log/slog"
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
)

func TestPayloadRoundTrip(t *testing.T) {
	ids := []uint64{1<<40 | 7, 1<<40 | 5, 1<<40 | 9} // not sorted: channel order
	cmds := []meta.Command{mkdirNamed("a"), createFile("b"), mkdirNamed("c")}
	p, err := encodePayload(3, 1<<40|2, ids, cmds)
	if err != nil {
		t.Fatal(err)
	}
	node, seq, gotIDs, gotCmds, err := decodePayload(p)
	if err != nil || node != 3 || seq != 1<<40|2 || fmt.Sprint(gotIDs) != fmt.Sprint(ids) || len(gotCmds) != 3 || gotCmds[1].Path != "b" {
		t.Fatalf("got %d %d %v %v %v", node, seq, gotIDs, gotCmds, err)
	}
	for _, bad := range [][]byte{nil, {9}, p[:3], p[:len(p)-1]} {
		if _, _, _, _, err := decodePayload(bad); err == nil {
			t.Fatalf("decoded corrupt payload %x", bad)
		}
	}
}

// stateAt builds a small namespace at applied index 5 plus some Raft keys.
func stateAt(t *testing.T) kv.Store {
	db := kv.NewMem()
	b := db.NewBatch()
	if _, err := meta.Apply(b, 5, []meta.Command{bucketCmd, mkdirNamed("x/y"), createFile("f")}); err != nil {
		t.Fatal(err)
	}
	b.Set(sessionKey(2), u64(42))
	b.Set(entryKey(3), []byte("not part of a snapshot"))
	b.Set(keyHardState, []byte{})
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	return db
}

func TestSnapshotStream(t *testing.T) {
	src := stateAt(t)
	var buf bytes.Buffer
	if err := writeSnapshot(&buf, src, 5, 2); err != nil {
		t.Fatal(err)
	}
	stream := buf.Bytes()
	for name, open := range map[string]func() kv.Store{"mem": kv.NewMem, "pebble": func() kv.Store {
		db, err := kv.OpenPebble("db", kv.PebbleConfig{FS: pvfs.NewMem(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}} {
		t.Run(name, func(t *testing.T) {
			// The receiver had other state: it is replaced, its Raft keys
			// are kept.
			dst := open()
			defer dst.Close()
			b := dst.NewBatch()
			meta.Apply(b, 1, []meta.Command{{Op: meta.OpCreateBucket, Bucket: &meta.Bucket{Name: "old"}, TimeNs: 1},
				{Op: meta.OpCreateBucket, Bucket: &meta.Bucket{Name: "x"}, TimeNs: 1}})
			b.Set(keyTrunc, truncValue(0, 0))
			b.Commit(true)
			g, err := dst.NewIngest()
			if err != nil {
				t.Fatal(err)
			}
			if err := stageSnapshotIngest(bytes.NewReader(stream), dst, g, 5, 2); err != nil {
				t.Fatal(err)
			}
			if err := g.Apply(); err != nil {
				t.Fatal(err)
			}
			if _, d1 := dump(src); !bytes.Equal(d1, func() []byte { _, d := dump(dst); return d }()) {
				t.Fatal("installed namespace differs from the source")
			}
			if _, err := dst.Get(keyTrunc); err != nil {
				t.Fatal("receiver's Raft key was touched by the namespace install")
			}
		})
	}
	// Every corruption is caught, and a mismatched message too.
	cases := map[string]func() ([]byte, uint64){
		"truncated":   func() ([]byte, uint64) { return stream[:len(stream)-3], 5 },
		"bit flip":    func() ([]byte, uint64) { c := bytes.Clone(stream); c[40] ^= 1; return c, 5 },
		"trailing":    func() ([]byte, uint64) { return append(bytes.Clone(stream), 0), 5 },
		"wrong index": func() ([]byte, uint64) { return stream, 6 },
	}
	for name, f := range cases {
		s, idx := f()
		db := kv.NewMem()
		g, _ := db.NewIngest()
		if err := stageSnapshotIngest(bytes.NewReader(s), db, g, idx, 2); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestStorageAppendTermEntriesCompact(t *testing.T) {
	db := kv.NewMem()
	s, err := openStorage(db, 200, newSnapshots()) // a tiny cache: reads go to KV too
	if err != nil {
		t.Fatal(err)
	}
	ents := func(lo, hi, term uint64) []*pb.Entry {
		var out []*pb.Entry
		for i := lo; i <= hi; i++ {
			out = append(out, &pb.Entry{Index: new(i), Term: new(term), Data: bytes.Repeat([]byte{byte(i)}, 20)})
		}
		return out
	}
	apply := func(f func(), err error, b kv.Batch) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(true); err != nil {
			t.Fatal(err)
		}
		f()
	}
	b := db.NewBatch()
	f, err := s.stageAppend(b, ents(1, 20, 1))
	apply(f, err, b)
	b = db.NewBatch()
	f, err = s.stageAppend(b, ents(15, 17, 2)) // conflicting overwrite drops 18..20
	apply(f, err, b)
	if last, _ := s.LastIndex(); last != 17 {
		t.Fatalf("last %d", last)
	}
	if _, err := db.Get(entryKey(18)); !errors.Is(err, kv.ErrNotFound) {
		t.Fatal("overwritten tail still stored")
	}
	for i, want := range map[uint64]uint64{3: 1, 14: 1, 15: 2, 17: 2} {
		if got, err := s.Term(i); err != nil || got != want {
			t.Fatalf("term(%d) = %d %v, want %d", i, got, err, want)
		}
	}
	got, err := s.Entries(2, 18, 1<<20)
	if err != nil || len(got) != 16 || got[0].GetIndex() != 2 || got[15].GetTerm() != 2 {
		t.Fatalf("entries: %d %v", len(got), err)
	}
	if got, _ := s.Entries(2, 18, 1); len(got) != 1 {
		t.Fatalf("maxSize: %d entries", len(got))
	}
	s.applied = 16
	b = db.NewBatch()
	f, err = s.stageCompact(b, 10)
	apply(f, err, b)
	if _, err := s.Entries(10, 12, 1<<20); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("compacted read: %v", err)
	}
	if term, err := s.Term(10); err != nil || term != 1 {
		t.Fatalf("term at truncation point: %d %v", term, err)
	}
	// Reopen: same view from the store alone.
	s2, err := openStorage(db, 1<<20, newSnapshots())
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := s2.FirstIndex(); f != 11 || s2.last != 17 {
		t.Fatalf("reopened first %d last %d", f, s2.last)
	}
	got, err = s2.Entries(11, 18, 1<<20)
	if err != nil || len(got) != 7 {
		t.Fatalf("reopened entries %d %v", len(got), err)
	}
}

func TestRaftConfigValidate(t *testing.T) {
	ok := DefaultRaftConfig()
	ok.ID, ok.KV, ok.Transport = 1, kv.NewMem(), nopTransport{}
	if err := ok.withDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*RaftConfig){
		"no id":          func(c *RaftConfig) { c.ID = 0 },
		"no kv":          func(c *RaftConfig) { c.KV = nil },
		"bad ticks":      func(c *RaftConfig) { c.ElectionTicks = 1 },
		"margin":         func(c *RaftConfig) { c.CompactMargin = c.CompactAfter },
		"voters":         func(c *RaftConfig) { c.Voters = 9 },
		"self not voter": func(c *RaftConfig) { c.InitialVoters = []uint64{2, 3} },
	} {
		c := ok
		mod(&c)
		if err := c.withDefaults().Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

type nopTransport struct{}

func (nopTransport) Send([]*pb.Message) {}
func (nopTransport) SendSnapshot(context.Context, uint64, *pb.Message, io.Reader) error {
	return nil
}
