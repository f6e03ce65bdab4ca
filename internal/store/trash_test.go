package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestTrashUndo: with a trash, an rm -rf of a tree (through ChangeMany, as
// the mount does it), an overwrite and a delete are undone file by file;
// a restore never overwrites; expiry and emptying free the blobs, which
// the GC then reclaims.
func TestTrashUndo(t *testing.T) {
	e := newEnv(t)
	ctx := WithOrigin(context.Background(), "mount", "AK7")
	b, err := e.s.Bucket(ctx, "bkt")
	if err != nil {
		t.Fatal(err)
	}
	b.TrashSeconds = 3600
	if err := e.s.UpdateBucket(ctx, b); err != nil {
		t.Fatal(err)
	}
	if b, _ := e.s.Bucket(context.Background(), "bkt"); b.TrashSeconds != 3600 {
		t.Fatalf("trash retention %d", b.TrashSeconds)
	}
	files := map[string][]byte{}
	for i := range 30 {
		p := fmt.Sprintf("site/d%d/f%02d.php", i%3, i)
		files[p] = []byte(fmt.Sprintf("<?php echo %d; ?>", i))
		mustPut(t, e.s, p, files[p])
	}
	mustPut(t, e.s, "keep.txt", []byte("v1"))
	e.clock.Add(time.Second)
	mustPut(t, e.s, "keep.txt", []byte("v2 overwritten"))
	e.clock.Add(time.Second)
	mustPut(t, e.s, "keep.txt", []byte("v3"))
	keptPage, err := e.s.TrashList(context.Background(), "bkt", TrashListOptions{Prefix: "keep.txt"})
	kept := keptPage.Entries
	if err != nil || len(kept) != 2 || !kept[0].Replaced || kept[0].Size != 2 {
		t.Fatalf("keep.txt's versions: %+v, %v", kept, err)
	}
	v1At := kept[0].Deleted // as cairn trash list shows it
	// rm -rf site: files first, then the directories, deepest first.
	var cs []Change
	for p := range files {
		cs = append(cs, Change{Kind: ChangeDelete, Path: p})
	}
	for i := range 3 {
		cs = append(cs, Change{Kind: ChangeDelete, Path: fmt.Sprintf("site/d%d", i)})
	}
	for _, err := range e.s.ChangeMany(ctx, "bkt", cs) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := e.s.Delete(ctx, "bkt", "site", ""); err != nil {
		t.Fatal(err)
	}
	page, err := e.s.TrashList(context.Background(), "bkt", TrashListOptions{Prefix: "site/"})
	list := page.Entries
	if err != nil || len(list) != 30 {
		t.Fatalf("trash of site/: %d entries, %v", len(list), err)
	}
	if l := list[0]; l.Frontend != "mount" || l.Key != "AK7" || l.Size == 0 || l.Replaced {
		t.Fatalf("entry: %+v", l)
	}
	if n, by, _ := e.s.TrashUsage(context.Background(), "bkt"); n != 32 || by == 0 {
		t.Fatalf("usage %d entries, %d bytes", n, by)
	}
	restored, err := e.s.TrashRestore(context.Background(), "bkt", "site/", time.Time{}, "")
	if err != nil || len(restored) != 30 {
		t.Fatalf("restore site/: %d, %v", len(restored), err)
	}
	for p, data := range files {
		if got := readAll(t, e.s, p); !bytes.Equal(got, data) {
			t.Fatalf("%s restored as %q", p, got)
		}
	}
	// The overwrite: the old version, at its time, beside the new one.
	if _, err := e.s.TrashRestore(context.Background(), "bkt", "keep.txt", v1At, ""); !errors.Is(err, ErrExists) {
		t.Fatalf("restore over a file: %v", err)
	}
	if _, err := e.s.TrashRestore(context.Background(), "bkt", "keep.txt", v1At, "keep.v1.txt"); err != nil {
		t.Fatal(err)
	}
	if got := string(readAll(t, e.s, "keep.v1.txt")); got != "v1" {
		t.Fatalf("keep.v1.txt: %q", got)
	}
	// Expiry: an hour later the GC's pass (on the leader: a lone node is)
	// purges what the trash still holds, then reaps the blob.
	if err := e.s.Delete(ctx, "bkt", "keep.txt", ""); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(2 * time.Hour)
	if _, err := e.s.GC(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := e.s.TrashUsage(context.Background(), "bkt"); n != 0 {
		t.Fatalf("%d entries after their retention", n)
	}
	if _, err := e.s.TrashRestore(context.Background(), "bkt", "keep.txt", time.Time{}, ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("restore of an expired entry: %v", err)
	}
	// A bucket with a full trash cannot be deleted until it is emptied.
	for p := range files {
		if err := e.s.Delete(ctx, "bkt", p, ""); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := e.s.TrashEmpty(context.Background(), "bkt", time.Time{}); err != nil || n != 30 {
		t.Fatalf("empty: %d, %v", n, err)
	}
}

// TestTrashListPages: a trash listing comes in pages of at most the
// limit, each continuing after the last (also when entries go in between),
// together every entry once, in order; a page's memory is its own, not the
// trash's.
func TestTrashListPages(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	b, _ := e.s.Bucket(ctx, "bkt")
	b.TrashSeconds = 3600
	if err := e.s.UpdateBucket(ctx, b); err != nil {
		t.Fatal(err)
	}
	const n = 5000
	var files []FilePut
	var cs []Change
	for i := range n {
		p := fmt.Sprintf("up/%03d/f%05d.jpg", i/100, i)
		files = append(files, FilePut{Path: p, Data: []byte(p), Opts: PutOptions{Size: int64(len(p))}})
		cs = append(cs, Change{Kind: ChangeDelete, Path: p})
	}
	for _, r := range e.s.PutFiles(ctx, "bkt", files) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	for _, err := range e.s.ChangeMany(ctx, "bkt", cs) {
		if err != nil {
			t.Fatal(err)
		}
	}
	seen, pages, last := 0, 0, ""
	opts := TrashListOptions{Prefix: "up/", Limit: 700}
	for {
		page, err := e.s.TrashList(ctx, "bkt", opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page.Entries) > opts.Limit {
			t.Fatalf("page of %d entries, limit %d", len(page.Entries), opts.Limit)
		}
		for _, en := range page.Entries {
			if en.Path <= last {
				t.Fatalf("entry %s after %s", en.Path, last)
			}
			last = en.Path
			seen++
		}
		if pages == 2 {
			// Entries go between two pages: the listing goes on after the
			// last entry it gave.
			if _, err := e.s.TrashEmpty(ctx, "bkt", time.Time{}); err != nil {
				t.Fatal(err)
			}
			for _, r := range e.s.PutFiles(ctx, "bkt", files[1400:]) {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
			}
			for _, err := range e.s.ChangeMany(ctx, "bkt", cs[1400:]) {
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		if page.Next == "" {
			break
		}
		opts.After = page.Next
	}
	if seen != n || pages != (n+opts.Limit-1)/opts.Limit {
		t.Fatalf("%d entries in %d pages, want %d in %d", seen, pages, n, (n+opts.Limit-1)/opts.Limit)
	}
	if _, err := e.s.TrashList(ctx, "bkt", TrashListOptions{After: "not base64!"}); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("a made-up position: %v", err)
	}
	if p, err := e.s.TrashList(ctx, "bkt", TrashListOptions{Limit: 1 << 30}); err != nil || len(p.Entries) != n-1400 || p.Next != "" {
		t.Fatalf("a limit past the largest page: %d entries, next %q, %v", len(p.Entries), p.Next, err)
	}
}
