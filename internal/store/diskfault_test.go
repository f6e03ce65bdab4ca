package store

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/consensus"
	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/vfs"
)

// faultNode is one single-node store whose blob disk is a vfs.Mem that
// the test makes fail, and that can be restarted over the same disks.
type faultNode struct {
	t     *testing.T
	mem   *vfs.Mem
	db    kv.Store
	blobs *blob.Store
	log   *consensus.Local
	s     *Local
}

func newFaultNode(t *testing.T) *faultNode {
	n := &faultNode{t: t, mem: vfs.NewMem(), db: kv.NewMem()}
	n.open()
	t.Cleanup(func() { n.close(); n.db.Close() })
	if err := n.s.CreateBucket(context.Background(), BucketInfo{Name: "bkt"}); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *faultNode) open() {
	n.t.Helper()
	var err error
	n.blobs, err = blob.Open(blob.Config{Dir: "/blobs", FS: n.mem, MinFreeBytes: 1, MaxVolumeSize: 1 << 20})
	if err != nil {
		n.t.Fatal(err)
	}
	var st *Local
	n.log, err = consensus.NewLocal(consensus.LocalConfig{KV: n.db, OnApply: func(i uint64, c []meta.Command, r []meta.Result) {
		st.Applied(i, c, r)
	}})
	if err != nil {
		n.t.Fatal(err)
	}
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	st, err = New(Config{Blobs: n.blobs, KV: n.db, Log: n.log, GCGrace: time.Minute, Now: clk.Now})
	if err != nil {
		n.t.Fatal(err)
	}
	n.s = st
}

func (n *faultNode) close() {
	if n.s == nil {
		return
	}
	n.s.Close()
	n.log.Close()
	n.blobs.Close()
	n.s = nil
}

// restart kills the process (the blob disk keeps what was synced, with
// torn tails when torn) and opens the store again over the same disks.
func (n *faultNode) restart(torn *rand.Rand) {
	n.t.Helper()
	n.close()
	if torn != nil {
		n.mem.CrashTorn(torn)
	} else {
		n.mem.Crash()
	}
	n.open()
}

func (n *faultNode) put(path string, data []byte) error {
	_, _, err := n.s.Put(context.Background(), "bkt", path, bytes.NewReader(data), PutOptions{Size: int64(len(data))})
	return err
}

// read returns path's bytes, or an error.
func (n *faultNode) read(path string) ([]byte, error) {
	obj, err := n.s.Open(context.Background(), "bkt", path)
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	return io.ReadAll(io.NewSectionReader(obj, 0, obj.Info().Size))
}

