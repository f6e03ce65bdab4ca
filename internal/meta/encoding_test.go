package meta

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/cairn-fs/cairn/internal/cas"
)

func randInode(rng *rand.Rand) *Inode {
	n := &Inode{
		Ino: Ino(rng.Uint64()), Type: FileType(rng.IntN(4)), Mode: rng.Uint32(), UID: rng.Uint32(),
		GID: rng.Uint32(), Nlink: rng.Uint32(), Size: rng.Int64() - math.MaxInt64/2,
		MtimeNs: -rng.Int64(), CtimeNs: rng.Int64(), ContentType: "text/html; charset=utf-8",
		ETag: "d41d8cd98f00b204e9800998ecf8427e-3", SHA256: "ab", Target: "../x",
	}
	for i := rng.IntN(4); i > 0; i-- {
		var h cas.Hash
		for j := range h {
			h[j] = byte(rng.Uint32())
		}
		n.Extents = append(n.Extents, Extent{Hash: h, Offset: rng.Int64(), Length: rng.Int64N(cas.MaxSize)})
	}
	if rng.IntN(2) == 0 {
		n.Xattrs = map[string][]byte{"user.z": {1, 2}, "user.a": {}, "system.posix_acl_access": []byte("acl")}
	}
	if rng.IntN(3) == 0 { // a special file; a device keeps its number
		n.Type = FileType(4 + rng.IntN(4))
		if n.Type.Device() {
			n.Rdev = rng.Uint32()
		}
	}
	return n
}

func TestInodeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 500; i++ {
		n := randInode(rng)
		p := EncodeInode(n)
		// Encoding must not depend on map iteration order.
		for j := 0; j < 3; j++ {
			if q := EncodeInode(n); !bytes.Equal(p, q) {
				t.Fatalf("EncodeInode not deterministic")
			}
		}
		got, err := DecodeInode(n.Ino, p)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(normalize(got), normalize(n)) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, n)
		}
		// Every truncation fails cleanly.
		for cut := 0; cut < len(p); cut++ {
			if _, err := DecodeInode(1, p[:cut]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("truncated at %d/%d: err %v", cut, len(p), err)
			}
		}
		if _, err := DecodeInode(1, append(p, 0)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("trailing byte accepted: %v", err)
		}
	}
	if _, err := DecodeInode(1, []byte{9}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("unknown version accepted: %v", err)
	}
}

func normalize(n *Inode) *Inode {
	c := *n
	if len(c.Xattrs) == 0 {
		c.Xattrs = nil
	}
	if len(c.Extents) == 0 {
		c.Extents = nil
	}
	return &c
}

func randCommands(rng *rand.Rand) []Command {
	var cmds []Command
	for i := rng.IntN(5); i > 0; i-- {
		c := Command{Op: Op(1 + rng.IntN(int(opLast))), BucketName: "bkt", Path: "a/b", DstPath: "c",
			TimeNs: rng.Int64(), IfMatch: "e", IfNoneMatchAny: rng.IntN(2) == 0, StartIndex: rng.Uint64(),
			ReapBefore: -rng.Int64()}
		if rng.IntN(2) == 0 {
			c.Bucket = &Bucket{Name: "bkt", Ino: 5, Public: true, CacheControl: "no-cache", CreatedNs: 9,
				Replicas: int32(rng.IntN(5)) - 1, WriteQuorum: int32(rng.IntN(3)), Strict: rng.IntN(2) == 0}
		}
		if rng.IntN(2) == 0 {
			c.Node = &Node{ID: rng.Uint64(), Name: "n1", URL: "http://127.0.0.1:1", ClusterURL: "http://x",
				Zone: "z", Weight: rng.Float64() * 4, Witness: rng.IntN(2) == 0, State: NodeState(1 + rng.IntN(2)), JoinedNs: rng.Int64(),
				GossipAddr: "127.0.0.1:8180"}
		}
		if rng.IntN(2) == 0 {
			c.File = randInode(rng)
		}
		for j := rng.IntN(3); j > 0; j-- {
			c.Reap = append(c.Reap, cas.Sum([]byte{byte(j)}))
		}
		for j := rng.IntN(3); j > 0; j-- {
			c.Under = append(c.Under, cas.Sum([]byte{byte(j), 1}))
		}
		for j := rng.IntN(3); j > 0; j-- {
			c.Replicated = append(c.Replicated, cas.Sum([]byte{byte(j), 2}))
		}
		cmds = append(cmds, c)
	}
	return cmds
}

func TestCommandsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 9))
	for i := 0; i < 300; i++ {
		cmds := randCommands(rng)
		p, err := EncodeCommands(cmds)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeCommands(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(cmds) {
			t.Fatalf("decoded %d commands, want %d", len(got), len(cmds))
		}
		for j := range cmds {
			w := cmds[j]
			if w.File != nil {
				w.File = normalize(w.File)
			}
			if !reflect.DeepEqual(got[j], w) {
				t.Fatalf("command %d:\n got %+v\nwant %+v", j, got[j], w)
			}
		}
		for cut := 0; cut < len(p); cut++ {
			if _, err := DecodeCommands(p[:cut]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("truncated payload at %d accepted: %v", cut, err)
			}
		}
	}
	if _, err := EncodeCommands([]Command{{Op: 99}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown op encoded: %v", err)
	}
}

// FuzzDecodeInode: the decoder never panics, and whatever it accepts
// re-encodes to a value that decodes to the same inode.
func FuzzDecodeInode(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 3))
	for i := 0; i < 8; i++ {
		f.Add(EncodeInode(randInode(rng)))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		n, err := DecodeInode(1, p)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		q := EncodeInode(n)
		m, err := DecodeInode(1, q)
		if err != nil {
			t.Fatalf("re-encoded inode does not decode: %v", err)
		}
		if !reflect.DeepEqual(normalize(m), normalize(n)) {
			t.Fatalf("re-decode differs:\n%+v\n%+v", m, n)
		}
		if !bytes.Equal(EncodeInode(m), q) {
			t.Fatal("encoding not canonical after one round")
		}
	})
}

// FuzzDecodeCommands: the log payload decoder never panics and accepted
// payloads survive a re-encode.
func FuzzDecodeCommands(f *testing.F) {
	rng := rand.New(rand.NewPCG(4, 4))
	for i := 0; i < 8; i++ {
		p, _ := EncodeCommands(randCommands(rng))
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		cmds, err := DecodeCommands(p)
		if err != nil {
			return
		}
		q, err := EncodeCommands(cmds)
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeCommands(q)
		if err != nil {
			t.Fatal(err)
		}
		q2, _ := EncodeCommands(again)
		if !bytes.Equal(q, q2) {
			t.Fatal("encoding not canonical after one round")
		}
	})
}
