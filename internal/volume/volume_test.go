package volume

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/cairn-fs/cairn/internal/vfs"
)

func hashOf(s string) [32]byte {
	var h [32]byte
	for i := range h {
		h[i] = s[i%len(s)]
	}
	return h
}

func TestNeedleSize(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want int64
	}{{0, 48}, {1, 56}, {7, 56}, {8, 56}, {9, 64}, {16, 64}, {17, 72}, {4 << 20, 48 + 4<<20}} {
		if got := NeedleSize(tc.n); got != tc.want {
			t.Errorf("NeedleSize(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

func TestNeedleRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags uint8
		data  []byte
	}{
		{"empty", FlagLive, nil},
		{"small", FlagLive, []byte("hello")},
		{"aligned", FlagLive, bytes.Repeat([]byte{7}, 64)},
		{"tombstone", FlagTombstone, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hashOf(tc.name)
			b := AppendNeedle([]byte("prefix"), h, tc.flags, tc.data)
			b = b[len("prefix"):]
			if int64(len(b)) != NeedleSize(len(tc.data)) || len(b)%8 != 0 {
				t.Fatalf("encoded len %d", len(b))
			}
			hd, err := DecodeHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			if hd.Hash != h || hd.Flags != tc.flags || int(hd.Len) != len(tc.data) {
				t.Fatalf("decoded %+v", hd)
			}
			if !CheckCRC(b[:HeaderSize], b[HeaderSize:HeaderSize+len(tc.data)]) {
				t.Fatal("CRC mismatch on fresh needle")
			}
			for i := 0; i < HeaderSize+len(tc.data); i++ {
				c := append([]byte(nil), b...)
				c[i] ^= 0x10
				if _, err := DecodeHeader(c); err == nil && CheckCRC(c[:HeaderSize], c[HeaderSize:HeaderSize+len(tc.data)]) {
					t.Fatalf("flip at byte %d undetected", i)
				}
			}
		})
	}
	// A tombstone with a length is invalid.
	b := AppendNeedle(nil, hashOf("x"), FlagTombstone, []byte("zz"))
	if _, err := DecodeHeader(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("tombstone with data decoded: %v", err)
	}
}

