package meta

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/kv"
	pvfs "github.com/cockroachdb/pebble/v2/vfs"
)

// gen produces random commands over a small universe of names and blobs,
// so that collisions (replace, rename over, non-empty dirs, shared blobs)
// are frequent.
type gen struct {
	rng    *rand.Rand
	hashes []cas.Hash
}

func newGen(seed uint64) *gen {
	g := &gen{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b9))}
	for i := 0; i < 8; i++ {
		g.hashes = append(g.hashes, cas.Sum([]byte{byte(i)}))
	}
	return g
}

func (g *gen) path() string {
	names := []string{"a", "b", "c.txt", "d"}
	n := 1 + g.rng.IntN(3)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = names[g.rng.IntN(len(names))]
	}
	return strings.Join(parts, "/")
}

func (g *gen) bucket() string { return []string{"bk1", "bk2"}[g.rng.IntN(2)] }

// next returns a command for log entry index, looking at r (the state
// before it) only to pick plausible garbage to reap.
func (g *gen) next(r *Reader, index uint64) Command {
	now := int64(index) * 1000
	c := Command{BucketName: g.bucket(), Path: g.path(), TimeNs: now, StartIndex: index - 1 - uint64(g.rng.IntN(3))}
	switch p := g.rng.IntN(100); {
	case p < 40:
		f := &Inode{ETag: fmt.Sprint(g.rng.IntN(3))}
		for i := g.rng.IntN(4); i > 0; i-- {
			l := int64(1 + g.rng.IntN(100))
			f.Extents = append(f.Extents, Extent{Hash: g.hashes[g.rng.IntN(len(g.hashes))], Offset: f.Size, Length: l})
			f.Size += l
		}
		c.Op, c.File = OpPutFile, f
		if g.rng.IntN(10) == 0 {
			c.IfMatch = fmt.Sprint(g.rng.IntN(3))
		}
		c.IfNoneMatchAny = g.rng.IntN(10) == 0
	case p < 50:
		c.Op = OpMkdir
	case p < 65:
		c.Op = OpDelete
	case p < 82:
		c.Op, c.DstPath = OpRename, g.path()
	case p < 92:
		c.Op, c.ReapBefore = OpReap, now-int64(g.rng.IntN(8000))
		gs, err := r.Garbage(now, 0)
		if err != nil {
			panic(err)
		}
		for _, e := range gs {
			if g.rng.IntN(3) > 0 {
				c.Reap = append(c.Reap, e.Hash)
			}
		}
		c.Reap = append(c.Reap, g.hashes[g.rng.IntN(len(g.hashes))])
	case p < 93:
		// A node's orphan sweep: any known blob, referenced or not.
		c.Op = OpReapOrphans
		for range 1 + g.rng.IntN(3) {
			c.Reap = append(c.Reap, g.hashes[g.rng.IntN(len(g.hashes))])
		}
	case p < 95:
		c.Op, c.File = OpSetAttr, &Inode{Mode: uint32(g.rng.IntN(0o777)), Xattrs: map[string][]byte{"user.k": {byte(index)}}}
	case p < 97:
		c.Op = OpDeleteBucket
	default:
		c.Op, c.Bucket = OpCreateBucket, &Bucket{Name: c.BucketName, Public: g.rng.IntN(2) == 0}
	}
	return c
}

