package volume

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
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
			case "append", "tombstone", "append-image":
				var h, data string
				d.ScanArgs(t, "h", &h)
				var off int64
				var err error
				switch d.Cmd {
				case "append":
					d.MaybeScanArgs(t, "data", &data)
					off, err = v.Append(hashOf(h), []byte(data))
				case "append-image": // a blob whose data is the image of a valid needle
					var inner string
					d.ScanArgs(t, "inner", &inner)
					d.MaybeScanArgs(t, "data", &data)
					off, err = v.Append(hashOf(h), AppendNeedle(nil, hashOf(inner), FlagLive, []byte(data)))
				default:
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
				case "badcrc": // whole needles with a valid magic and header whose CRC does not match
					for i := 0; i+152 <= n; i += 152 {
						nd := AppendNeedle(nil, hashOf("t"), FlagLive, bytes.Repeat([]byte{9}, 100))
						nd[HeaderSize] ^= 1
						copy(b[i:], nd)
					}
				case "magics": // garbage with a needle magic, version 1 and zero flags at every aligned offset
					rng := rand.New(rand.NewPCG(uint64(n), 8))
					for i := range b {
						b[i] = byte(rng.Uint32())
					}
					for i := 0; i+8 <= n; i += 8 {
						copy(b[i:], "CRNN\x01\x00\x00\x00")
					}
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
				fn := func(off int64, h Header, data []byte) error {
					kind := "live"
					if h.Tombstone() {
						kind = "tomb"
					}
					fmt.Fprintf(&sb, "%d %s h=%c len=%d data=%q\n", off, kind, h.Hash[0], h.Len, data)
					return nil
				}
				if d.Cmd == "scan" {
					end, err := v.Scan(from, fn)
					if err != nil {
						return err.Error() + "\n"
					}
					fmt.Fprintf(&sb, "end=%d size=%d\n", end, v.Size())
					return sb.String()
				}
				// recover: what the blob store does at Open.
				rec, err := v.ScanRecover(from, fn, nil)
				if err != nil {
					return err.Error() + "\n"
				}
				fmt.Fprintf(&sb, "end=%d size=%d\n", rec.End, v.Size())
				for _, r := range rec.Corrupt {
					fmt.Fprintf(&sb, "corrupt [%d, %d) skipped\n", r.Start, r.End)
				}
				if rec.GaveUp {
					fmt.Fprintf(&sb, "gave up\n")
				} else if rec.End < v.Size() {
					if err := v.Truncate(rec.End); err != nil {
						t.Fatal(err)
					}
					fmt.Fprintf(&sb, "torn tail truncated to %d\n", v.Size())
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

// TestScanRecoverRandomFlip damages one byte of one needle (header or data)
// in random volumes: ScanRecover must return every other needle and report
// exactly the damaged needle as skipped, or as a torn tail if it was last.
func TestScanRecoverRandomFlip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 3))
	for iter := 0; iter < 300; iter++ {
		fs := vfs.NewMem()
		v := newVol(t, fs)
		var offs []int64
		var datas [][]byte
		for i, n := 0, 2+rng.IntN(10); i < n; i++ {
			d := make([]byte, rng.IntN(300))
			for j := range d {
				d[j] = byte(rng.Uint32())
			}
			off, err := v.Append(hashOf(fmt.Sprint(i)), d)
			if err != nil {
				t.Fatal(err)
			}
			offs, datas = append(offs, off), append(datas, d)
		}
		bad := rng.IntN(len(offs))
		at := offs[bad] + rng.Int64N(HeaderSize+int64(len(datas[bad])))
		b := []byte{0}
		v.File().ReadAt(b, at)
		b[0] ^= byte(1 + rng.IntN(255))
		v.File().WriteAt(b, at)
		var got []int64
		rec, err := v.ScanRecover(0, func(off int64, h Header, data []byte) error {
			i := len(got)
			if i >= bad {
				i++
			}
			if i >= len(offs) || off != offs[i] || !bytes.Equal(data, datas[i]) {
				t.Fatalf("iter %d: unexpected needle at %d (got %v, offs %v, bad %d, flip at %d)", iter, off, got, offs, bad, at)
			}
			got = append(got, off)
			return nil
		}, nil)
		if err != nil || rec.GaveUp {
			t.Fatalf("iter %d: %+v %v", iter, rec, err)
		}
		if len(got) != len(offs)-1 {
			t.Fatalf("iter %d: %d needles, want %d (flip at %d in needle %d)", iter, len(got), len(offs)-1, at, bad)
		}
		if bad == len(offs)-1 {
			if len(rec.Corrupt) != 0 || rec.End != offs[bad] {
				t.Fatalf("iter %d: damaged last needle: %+v, want torn tail at %d", iter, rec, offs[bad])
			}
		} else if want := (Region{offs[bad], offs[bad+1]}); len(rec.Corrupt) != 1 || rec.Corrupt[0] != want || rec.End != v.Size() {
			t.Fatalf("iter %d: %+v, want region %v and end %d", iter, rec, want, v.Size())
		}
	}
}