// bytesOf returns n bytes drawn from rng.
func bytesOf(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// mustHold fails unless every acknowledged file reads back whole.
func (n *faultNode) mustHold(acked map[string][]byte, when string) {
	n.t.Helper()
	for p, want := range acked {
		got, err := n.read(p)
		if err != nil || !bytes.Equal(got, want) {
			n.t.Fatalf("%s: acknowledged %s: %d bytes, %v", when, p, len(got), err)
		}
	}
}

// Disk faults injected through the vfs seam under a single-node store, as
// Pebble's errorfs does: EIO on read and on write, ENOSPC (whole and
// after part of a write), a failed fsync, a write torn at a crash. No
// acknowledged write may be lost; a failed write or fsync makes the store
// read-only (until a restart); ENOSPC gives the writer ErrNoSpace and
// leaves the namespace unchanged.
func TestDiskFaults(t *testing.T) {
	eio := func(op vfs.Op) vfs.FaultFunc {
		return func(o vfs.Op, name string) error {
			if o == op && strings.HasSuffix(name, ".vol") {
				return syscall.EIO
			}
			return nil
		}
	}
	for _, c := range []struct {
		name     string
		fault    vfs.FaultFunc
		wantPut  error // the put under the fault
		readOnly bool  // the store stays read-only until a restart
		readErr  bool  // reads of existing files fail while the fault lasts
	}{
		{name: "read EIO", fault: eio(vfs.OpRead), readErr: true},
		{name: "write EIO", fault: eio(vfs.OpWrite), wantPut: ErrReadOnly, readOnly: true},
		{name: "ENOSPC", fault: func(o vfs.Op, name string) error {
			if o == vfs.OpWrite {
				return syscall.ENOSPC
			}
			return nil
		}, wantPut: ErrNoSpace},
		{name: "ENOSPC mid-write", fault: func(o vfs.Op, name string) error {
			if o == vfs.OpWrite {
				return vfs.ShortWrite(100, syscall.ENOSPC)
			}
			return nil
		}, wantPut: ErrNoSpace},
		{name: "fsync EIO", fault: eio(vfs.OpSync), wantPut: ErrReadOnly, readOnly: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := newFaultNode(t)
			rng := rand.New(rand.NewPCG(1, 2))
			acked := map[string][]byte{}
			for i := range 20 {
				data := bytesOf(rng, 100+rng.IntN(20<<10))
				p := "f" + string(rune('a'+i))
				if err := n.put(p, data); err != nil {
					t.Fatal(err)
				}
				acked[p] = data
			}
			big := bytesOf(rng, 300<<10) // read in two preads: header, then data
			if err := n.put("big", big); err != nil {
				t.Fatal(err)
			}
			acked["big"] = big
			// Read once: the needles are verified, so later reads take the
			// short path (a header read, then the data).
			n.mustHold(acked, "before the fault")
			old := acked["fa"]
			n.mem.SetFault(c.fault)
			if c.readErr {
				for _, p := range []string{"fb", "big"} {
					if _, err := n.read(p); err == nil || errors.Is(err, ErrNotFound) {
						t.Fatalf("read of %s on a failing disk: %v, want an I/O error", p, err)
					}
				}
				// A read far into the blob: a header pread, then the data.
				obj, err := n.s.Open(context.Background(), "bkt", "big")
				if err != nil {
					t.Fatal(err)
				}
				_, err = obj.ReadAt(make([]byte, 100<<10), 150<<10)
				obj.Close()
				if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorrupt) {
					t.Fatalf("read at 150 KiB on a failing disk: %v, want an I/O error", err)
				}
			}
			fresh := bytesOf(rng, 5000)
			err := n.put("new", fresh)
			errOver := n.put("fa", fresh) // a replacement under the fault
			switch {
			case c.wantPut == nil && (err != nil || errOver != nil):
				t.Fatalf("put with %s: %v, %v, want success", c.name, err, errOver)
			case c.wantPut != nil && (!errors.Is(err, c.wantPut) || !errors.Is(errOver, c.wantPut)):
				t.Fatalf("put with %s: %v, %v, want %v", c.name, err, errOver, c.wantPut)
			case c.wantPut != nil:
				// The namespace is unchanged: no new file, the old content.
				if _, err := n.s.Stat(context.Background(), "bkt", "new"); !errors.Is(err, ErrNotFound) {
					t.Fatalf("a put refused with %v left a file: %v", c.wantPut, err)
				}
			default:
				acked["new"], acked["fa"] = fresh, fresh
			}
			if c.wantPut != nil && !strings.Contains(err.Error(), map[bool]string{true: "read-only", false: "space"}[c.readOnly]) {
				t.Fatalf("the writer's error does not say why: %v", err)
			}
			n.mem.SetFault(nil)
			n.mustHold(acked, "after the fault")
			if c.wantPut != nil {
				if got, _ := n.read("fa"); !bytes.Equal(got, old) {
					t.Fatal("a refused replacement changed the file")
				}
			}
			// Read-only is never undone in place: only a restart clears it.
			err = n.put("after", fresh)
			if c.readOnly != errors.Is(err, ErrReadOnly) || (!c.readOnly && err != nil) {
				t.Fatalf("put after the fault: %v (read-only expected: %v)", err, c.readOnly)
			}
			if err == nil {
				acked["after"] = fresh
			}
			n.restart(nil)
			n.mustHold(acked, "after a restart")
			if err := n.put("again", fresh); err != nil {
				t.Fatalf("put after the restart: %v", err)
			}
			acked["again"] = fresh
			n.mustHold(acked, "after the restart's put")
		})
	}
}

// A crash tears the volume's unsynced tail: every acknowledged file reads
// back after recovery, over many crashes with puts in flight.
func TestDiskTornWrites(t *testing.T) {
	n := newFaultNode(t)
	rng := rand.New(rand.NewPCG(7, 7))
	acked := map[string][]byte{}
	for round := range 12 {
		// A put whose fsync never happens: appended, then the crash.
		n.mem.SetFault(func(o vfs.Op, name string) error {
			if o == vfs.OpSync && strings.HasSuffix(name, ".vol") {
				return syscall.EIO
			}
			return nil
		})
		if err := n.put("torn", bytesOf(rng, 1000+rng.IntN(30<<10))); err == nil {
			t.Fatal("a put whose fsync failed was acknowledged")
		}
		n.mem.SetFault(nil)
		n.restart(rng)
		n.mustHold(acked, "after a torn crash")
		for i := range 5 {
			data := bytesOf(rng, rng.IntN(40<<10))
			p := string(rune('a'+round)) + string(rune('a'+i))
			if err := n.put(p, data); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			acked[p] = data
		}
	}
	n.restart(rng)
	n.mustHold(acked, "at the end")
}