func dumpRaw(t testing.TB, r kv.Reader) []byte {
	var buf bytes.Buffer
	if err := r.Scan(nil, nil, func(k, v []byte) bool {
		fmt.Fprintf(&buf, "%x=%x\n", k, v)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestDeterminism applies the same random log to three stores: Mem with
// one commit per entry, Mem and Pebble with entries grouped into batches
// of random sizes. Every store must end byte-identical, with identical
// results.
func TestDeterminism(t *testing.T) {
	for seed := uint64(1); seed <= soakSeeds(3); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			g := newGen(seed)
			grouping := rand.New(rand.NewPCG(seed, 77))
			a := kv.NewMem()
			b := kv.NewMem()
			pc, err := kv.OpenPebble("db", kv.PebbleConfig{FS: pvfs.NewMem(), Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close()
			setup := []Command{
				{Op: OpCreateBucket, Bucket: &Bucket{Name: "bk1"}, TimeNs: 1},
				{Op: OpCreateBucket, Bucket: &Bucket{Name: "bk2"}, TimeNs: 1},
			}
			type group struct {
				batch kv.Batch
				left  int
			}
			others := []kv.Store{b, pc}
			groups := make([]group, len(others))
			var resA []string
			resB := make([][]string, len(others))
			for index := uint64(1); index <= 1500; index++ {
				cmds := setup
				if index > 1 {
					cmds = []Command{g.next(NewReader(a), index)}
					if grouping.IntN(4) == 0 { // sometimes several commands in one entry
						cmds = append(cmds, g.next(NewReader(a), index))
					}
				}
				ba := a.NewBatch()
				res, err := Apply(ba, index, cmds)
				if err != nil {
					t.Fatal(err)
				}
				if err := ba.Commit(false); err != nil {
					t.Fatal(err)
				}
				resA = append(resA, fmtErrs(res))
				for i, s := range others {
					gr := &groups[i]
					if gr.batch == nil {
						gr.batch, gr.left = s.NewBatch(), 1+grouping.IntN(10)
					}
					res, err := Apply(gr.batch, index, cmds)
					if err != nil {
						t.Fatal(err)
					}
					resB[i] = append(resB[i], fmtErrs(res))
					if gr.left--; gr.left == 0 || index == 1500 {
						if err := gr.batch.Commit(false); err != nil {
							t.Fatal(err)
						}
						gr.batch = nil
					}
				}
			}
			want := dumpRaw(t, a)
			for i, s := range others {
				if got := dumpRaw(t, s); !bytes.Equal(got, want) {
					t.Fatalf("store %d differs from the reference (%d vs %d bytes of dump)", i, len(got), len(want))
				}
				if strings.Join(resB[i], "\n") != strings.Join(resA, "\n") {
					t.Fatalf("store %d: results differ", i)
				}
			}
			checkInvariants(t, a)
			t.Logf("%d bytes of state", len(want))
		})
	}
}

func fmtErrs(res []Result) string {
	var s []string
	for _, r := range res {
		s = append(s, fmt.Sprint(r.Err, r.Created, len(r.Freed), r.Changed, r.ChangedAll))
	}
	return strings.Join(s, ";")
}

// TestRefcountInvariants checks, after every entry of random runs, that
// the stored refcounts, garbage queue, link counts and counters agree with
// what the inodes and dentries imply.
func TestRefcountInvariants(t *testing.T) {
	for seed := uint64(10); seed < 10+soakSeeds(4); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			g := newGen(seed)
			s := kv.NewMem()
			okByOp := map[Op]int{}
			for index := uint64(1); index <= 600; index++ {
				var cmds []Command
				if index == 1 {
					cmds = []Command{{Op: OpCreateBucket, Bucket: &Bucket{Name: "bk1"}}, {Op: OpCreateBucket, Bucket: &Bucket{Name: "bk2"}}}
				} else {
					cmds = []Command{g.next(NewReader(s), index)}
				}
				b := s.NewBatch()
				res, err := Apply(b, index, cmds)
				if err != nil {
					t.Fatal(err)
				}
				if err := b.Commit(false); err != nil {
					t.Fatal(err)
				}
				for i, r := range res {
					if r.Err == nil {
						okByOp[cmds[i].Op]++
					}
				}
				checkInvariants(t, s)
				if t.Failed() {
					t.Fatalf("after entry %d: %+v", index, cmds)
				}
			}
			// The run must have exercised the interesting paths.
			for _, op := range []Op{OpPutFile, OpDelete, OpRename, OpReap, OpReapOrphans, OpMkdir} {
				if okByOp[op] == 0 {
					t.Errorf("op %d never succeeded", op)
				}
			}
			t.Logf("successful ops: %v", okByOp)
		})
	}
}