func newVol(t *testing.T, fs vfs.FS) *Volume {
	t.Helper()
	if err := fs.MkdirAll("/v", 0o755); err != nil {
		t.Fatal(err)
	}
	v, err := Create(fs, "/v/1.vol", 1)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestAppendReadReopen(t *testing.T) {
	fs := vfs.NewMem()
	v := newVol(t, fs)
	data := []byte("the quick brown fox")
	off, err := v.Append(hashOf("a"), data)
	if err != nil || off != SuperblockSize {
		t.Fatalf("append = %d, %v", off, err)
	}
	toff, err := v.AppendTombstone(hashOf("a"))
	if err != nil || toff != off+NeedleSize(len(data)) {
		t.Fatalf("tombstone = %d, %v", toff, err)
	}
	hd, got, err := v.ReadNeedle(off, len(data), nil)
	if err != nil || !bytes.Equal(got, data) || hd.Hash != hashOf("a") {
		t.Fatalf("ReadNeedle = %q %v", got, err)
	}
	p := make([]byte, 5)
	if n, err := v.ReadData(off, p, 4); n != 5 || err != nil || string(p) != "quick" {
		t.Fatalf("ReadData = %q %v", p, err)
	}
	if _, _, err := v.ReadNeedle(off, len(data)+1, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("wrong length: %v", err)
	}
	if err := v.Sync(); err != nil {
		t.Fatal(err)
	}
	v.Close()
	fs.Crash()
	v2, err := Open(fs, "/v/1.vol", 1)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	end, err := v2.Scan(0, func(off int64, h Header, d []byte) error { n++; return nil })
	if err != nil || n != 2 || end != v2.Size() {
		t.Fatalf("scan after crash: n=%d end=%d size=%d err=%v", n, end, v2.Size(), err)
	}
	if _, err := Open(fs, "/v/1.vol", 2); !errors.Is(err, ErrSuperblock) {
		t.Fatalf("open with wrong id: %v", err)
	}
}

func TestAppendENOSPCUndone(t *testing.T) {
	fs := vfs.NewMem()
	v := newVol(t, fs)
	if _, err := v.Append(hashOf("a"), []byte("first")); err != nil {
		t.Fatal(err)
	}
	size := v.Size()
	fs.SetFault(func(op vfs.Op, name string) error {
		if op == vfs.OpWrite {
			return vfs.ShortWrite(20, syscall.ENOSPC)
		}
		return nil
	})
	if _, err := v.Append(hashOf("b"), bytes.Repeat([]byte{1}, 100)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append: %v, want ENOSPC", err)
	}
	fs.SetFault(nil)
	if fsz, _ := v.File().Size(); fsz != size || v.Size() != size {
		t.Fatalf("file size %d / %d after failed append, want %d", fsz, v.Size(), size)
	}
	off, err := v.Append(hashOf("c"), []byte("after"))
	if err != nil || off != size {
		t.Fatalf("append after ENOSPC = %d, %v", off, err)
	}
	// If the undo fails too, the volume refuses appends.
	fs.SetFault(func(op vfs.Op, name string) error {
		if op == vfs.OpWrite || op == vfs.OpTruncate {
			return syscall.EIO
		}
		return nil
	})
	if _, err := v.Append(hashOf("d"), []byte("x")); !errors.Is(err, ErrBroken) {
		t.Fatalf("append with failing undo: %v", err)
	}
	fs.SetFault(nil)
	if _, err := v.Append(hashOf("e"), []byte("x")); !errors.Is(err, ErrBroken) {
		t.Fatalf("append on broken volume: %v", err)
	}
}

// TestScanDatadriven drives a volume through appends and damage and checks
// where Scan stops. Regenerate with -rewrite.
func TestScanDatadriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		fs := vfs.NewMem()
		var v *Volume
		reopen := func() {
			v.Close()
			var err error
			if v, err = Open(fs, "/v/1.vol", 1); err != nil {
				t.Fatal(err)
			}
		}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			var sb strings.Builder
			switch d.Cmd {
			case "new":
				v = newVol(t, fs)
				return fmt.Sprintf("size=%d\n", v.Size())
			case "append", "tombstone":
				var h, data string
				d.ScanArgs(t, "h", &h)
				var off int64
				var err error
				if d.Cmd == "append" {
					d.MaybeScanArgs(t, "data", &data)
					off, err = v.Append(hashOf(h), []byte(data))
				} else {
					off, err = v.AppendTombstone(hashOf(h))
				}
				if err != nil {
					return err.Error() + "\n"
				}
				return fmt.Sprintf("off=%d size=%d\n", off, v.Size())
			case "cut": // drop the last n bytes of the file
				var n int64
				d.ScanArgs(t, "n", &n)
				if err := v.File().Truncate(v.Size() - n); err != nil {
					t.Fatal(err)
				}
				reopen()
				return fmt.Sprintf("size=%d\n", v.Size())
			case "tail": // write n raw bytes (zeros, garbage or a copy of a header) at the end
				var n int
				var kind string
				d.ScanArgs(t, "n", &n)
				d.ScanArgs(t, "kind", &kind)
				b := make([]byte, n)
				switch kind {
				case "zeros":
				case "garbage":
					rng := rand.New(rand.NewPCG(uint64(n), 7))
					for i := range b {
						b[i] = byte(rng.Uint32())
					}
				case "header": // a valid-looking header claiming more data than follows
					b = AppendNeedle(nil, hashOf("t"), FlagLive, bytes.Repeat([]byte{9}, 100))[:n]
				default:
					t.Fatalf("unknown kind %q", kind)
				}
				if _, err := v.File().WriteAt(b, v.Size()); err != nil {
					t.Fatal(err)
				}
				reopen()
				return fmt.Sprintf("size=%d\n", v.Size())
			case "flip": // flip one byte at an absolute file offset
				var at int64
				d.ScanArgs(t, "at", &at)
				b := make([]byte, 1)
				v.File().ReadAt(b, at)
				b[0] ^= 0xff
				v.File().WriteAt(b, at)
				return "ok\n"
			case "scan", "recover":
				var from int64
				d.MaybeScanArgs(t, "from", &from)
				end, err := v.Scan(from, func(off int64, h Header, data []byte) error {
					kind := "live"
					if h.Tombstone() {
						kind = "tomb"
					}
					fmt.Fprintf(&sb, "%d %s h=%c len=%d data=%q\n", off, kind, h.Hash[0], h.Len, data)
					return nil
				})
				if err != nil {
					return err.Error() + "\n"
				}
				fmt.Fprintf(&sb, "end=%d size=%d\n", end, v.Size())
				if d.Cmd == "recover" && end < v.Size() {
					if err := v.Truncate(end); err != nil {
						t.Fatal(err)
					}
					fmt.Fprintf(&sb, "truncated to %d\n", v.Size())
				}
				return sb.String()
			}
			t.Fatalf("unknown command %q", d.Cmd)
			return ""
		})
	})
}

