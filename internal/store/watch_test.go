package store

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// A Watcher hears of every applied change by path, and of bucket changes
// as "all"; cancel stops it.
func TestWatch(t *testing.T) {
	rep := &fakeReplication{}
	st, _, _ := newReplicatedStore(t, rep)
	var mu sync.Mutex
	var got []string
	alls := 0
	cancel := st.Watch(func(paths []string, all bool) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, paths...)
		if all {
			alls++
		}
	})
	ctx := context.Background()
	if err := st.CreateBucket(ctx, BucketInfo{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Put(ctx, "web", "a/b.txt", bytes.NewReader([]byte("x")), PutOptions{Size: 1}); err != nil {
		t.Fatal(err)
	}
	if err := st.Rename(ctx, "web", "a/b.txt", "c.txt"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if !slices.Contains(got, "web/a/b.txt") || !slices.Contains(got, "web/c.txt") || alls == 0 {
		t.Fatalf("watched %v (%d all), want web/a/b.txt, web/c.txt and a bucket change", got, alls)
	}
	n := len(got)
	mu.Unlock()
	cancel()
	if err := st.Delete(ctx, "web", "c.txt", ""); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		t.Fatalf("a cancelled watcher heard %v", got[n:])
	}
}

// Mkdir and Put record owner and mode; SetAttrs changes what it names and
// keeps the rest.
func TestAttrs(t *testing.T) {
	st, _, _ := newReplicatedStore(t, &fakeReplication{})
	ctx := context.Background()
	if err := st.CreateBucket(ctx, BucketInfo{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Mkdir(ctx, "web", "d", Attrs{Mode: 0o750, UID: 33, GID: 34}); err != nil {
		t.Fatal(err)
	}
	if info, err := st.Stat(ctx, "web", "d"); err != nil || info.Mode != 0o750 || info.UID != 33 || info.GID != 34 {
		t.Fatalf("dir %+v, %v", info, err)
	}
	if _, _, err := st.Put(ctx, "web", "d/f", bytes.NewReader([]byte("x")), PutOptions{Size: 1, Mode: 0o600, UID: 1000, GID: 1001}); err != nil {
		t.Fatal(err)
	}
	mode := uint32(0o644)
	when := time.Unix(1700000000, 5).UTC()
	info, err := st.SetAttrs(ctx, "web", "d/f", SetAttrs{Mode: &mode, ModTime: &when})
	if err != nil || info.Mode != 0o644 || info.UID != 1000 || info.GID != 1001 || !info.ModTime.Equal(when) || info.Size != 1 {
		t.Fatalf("after SetAttrs: %+v, %v", info, err)
	}
	// By inode number, through a hard link whose first name is gone.
	if _, err := st.Link(ctx, "web", "d/f", "g"); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, "web", "d/f", ""); err != nil {
		t.Fatal(err)
	}
	byIno, err := st.StatIno(ctx, "web", "d/f", info.Ino)
	if err != nil || byIno.Size != 1 || byIno.Nlink != 1 || byIno.Mode != 0o644 {
		t.Fatalf("StatIno after the first name went: %+v, %v", byIno, err)
	}
	if o, err := st.OpenIno(ctx, "web", "g", info.Ino); err != nil || o.Info().Size != 1 {
		t.Fatalf("OpenIno: %v", err)
	}
	if _, err := st.SetAttrs(ctx, "web", "nope", SetAttrs{Mode: &mode}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("SetAttrs of a missing file: %v", err)
	}
}

// Symlinks are stored with their target and have no content; xattrs are
// set, kept by other changes and removed.
func TestSymlinkAndXattrs(t *testing.T) {
	st, _, _ := newReplicatedStore(t, &fakeReplication{})
	ctx := context.Background()
	if err := st.CreateBucket(ctx, BucketInfo{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	info, err := st.Symlink(ctx, "web", "d/link", "../target.txt", Attrs{UID: 7})
	if err != nil || info.Symlink != "../target.txt" || info.UID != 7 || info.Size != int64(len("../target.txt")) {
		t.Fatalf("symlink: %+v, %v", info, err)
	}
	if _, err := st.Symlink(ctx, "web", "d/link", "x", Attrs{}); !errors.Is(err, ErrExists) {
		t.Fatalf("symlink over a symlink: %v, want ErrExists", err)
	}
	if _, err := st.Symlink(ctx, "web", "d", "x", Attrs{}); !errors.Is(err, ErrExists) {
		t.Fatalf("symlink over a directory: %v, want ErrExists", err)
	}
	if _, err := st.Open(ctx, "web", "d/link"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open of a symlink: %v, want ErrNotFound", err)
	}
	if _, err := st.SetAttrs(ctx, "web", "d", SetAttrs{Xattrs: map[string][]byte{"user.a": []byte("1"), "user.b": {}}}); err != nil {
		t.Fatal(err)
	}
	mode := uint32(0o700)
	if _, err := st.SetAttrs(ctx, "web", "d", SetAttrs{Mode: &mode, Xattrs: map[string][]byte{"user.b": nil}}); err != nil {
		t.Fatal(err)
	}
	xs, err := st.Xattrs(ctx, "web", "d")
	if err != nil || len(xs) != 1 || string(xs["user.a"]) != "1" {
		t.Fatalf("xattrs: %v, %v; want only user.a=1", xs, err)
	}
}

// TestMknod: a special file is made once (ErrExists after, whatever is
// there), stats with its kind and device number, and has no content.
func TestMknod(t *testing.T) {
	st, _, _ := newReplicatedStore(t, &fakeReplication{})
	ctx := context.Background()
	if err := st.CreateBucket(ctx, BucketInfo{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	info, err := st.Mknod(ctx, "web", "run/fifo", SpecialFIFO, 99, Attrs{Mode: 0o620, UID: 7, Explicit: true})
	if err != nil || info.Special != SpecialFIFO || info.Rdev != 0 || info.Mode != 0o620 || info.UID != 7 || info.IsDir || info.Size != 0 {
		t.Fatalf("mkfifo: %+v, %v", info, err)
	}
	if _, err := st.Mknod(ctx, "web", "run/fifo", SpecialSocket, 0, Attrs{}); !errors.Is(err, ErrExists) {
		t.Fatalf("mknod over a FIFO: %v, want ErrExists", err)
	}
	if _, err := st.Mknod(ctx, "web", "run", SpecialFIFO, 0, Attrs{}); !errors.Is(err, ErrExists) {
		t.Fatalf("mknod over a directory: %v, want ErrExists", err)
	}
	if _, err := st.Mknod(ctx, "web", "run/x", 0o100000, 0, Attrs{}); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("mknod of a regular file kind: %v, want ErrInvalidName", err)
	}
	if _, err := st.Mknod(ctx, "web", "run/null", SpecialChar, 0x0103, Attrs{Mode: 0o666, Explicit: true}); err != nil {
		t.Fatal(err)
	}
	got, err := st.Stat(ctx, "web", "run/null")
	if err != nil || got.Special != SpecialChar || got.Rdev != 0x0103 || got.Mode != 0o666 {
		t.Fatalf("stat of a device: %+v, %v", got, err)
	}
	if _, err := st.Open(ctx, "web", "run/null"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open of a device: %v, want ErrNotFound", err)
	}
	if _, err := st.OpenIno(ctx, "web", "run/fifo", info.Ino); !errors.Is(err, ErrNotFound) {
		t.Fatalf("OpenIno of a FIFO: %v, want ErrNotFound", err)
	}
	res, err := st.List(ctx, "web", ListOptions{Prefix: "run/"})
	if err != nil || len(res.Entries) != 2 || res.Entries[0].Special == 0 || res.Entries[1].Special == 0 {
		t.Fatalf("listing: %+v, %v", res.Entries, err)
	}
}

// A change made through one name of a hard-linked file is seen through
// its other names, not hidden by the path cache: new content, a new
// mode, and the link count falling when a name goes.
func TestHardLinkNamesStayCoherent(t *testing.T) {
	st, _, _ := newReplicatedStore(t, &fakeReplication{})
	ctx := context.Background()
	if err := st.CreateBucket(ctx, BucketInfo{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	put := func(p, data string) {
		t.Helper()
		if _, _, err := st.Put(ctx, "web", p, bytes.NewReader([]byte(data)), PutOptions{Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
	}
	put("a", "first")
	if err := st.Mkdir(ctx, "web", "d", Attrs{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Link(ctx, "web", "a", "d/b"); err != nil {
		t.Fatal(err)
	}
	read := func(p string) (string, ObjectInfo) {
		t.Helper()
		o, err := st.Open(ctx, "web", p)
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		buf := make([]byte, o.Info().Size)
		if _, err := o.ReadAt(buf, 0); err != nil {
			t.Fatal(err)
		}
		return string(buf), o.Info()
	}
	if got, info := read("d/b"); got != "first" || info.Nlink != 2 { // now cached under d/b
		t.Fatalf("through the link: %q, nlink %d", got, info.Nlink)
	}
	put("a", "second")
	if got, _ := read("d/b"); got != "second" {
		t.Fatalf("through the link after a rewrite through the other name: %q, want second", got)
	}
	mode := uint32(0o600)
	if _, err := st.SetAttrs(ctx, "web", "a", SetAttrs{Mode: &mode}); err != nil {
		t.Fatal(err)
	}
	if info, err := st.Stat(ctx, "web", "d/b"); err != nil || info.Mode != 0o600 {
		t.Fatalf("mode through the link: %+v, %v", info, err)
	}
	if err := st.Delete(ctx, "web", "a", ""); err != nil {
		t.Fatal(err)
	}
	if info, err := st.Stat(ctx, "web", "d/b"); err != nil || info.Nlink != 1 {
		t.Fatalf("after the other name went: %+v, %v; want nlink 1", info, err)
	}
}

// Mode 0 is a mode: SetAttrs stores it, and an explicit Put keeps it.
func TestModeZero(t *testing.T) {
	st, _, _ := newReplicatedStore(t, &fakeReplication{})
	ctx := context.Background()
	if err := st.CreateBucket(ctx, BucketInfo{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Put(ctx, "web", "f", bytes.NewReader([]byte("x")), PutOptions{Size: 1}); err != nil {
		t.Fatal(err)
	}
	zero, uid := uint32(0), uint32(0)
	when := time.Now()
	if info, err := st.SetAttrs(ctx, "web", "f", SetAttrs{Mode: &zero, UID: &uid, GID: &uid, ModTime: &when}); err != nil || info.Mode != 0 {
		t.Fatalf("SetAttrs mode 0: %+v, %v", info, err)
	}
	if info, err := st.Stat(ctx, "web", "f"); err != nil || info.Mode != 0 {
		t.Fatalf("Stat after mode 0: %#o, %v", info.Mode, err)
	}
	if info, _, err := st.Put(ctx, "web", "g", bytes.NewReader([]byte("x")), PutOptions{Size: 1, Explicit: true}); err != nil || info.Mode != 0 {
		t.Fatalf("explicit Put of mode 0: %#o, %v", info.Mode, err)
	}
}
