package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func mustOpen(t *testing.T, m FS, name string, flag int) File {
	t.Helper()
	f, err := m.OpenFile(name, flag, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func readAll(t *testing.T, m FS, name string) []byte {
	t.Helper()
	f := mustOpen(t, m, name, os.O_RDONLY)
	defer f.Close()
	n, _ := f.Size()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return b
}

func TestMemCrashKeepsOnlySynced(t *testing.T) {
	m := NewMem()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	// a: created, written, synced, dir synced -> survives with synced bytes.
	a := mustOpen(t, m, "/d/a", os.O_CREATE|os.O_RDWR)
	a.WriteAt([]byte("hello"), 0)
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	a.WriteAt([]byte(" world"), 5) // never synced
	// b: created, synced, but dir entry never synced -> gone.
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	b := mustOpen(t, m, "/d/b", os.O_CREATE|os.O_RDWR)
	b.WriteAt([]byte("x"), 0)
	b.Sync()

	m.Crash()
	if got := readAll(t, m, "/d/a"); string(got) != "hello" {
		t.Fatalf("a after crash = %q, want %q", got, "hello")
	}
	if _, err := m.Stat("/d/b"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("b after crash: %v, want not exist", err)
	}
	if _, err := a.ReadAt(make([]byte, 1), 0); !errors.Is(err, ErrCrashed) {
		t.Fatalf("old handle: %v, want ErrCrashed", err)
	}
}

func TestMemRenameAndRemoveDurability(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d", 0o755)
	f := mustOpen(t, m, "/d/tmp", os.O_CREATE|os.O_RDWR)
	f.WriteAt([]byte("v1"), 0)
	f.Sync()
	f.Close()
	m.SyncDir("/d")
	if err := m.Rename("/d/tmp", "/d/final"); err != nil {
		t.Fatal(err)
	}
	m.Crash() // rename not durable
	if _, err := m.Stat("/d/final"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("final exists after crash before SyncDir: %v", err)
	}
	if err := m.Rename("/d/tmp", "/d/final"); err != nil {
		t.Fatal(err)
	}
	m.SyncDir("/d")
	m.Remove("/d/final")
	m.Crash() // removal not durable
	if got := readAll(t, m, "/d/final"); string(got) != "v1" {
		t.Fatalf("final = %q", got)
	}
	m.Remove("/d/final")
	m.SyncDir("/d")
	m.Crash()
	if names, _ := m.ReadDir("/d"); len(names) != 0 {
		t.Fatalf("ReadDir after durable remove = %v", names)
	}
}

func TestMemCrashTornKeepsSyncedPrefix(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sawPartial := false
	for i := 0; i < 200; i++ {
		m := NewMem()
		m.MkdirAll("/d", 0o755)
		f := mustOpen(t, m, "/d/f", os.O_CREATE|os.O_RDWR)
		f.WriteAt(bytes.Repeat([]byte{1}, 100), 0)
		f.Sync()
		m.SyncDir("/d")
		f.WriteAt(bytes.Repeat([]byte{2}, 100), 100)
		m.CrashTorn(rng)
		got := readAll(t, m, "/d/f")
		if len(got) < 100 || len(got) > 200 {
			t.Fatalf("len after torn crash = %d", len(got))
		}
		if !bytes.Equal(got[:100], bytes.Repeat([]byte{1}, 100)) {
			t.Fatal("synced prefix damaged")
		}
		if len(got) > 100 && len(got) < 200 {
			sawPartial = true
		}
	}
	if !sawPartial {
		t.Fatal("CrashTorn never kept a partial tail")
	}
}

func TestMemFaults(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d", 0o755)
	f := mustOpen(t, m, "/d/f", os.O_CREATE|os.O_RDWR)
	m.SetFault(func(op Op, name string) error {
		switch op {
		case OpSync:
			return syscall.EIO
		case OpWrite:
			return ShortWrite(3, syscall.ENOSPC)
		}
		return nil
	})
	n, err := f.WriteAt([]byte("abcdef"), 0)
	if n != 3 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("short write: n=%d err=%v", n, err)
	}
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync: %v, want EIO", err)
	}
	m.SetFault(nil)
	if sz, _ := f.Size(); sz != 3 {
		t.Fatalf("size = %d, want 3", sz)
	}
	m.SetFree(1234)
	if free, _, _ := m.Statfs("/d"); free != 1234 {
		t.Fatalf("free = %d", free)
	}
}