// TestScanRecoverGivesUp fills the space after a damaged needle with needle
// headers that each claim the rest of the file and fail their CRC, so the
// search would cost quadratic time: it must stop within its budget and
// report GaveUp rather than a torn tail.
func TestScanRecoverGivesUp(t *testing.T) {
	fs := vfs.NewMem()
	v := newVol(t, fs)
	if _, err := v.Append(hashOf("a"), []byte("alpha")); err != nil {
		t.Fatal(err)
	}
	start := v.Size()
	const tail = 4 << 20
	b := make([]byte, tail)
	for i := 0; i < tail; i += HeaderSize {
		n := tail - i - HeaderSize
		if n < 0 {
			break
		}
		hdr := AppendNeedle(nil, hashOf("t"), FlagLive, nil)
		binary.LittleEndian.PutUint32(hdr[40:44], uint32(n)&^7)
		hdr[44] ^= 1 // bad CRC
		copy(b[i:], hdr[:HeaderSize])
	}
	if _, err := v.File().WriteAt(b, start); err != nil {
		t.Fatal(err)
	}
	v.Close()
	v, err := Open(fs, "/v/1.vol", 1)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := v.ScanRecover(0, nil, nil)
	if err != nil || !rec.GaveUp || rec.End != start {
		t.Fatalf("ScanRecover = %+v, %v; want GaveUp at %d", rec, err, start)
	}
}

// TestReadMapped checks ReadMapped against a mapped volume on the real file
// system: bounds, hash match, header checks, and the pread fallback signal.
func TestReadMapped(t *testing.T) {
	fs := vfs.OS()
	v, err := Create(fs, t.TempDir()+"/1.vol", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	h := hashOf("mapped")
	data := []byte("hello, mapped world")
	if _, err := v.ReadMapped(SuperblockSize, &h, nil, 0); !errors.Is(err, ErrNotMapped) {
		t.Fatalf("unmapped volume: %v", err)
	}
	if err := v.Map(1 << 20); err != nil {
		t.Fatal(err)
	}
	if err := v.Map(1 << 20); err == nil {
		t.Fatal("second Map succeeded")
	}
	off, err := v.Append(h, data) // appended after mapping: visible through the map
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 6)
	if match, err := v.ReadMapped(off, &h, p, 7); !match || err != nil || string(p) != "mapped" {
		t.Fatalf("ReadMapped = %v, %v, %q", match, err, p)
	}
	if match, err := v.ReadMapped(off, nil, p[:0], 0); !match || err != nil {
		t.Fatalf("ReadMapped without hash = %v, %v", match, err)
	}
	other := hashOf("other")
	copy(p, "xxxxxx")
	if match, err := v.ReadMapped(off, &other, p, 0); match || err != nil || string(p) != "xxxxxx" {
		t.Fatalf("ReadMapped with another hash = %v, %v, %q", match, err, p)
	}
	// Past the needle's length (but below Size()): the header says no.
	tomb, err := v.AppendTombstone(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.ReadMapped(off, &h, make([]byte, 20), 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read past the needle's length: %v", err)
	}
	// Past Size(), or past the map: not served.
	if _, err := v.ReadMapped(tomb, &other, make([]byte, 8), 0); !errors.Is(err, ErrNotMapped) {
		t.Fatalf("read past Size(): %v", err)
	}
	if _, err := v.ReadMapped(1<<20, &h, nil, 0); !errors.Is(err, ErrNotMapped) {
		t.Fatalf("read past the map: %v", err)
	}
	// Not a needle boundary: bad magic.
	if _, err := v.ReadMapped(off+8, &h, nil, 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read at a non-needle offset: %v", err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if v.Mapped() {
		t.Fatal("still mapped after Close")
	}
	m := vfs.NewMem()
	mv := newVol(t, m)
	if err := mv.Map(1 << 20); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Map on vfs.Mem = %v, want ErrUnsupported", err)
	}
}