// TestScanRandomTruncation appends random needles, cuts the file at every
// kind of random point, and checks that Scan keeps exactly the needles that
// are wholly inside the cut and that appending after recovery works.
func TestScanRandomTruncation(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 1))
	for iter := 0; iter < 200; iter++ {
		fs := vfs.NewMem()
		v := newVol(t, fs)
		var ends, dataEnds []int64
		var datas [][]byte
		for i, n := 0, 1+rng.IntN(10); i < n; i++ {
			d := make([]byte, rng.IntN(300))
			for j := range d {
				d[j] = byte(rng.Uint32())
			}
			if _, err := v.Append(hashOf(fmt.Sprint(i)), d); err != nil {
				t.Fatal(err)
			}
			ends = append(ends, v.Size())
			dataEnds = append(dataEnds, v.Size()-NeedleSize(len(d))+HeaderSize+int64(len(d)))
			datas = append(datas, d)
		}
		cut := SuperblockSize + rng.Int64N(v.Size()-SuperblockSize+1)
		v.File().Truncate(cut)
		if rng.IntN(2) == 0 { // and sometimes a garbage tail after the cut
			g := make([]byte, rng.IntN(100))
			for j := range g {
				g[j] = byte(rng.Uint32())
			}
			v.File().WriteAt(g, cut)
		}
		v.Close()
		v2, err := Open(fs, "/v/1.vol", 1)
		if err != nil {
			t.Fatal(err)
		}
		// A needle survives if its header and data are inside the cut and the
		// file reaches its padded end (garbage may stand in for padding,
		// which the CRC does not cover).
		want := int64(SuperblockSize)
		wantN := 0
		for i, e := range ends {
			if dataEnds[i] > cut || e > v2.Size() {
				break
			}
			want, wantN = e, wantN+1
		}
		var got int
		end, err := v2.Scan(0, func(off int64, h Header, data []byte) error {
			if !bytes.Equal(data, datas[got]) {
				t.Fatalf("iter %d: needle %d data mismatch", iter, got)
			}
			got++
			return nil
		})
		if err != nil || end != want || got != wantN {
			t.Fatalf("iter %d: cut=%d end=%d want %d, needles %d want %d, err %v", iter, cut, end, want, got, wantN, err)
		}
		if err := v2.Truncate(end); err != nil {
			t.Fatal(err)
		}
		if _, err := v2.Append(hashOf("new"), []byte("new")); err != nil {
			t.Fatal(err)
		}
		n := 0
		if end2, _ := v2.Scan(0, func(int64, Header, []byte) error { n++; return nil }); end2 != v2.Size() || n != wantN+1 {
			t.Fatalf("iter %d: after recovery append: end %d size %d n %d", iter, end2, v2.Size(), n)
		}
	}
}