func checkInvariants(t *testing.T, r kv.Reader) {
	t.Helper()
	inodes := map[Ino]*Inode{}
	type dent struct {
		parent Ino
		name   string
		ino    Ino
		typ    FileType
	}
	var dents []dent
	refs := map[cas.Hash]uint64{}
	garbage := map[cas.Hash]int64{}
	garbageH := map[cas.Hash]int64{}
	reaped := map[cas.Hash]uint64{}
	reapedI := map[cas.Hash]uint64{}
	buckets := map[string]Ino{}
	var h cas.Hash
	err := r.Scan(nil, nil, func(k, v []byte) bool {
		switch k[0] {
		case pInode:
			n, err := DecodeInode(Ino(binary.BigEndian.Uint64(k[1:])), v)
			if err != nil {
				t.Fatal(err)
			}
			inodes[n.Ino] = n
		case pDentry:
			ino, typ, err := decodeDentry(v)
			if err != nil {
				t.Fatal(err)
			}
			dents = append(dents, dent{Ino(binary.BigEndian.Uint64(k[1:])), string(k[9:]), ino, typ})
		case pRef:
			copy(h[:], k[1:])
			refs[h] = binary.BigEndian.Uint64(v)
		case pGarbage:
			copy(h[:], k[9:])
			if _, dup := garbage[h]; dup {
				t.Errorf("blob %s queued twice", h)
			}
			garbage[h] = unsortableTime(binary.BigEndian.Uint64(k[1:]))
		case pGarbageH:
			copy(h[:], k[1:])
			garbageH[h] = unsortableTime(binary.BigEndian.Uint64(v))
		case pReaped:
			copy(h[:], k[1:])
			reaped[h] = binary.BigEndian.Uint64(v)
		case pReapedI:
			copy(h[:], k[9:])
			reapedI[h] = binary.BigEndian.Uint64(k[1:])
		case pBucket:
			b, err := decodeBucket(v)
			if err != nil {
				t.Fatal(err)
			}
			buckets[b.Name] = b.Ino
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	// Refcounts equal the extents referencing each blob.
	want := map[cas.Hash]uint64{}
	var files, dirs, nbytes int64
	for _, n := range inodes {
		if n.Type == TypeDir {
			if n.Ino != RootIno {
				dirs++
			}
			continue
		}
		files++
		nbytes += n.Size
		for _, x := range n.Extents {
			want[x.Hash]++
		}
	}
	for h, c := range want {
		if refs[h] != c {
			t.Errorf("blob %s: refcount %d, %d extents reference it", h, refs[h], c)
		}
	}
	for h, c := range refs {
		if c != want[h] {
			t.Errorf("blob %s: refcount %d, %d extents reference it", h, c, want[h])
		}
		if _, q := garbage[h]; (c == 0) != q {
			t.Errorf("blob %s: refcount %d but queued=%t", h, c, q)
		}
	}
	for h, tm := range garbage {
		if c, ok := refs[h]; !ok || c != 0 {
			t.Errorf("queued blob %s has refcount %d (present %t)", h, c, ok)
		}
		if garbageH[h] != tm {
			t.Errorf("queued blob %s: reverse key says %d, queue says %d", h, garbageH[h], tm)
		}
	}
	if len(garbageH) != len(garbage) {
		t.Errorf("%d reverse garbage keys for %d queued blobs", len(garbageH), len(garbage))
	}
	for h, i := range reaped {
		if reapedI[h] != i {
			t.Errorf("reaped marker %s: index key %d, marker %d", h, reapedI[h], i)
		}
	}
	if len(reaped) != len(reapedI) {
		t.Errorf("%d reaped markers, %d index keys", len(reaped), len(reapedI))
	}
	// Link counts and tree shape.
	links := map[Ino]int{}
	subdirs := map[Ino]int{}
	for _, d := range dents {
		n, ok := inodes[d.ino]
		if !ok {
			t.Errorf("dentry %d/%q -> missing inode %d", d.parent, d.name, d.ino)
			continue
		}
		if n.Type != d.typ {
			t.Errorf("dentry %d/%q type %d, inode type %d", d.parent, d.name, d.typ, n.Type)
		}
		if (d.typ == TypeDir) != strings.HasSuffix(d.name, "/") {
			t.Errorf("dentry %d/%q: dir suffix does not match type %d", d.parent, d.name, d.typ)
		}
		if p, ok := inodes[d.parent]; !ok || p.Type != TypeDir {
			t.Errorf("dentry %d/%q: parent is not a directory", d.parent, d.name)
		}
		links[d.ino]++
		if d.typ == TypeDir {
			subdirs[d.parent]++
		}
		if d.parent == RootIno && buckets[strings.TrimSuffix(d.name, "/")] != d.ino {
			t.Errorf("root entry %q has no matching bucket", d.name)
		}
	}
	for ino, n := range inodes {
		switch {
		case ino == RootIno:
		case n.Type == TypeDir && links[ino] != 1:
			t.Errorf("dir %d has %d entries", ino, links[ino])
		case n.Type != TypeDir && int(n.Nlink) != links[ino]:
			t.Errorf("file %d: nlink %d, %d entries", ino, n.Nlink, links[ino])
		}
		if n.Type == TypeDir && int(n.Nlink) != 2+subdirs[ino] {
			t.Errorf("dir %d: nlink %d, %d subdirs", ino, n.Nlink, subdirs[ino])
		}
	}
	if len(buckets) != subdirs[RootIno] {
		t.Errorf("%d buckets, %d root entries", len(buckets), subdirs[RootIno])
	}
	f, d, nb, err := NewReader(r).Counts()
	if err != nil {
		t.Fatal(err)
	}
	if f != files || d != dirs || nb != nbytes {
		t.Errorf("counts %d/%d/%d, actual %d/%d/%d", f, d, nb, files, dirs, nbytes)
	}
}

// soakSeeds is n, or 25 times n under `make soak` (CAIRN_SOAK set). A
// failing seed is in the subtest's name; rerun it with -run.
func soakSeeds(n uint64) uint64 {
	if os.Getenv("CAIRN_SOAK") != "" {
		return 25 * n
	}
	return n
}