// BenchmarkFaultGuard measures what ReadMapped's fault guard costs per call
// (debug.SetPanicOnFault on and back, a deferred recover) against the same
// 15 KiB copy unguarded.
func BenchmarkFaultGuard(b *testing.B) {
	src := make([]byte, 15<<10)
	dst := make([]byte, 15<<10)
	plain := func(n int) { copy(dst[:n], src) }
	guarded := func(n int) (err error) {
		old := debug.SetPanicOnFault(true)
		defer func() {
			debug.SetPanicOnFault(old)
			if r := recover(); r != nil {
				err = fmt.Errorf("fault: %v", r)
			}
		}()
		copy(dst[:n], src)
		return nil
	}
	for _, n := range []int{0, 15 << 10} {
		b.Run(fmt.Sprintf("plain/%d", n), func(b *testing.B) {
			for b.Loop() {
				plain(n)
			}
		})
		b.Run(fmt.Sprintf("guarded/%d", n), func(b *testing.B) {
			for b.Loop() {
				guarded(n)
			}
		})
	}
}

// BenchmarkReadMapped15K is one ReadMapped of 15 KiB (header check and
// copy) from a page-cache-resident volume.
func BenchmarkReadMapped15K(b *testing.B) {
	v, err := Create(vfs.OS(), b.TempDir()+"/1.vol", 1)
	if err != nil {
		b.Fatal(err)
	}
	defer v.Close()
	if err := v.Map(1 << 20); err != nil {
		b.Fatal(err)
	}
	h := hashOf("bench")
	off, err := v.Append(h, make([]byte, 15<<10))
	if err != nil {
		b.Fatal(err)
	}
	p := make([]byte, 15<<10)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.ReadMapped(off, &h, p, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// TestScanHeaders: the header walk reports every needle, tombstones with
// empty data and live needles with nil data, and goes past a needle whose
// data fails its CRC (it never reads it), where Scan stops; it stops at a
// bad header and at a tombstone whose CRC fails.
func TestScanHeaders(t *testing.T) {
	fs := vfs.NewMem()
	v := newVol(t, fs)
	offA, err := v.Append(hashOf("a"), bytes.Repeat([]byte("a"), 1000))
	if err != nil {
		t.Fatal(err)
	}
	offT, err := v.AppendTombstone(hashOf("b"))
	if err != nil {
		t.Fatal(err)
	}
	offC, err := v.Append(hashOf("c"), []byte("ccc"))
	if err != nil {
		t.Fatal(err)
	}
	flip := func(pos int64) {
		var b [1]byte
		if _, err := v.f.ReadAt(b[:], pos); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0x40
		if _, err := v.f.WriteAt(b[:], pos); err != nil {
			t.Fatal(err)
		}
	}
	flip(DataOffset(offA) + 500) // a's data fails its CRC
	type seen struct {
		off       int64
		tomb, nil bool
	}
	walk := func() ([]seen, int64) {
		var got []seen
		end, err := v.ScanHeaders(SuperblockSize, func(off int64, h Header, data []byte) error {
			got = append(got, seen{off, h.Tombstone(), data == nil})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got, end
	}
	got, end := walk()
	want := []seen{{offA, false, true}, {offT, true, false}, {offC, false, true}}
	if fmt.Sprint(got) != fmt.Sprint(want) || end != v.Size() {
		t.Fatalf("ScanHeaders = %v, end %d; want %v, end %d", got, end, want, v.Size())
	}
	if end, _ := v.Scan(SuperblockSize, nil); end != offA {
		t.Fatalf("Scan ends at %d, want %d (a fails its CRC)", end, offA)
	}
	flip(offT + 10) // the tombstone's hash: its CRC fails
	if got, end := walk(); len(got) != 1 || end != offT {
		t.Fatalf("ScanHeaders past a bad tombstone = %v, end %d; want a only, end %d", got, end, offT)
	}
	flip(offT + 10)
	flip(offC) // c's magic
	if got, end := walk(); len(got) != 2 || end != offC {
		t.Fatalf("ScanHeaders past a bad header = %v, end %d; want 2 needles, end %d", got, end, offC)
	}
}