func TestMemReadAtEOFAndFlags(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d", 0o755)
	if _, err := m.OpenFile("/d/none", os.O_RDONLY, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open missing: %v", err)
	}
	if _, err := m.OpenFile("/nodir/x", os.O_CREATE|os.O_RDWR, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("create in missing dir: %v", err)
	}
	f := mustOpen(t, m, "/d/f", os.O_CREATE|os.O_EXCL|os.O_RDWR)
	if _, err := m.OpenFile("/d/f", os.O_CREATE|os.O_EXCL|os.O_RDWR, 0); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("O_EXCL: %v", err)
	}
	f.WriteAt([]byte("abc"), 0)
	p := make([]byte, 5)
	n, err := f.ReadAt(p, 1)
	if n != 2 || err != io.EOF || string(p[:n]) != "bc" {
		t.Fatalf("ReadAt = %d %v %q", n, err, p[:n])
	}
	r := mustOpen(t, m, "/d/f", os.O_RDONLY)
	if _, err := r.WriteAt([]byte("x"), 0); err == nil {
		t.Fatal("write on read-only handle succeeded")
	}
	f.Close()
	if _, err := f.ReadAt(p, 0); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
}

func TestOSRoundTrip(t *testing.T) {
	dir := t.TempDir()
	o := OS()
	name := filepath.Join(dir, "f")
	f := mustOpen(t, o, name, os.O_CREATE|os.O_RDWR)
	defer f.Close()
	if _, err := f.WriteAt([]byte("hello"), 2); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := o.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if sz, _ := f.Size(); sz != 7 {
		t.Fatalf("size %d", sz)
	}
	if _, ok := f.(OSFile); !ok {
		t.Fatal("OS file does not implement OSFile")
	}
	free, total, err := o.Statfs(dir)
	if err != nil || total == 0 || free > total {
		t.Fatalf("statfs %d %d %v", free, total, err)
	}
	names, err := o.ReadDir(dir)
	if err != nil || len(names) != 1 || names[0] != "f" {
		t.Fatalf("ReadDir %v %v", names, err)
	}
}

// TestMap: the OS file system maps read-only past the end of the file and
// sees later writes through the map; Mem says it cannot map.
func TestMap(t *testing.T) {
	var fs FS = OS()
	name := t.TempDir() + "/f"
	f := mustOpen(t, fs, name, os.O_CREATE|os.O_RDWR)
	defer f.Close()
	if _, err := f.WriteAt([]byte("head"), 0); err != nil {
		t.Fatal(err)
	}
	b, unmap, err := fs.(Mapper).Map(f, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 1<<20 || string(b[:4]) != "head" {
		t.Fatalf("map: len %d, starts %q", len(b), b[:4])
	}
	if _, err := f.WriteAt([]byte("tail"), 9000); err != nil { // a page that was past the end when mapped
		t.Fatal(err)
	}
	if string(b[9000:9004]) != "tail" {
		t.Fatalf("write after mapping not visible: %q", b[9000:9004])
	}
	if err := unmap(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := fs.(Mapper).Map(f, 0); err == nil {
		t.Fatal("Map of length 0 succeeded")
	}
	m := NewMem()
	mf := mustOpen(t, m, "/x", os.O_CREATE|os.O_RDWR)
	if _, _, err := m.Map(mf, 100); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Mem.Map = %v, want ErrUnsupported", err)
	}
}
