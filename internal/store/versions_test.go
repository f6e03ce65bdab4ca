package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// walkAll returns the versions under prefix as "path:kind:content" items
// (kind L latest file, V noncurrent, M marker, m latest marker) and
// their IDs, reading content through OpenVersion.
func walkAll(t *testing.T, s *Local, prefix string, after VersionCursor) (items, ids []string) {
	t.Helper()
	var vs []Version
	if err := s.WalkVersions(context.Background(), "bkt", prefix, after, func(v Version) bool {
		vs = append(vs, v)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		items = append(items, describe(t, s, v))
		ids = append(ids, v.ID)
	}
	return items, ids
}

func describe(t *testing.T, s *Local, v Version) string {
	t.Helper()
	if v.DeleteMarker {
		k := "M"
		if v.Latest {
			k = "m"
		}
		if _, err := s.OpenVersion(context.Background(), "bkt", v.Path, v.ID); !errors.Is(err, ErrDeleteMarker) {
			t.Fatalf("open of a marker: %v", err)
		}
		return v.Path + ":" + k
	}
	k := "V"
	if v.Latest {
		k = "L"
	}
	o, err := s.OpenVersion(context.Background(), "bkt", v.Path, v.ID)
	if err != nil {
		t.Fatalf("open version %s of %s: %v", v.ID, v.Path, err)
	}
	b, _ := io.ReadAll(io.NewSectionReader(o, 0, o.Info().Size))
	o.Close()
	return v.Path + ":" + k + ":" + string(b)
}

// TestVersionsStore: a versioned bucket's versions, their stable IDs,
// reads and deletes by ID, markers, the walk's resumption at every
// position, DropTrash, and that expiry never touches versions.
func TestVersionsStore(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.s
	b, _ := s.Bucket(ctx, "bkt")
	b.TrashSeconds = VersioningSeconds
	if err := s.UpdateBucket(ctx, b); err != nil {
		t.Fatal(err)
	}
	if b, _ := s.Bucket(ctx, "bkt"); !Versioned(b) {
		t.Fatalf("not versioned: %+v", b)
	}
	put := func(p, body string) string {
		t.Helper()
		e.clock.Add(time.Millisecond)
		info := mustPut(t, s, p, []byte(body))
		return VersionID(info.ModTime, info.ETag)
	}
	id1, id2, id3 := put("k", "one"), put("k", "two"), put("k", "three")
	items, ids := walkAll(t, s, "", VersionCursor{})
	if fmt.Sprint(items) != "[k:L:three k:V:two k:V:one]" || fmt.Sprint(ids) != fmt.Sprint([]string{id3, id2, id1}) {
		t.Fatalf("versions %v %v (want IDs %s %s %s)", items, ids, id3, id2, id1)
	}
	// A delete is a marker; deleting the marker undeletes, same ID.
	if err := s.Delete(ctx, "bkt", "k", ""); err != nil {
		t.Fatal(err)
	}
	items, ids = walkAll(t, s, "k", VersionCursor{})
	if fmt.Sprint(items) != "[k:m k:V:three k:V:two k:V:one]" || ids[1] != id3 {
		t.Fatalf("after a delete: %v", items)
	}
	if v, ok, err := s.DeleteVersion(ctx, "bkt", "k", ids[0]); err != nil || !ok || !v.DeleteMarker {
		t.Fatalf("delete of the marker: %+v %v %v", v, ok, err)
	}
	if got := string(readAll(t, s, "k")); got != "three" {
		t.Fatalf("undeleted content %q", got)
	}
	if info, _ := s.Stat(ctx, "bkt", "k"); VersionID(info.ModTime, info.ETag) != id3 {
		t.Fatal("the undeleted file has another ID")
	}
	// Deleting the live version brings the previous one back.
	if _, ok, err := s.DeleteVersion(ctx, "bkt", "k", id3); err != nil || !ok {
		t.Fatalf("delete of the live version: %v %v", ok, err)
	}
	if got := string(readAll(t, s, "k")); got != "two" {
		t.Fatalf("after deleting the live version: %q", got)
	}
	if _, ok, err := s.DeleteVersion(ctx, "bkt", "k", id3); err != nil || ok {
		t.Fatalf("a second delete: %v %v", ok, err)
	}
	if _, err := s.OpenVersion(ctx, "bkt", "k", id3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("open of a deleted version: %v", err)
	}
	for _, bad := range []string{"null", "", strings.Repeat("z", idLen), id1[:idLen-1] + "1"} {
		if _, err := s.OpenVersion(ctx, "bkt", "k", bad); !errors.Is(err, ErrInvalidVersion) {
			t.Fatalf("open of ID %q: %v", bad, err)
		}
	}

	// Paging: several paths, a trash-only one, a shared ID (same content
	// at the same mtime), a marker in the middle; resuming after every
	// item gives the same walk.
	put("a/x", "ax1")
	put("a/x", "ax2")
	if err := s.Delete(ctx, "bkt", "a/x", ""); err != nil {
		t.Fatal(err)
	}
	put("a/x", "ax3")
	put("gone", "g1")
	if err := s.Delete(ctx, "bkt", "gone", ""); err != nil {
		t.Fatal(err)
	}
	put("same", "s")
	mustPut(t, s, "same", []byte("s")) // same mtime, same content
	mustPut(t, s, "same", []byte("t"))
	put("z", "z1")
	all, allIDs := walkAll(t, s, "", VersionCursor{})
	want := "[a/x:L:ax3 a/x:M a/x:V:ax2 a/x:V:ax1 gone:m gone:V:g1 k:L:two k:V:one same:L:t same:V:s same:V:s z:L:z1]"
	if fmt.Sprint(all) != want {
		t.Fatalf("walk:\n%v\nwant\n%s", all, want)
	}
	for i := range all {
		got, _ := walkAll(t, s, "", VersionCursor{Path: strings.SplitN(all[i], ":", 2)[0], ID: allIDs[i]})
		rest := all[i+1:]
		if all[i] == "same:V:s" {
			rest = all[11:] // a shared ID resumes after its oldest version
		}
		if fmt.Sprint(got) != fmt.Sprint(rest) {
			t.Fatalf("resume after %d (%s): %v, want %v", i, all[i], got, rest)
		}
	}
	if got, _ := walkAll(t, s, "", VersionCursor{Path: "gone"}); fmt.Sprint(got) != fmt.Sprint(all[6:]) {
		t.Fatalf("resume after a path: %v", got)
	}
	if got, _ := walkAll(t, s, "a/", VersionCursor{}); fmt.Sprint(got) != fmt.Sprint(all[:4]) {
		t.Fatalf("prefix a/: %v", got)
	}
	// A resumption at a marker that went since goes on below it.
	if _, ok, err := s.DeleteVersion(ctx, "bkt", "a/x", allIDs[1]); err != nil || !ok {
		t.Fatalf("delete of a marker under a file: %v %v", ok, err)
	}
	if got, _ := walkAll(t, s, "", VersionCursor{Path: "a/x", ID: allIDs[1]}); fmt.Sprint(got) != fmt.Sprint(all[2:]) {
		t.Fatalf("resume at a gone marker: %v", got)
	}
	// Expiry leaves a versioned bucket alone.
	e.clock.Add(1000 * 24 * time.Hour)
	if err := s.expireTrash(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := s.TrashUsage(ctx, "bkt"); n == 0 {
		t.Fatal("expiry dropped versions")
	}
	// DropTrash drops the entries under a prefix only.
	n, err := s.DropTrash(ctx, "bkt", "a/")
	if err != nil || n != 2 {
		t.Fatalf("drop a/: %d %v", n, err)
	}
	if got, _ := walkAll(t, s, "a/", VersionCursor{}); fmt.Sprint(got) != "[a/x:L:ax3]" {
		t.Fatalf("after DropTrash: %v", got)
	}
	if got, _ := walkAll(t, s, "gone", VersionCursor{}); len(got) != 2 {
		t.Fatalf("DropTrash went beyond its prefix: %v", got)
	}
}
