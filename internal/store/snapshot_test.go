package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"
)

// TestSnapshotView: a snapshot stays exactly as taken while the live tree
// changes (file by file, and its listing), a later snapshot does not
// disturb an earlier one, and deleting the last snapshot of a blob frees
// its space once the GC runs.
func TestSnapshotView(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rng := rand.New(rand.NewSource(3))
	files := map[string][]byte{}
	for i := range 40 {
		p := fmt.Sprintf("site/d%d/f%02d.php", i%4, i)
		files[p] = randBytes(rng, 100+rng.Intn(3000))
		mustPut(t, e.s, p, files[p])
	}
	big := randBytes(rng, 3<<20)
	mustPut(t, e.s, "big.bin", big)
	s1, err := e.s.SnapshotCreate(ctx, "bkt", "s1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.SnapshotCreate(ctx, "bkt", "s1"); !errors.Is(err, ErrExists) {
		t.Fatalf("second s1: %v", err)
	}
	check := func(name string, want map[string][]byte, extra string) {
		t.Helper()
		v, err := e.s.OpenSnapshot(ctx, "bkt", name)
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		for p, data := range want {
			o, err := v.Open(ctx, p)
			if err != nil {
				t.Fatalf("%s: open %s: %v", name, p, err)
			}
			var buf bytes.Buffer
			if _, err := o.WriteRangeTo(&buf, 0, o.Info().Size); err != nil {
				t.Fatal(err)
			}
			o.Close()
			if !bytes.Equal(buf.Bytes(), data) {
				t.Fatalf("%s: %s differs", name, p)
			}
		}
		res, err := v.List(ctx, ListOptions{Prefix: "site/", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for p := range want {
			if len(p) > 5 && p[:5] == "site/" {
				n++
			}
		}
		if len(res.Entries) != n {
			t.Fatalf("%s: lists %d files under site/, want %d", name, len(res.Entries), n)
		}
		if extra != "" {
			if _, err := v.Stat(ctx, extra); !errors.Is(err, ErrNotFound) {
				t.Fatalf("%s: %s, made after it, is in it: %v", name, extra, err)
			}
		}
	}
	want1 := map[string][]byte{"big.bin": big}
	for p, d := range files {
		want1[p] = d
	}
	// The live tree changes: overwrites, deletes, new files.
	for i := range 20 {
		p := fmt.Sprintf("site/d%d/f%02d.php", i%4, i)
		if i%2 == 0 {
			mustPut(t, e.s, p, []byte("hacked"))
		} else if err := e.s.Delete(ctx, "bkt", p, ""); err != nil {
			t.Fatal(err)
		}
	}
	mustPut(t, e.s, "site/new.php", []byte("new"))
	if err := e.s.Delete(ctx, "bkt", "big.bin", ""); err != nil {
		t.Fatal(err)
	}
	check("s1", want1, "site/new.php")
	if _, err := e.s.SnapshotCreate(ctx, "bkt", "s2"); err != nil {
		t.Fatal(err)
	}
	mustPut(t, e.s, "site/d0/f00.php", []byte("hacked twice"))
	check("s1", want1, "site/new.php")
	if got, _ := e.s.SnapshotList(ctx, "bkt"); len(got) != 2 || got[0].Name != "s1" || got[0].ID != s1.ID {
		t.Fatalf("list: %+v", got)
	}
	// The big blob is held by s1 only: GC keeps it, deleting s1 frees it.
	e.clock.Add(time.Hour)
	if _, err := e.s.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readAllSnap(t, e, "s1", "big.bin"); !bytes.Equal(got, big) {
		t.Fatal("the GC reclaimed a blob a snapshot holds")
	}
	live := e.blobs.Stats().LiveBytes
	if err := e.s.SnapshotDelete(ctx, "bkt", "s1"); err != nil {
		t.Fatal(err)
	}
	if err := e.s.SnapshotDelete(ctx, "bkt", "s2"); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(time.Hour)
	if _, err := e.s.GC(ctx); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(time.Hour)
	if _, err := e.s.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if after := e.blobs.Stats().LiveBytes; live-after < 3<<20 {
		t.Fatalf("live bytes %d → %d: deleting the snapshots did not free the big blob", live, after)
	}
	if _, err := e.s.OpenSnapshot(ctx, "bkt", "s1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted snapshot opens: %v", err)
	}
}

func readAllSnap(t *testing.T, e *env, name, path string) []byte {
	t.Helper()
	v, err := e.s.OpenSnapshot(context.Background(), "bkt", name)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	o, err := v.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	var buf bytes.Buffer
	if _, err := o.WriteRangeTo(&buf, 0, o.Info().Size); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestSnapshotRestore: a tree put back from a snapshot as namespace
// changes only: the rewritten and deleted files are as they were, the
// unchanged ones are left alone, a file added since goes with Delete, and
// one file restores beside the live one.
func TestSnapshotRestore(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	files := map[string][]byte{}
	for i := range 30 {
		p := fmt.Sprintf("wp/d%d/f%02d.php", i%3, i)
		files[p] = []byte(fmt.Sprintf("<?php echo %d;", i))
		mustPut(t, e.s, p, files[p])
	}
	mustPut(t, e.s, "other/keep.txt", []byte("outside"))
	if _, err := e.s.SnapshotCreate(ctx, "bkt", "clean"); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		mustPut(t, e.s, fmt.Sprintf("wp/d%d/f%02d.php", i%3, i), []byte("<?php eval($_POST[0]);"))
	}
	for i := 10; i < 15; i++ {
		if err := e.s.Delete(ctx, "bkt", fmt.Sprintf("wp/d%d/f%02d.php", i%3, i), ""); err != nil {
			t.Fatal(err)
		}
	}
	mustPut(t, e.s, "wp/d1/backdoor.php", []byte("<?php system($_GET[0]);"))
	blobsBefore := e.blobs.Stats().Blobs
	st, err := e.s.SnapshotRestore(ctx, "bkt", "clean", RestoreOptions{Path: "wp", Delete: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Restored != 15 || st.Unchanged != 15 || st.Deleted != 1 {
		t.Fatalf("restore: %+v", st)
	}
	for p, data := range files {
		if got := readAll(t, e.s, p); !bytes.Equal(got, data) {
			t.Fatalf("%s after the restore: %q", p, got)
		}
	}
	if _, err := e.s.Stat(ctx, "bkt", "wp/d1/backdoor.php"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("backdoor after a restore with Delete: %v", err)
	}
	if got := string(readAll(t, e.s, "other/keep.txt")); got != "outside" {
		t.Fatalf("a file outside the restored tree: %q", got)
	}
	if after := e.blobs.Stats().Blobs; after != blobsBefore {
		t.Fatalf("blobs %d → %d: a restore copied bytes", blobsBefore, after)
	}
	// One file, beside the live one.
	mustPut(t, e.s, "wp/d0/f00.php", []byte("changed again"))
	if _, err := e.s.SnapshotRestore(ctx, "bkt", "clean", RestoreOptions{Path: "wp/d0/f00.php", To: "wp/d0/f00.clean.php"}); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, e.s, "wp/d0/f00.clean.php"); !bytes.Equal(got, files["wp/d0/f00.php"]) {
		t.Fatalf("restored beside: %q", got)
	}
	if got := string(readAll(t, e.s, "wp/d0/f00.php")); got != "changed again" {
		t.Fatalf("the live file was touched: %q", got)
	}
}

// TestSnapshotSchedule: the leader's pass takes one snapshot a period and
// keeps the newest N of each.
func TestSnapshotSchedule(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.s.SetSnapshotSchedule(ctx, "bkt", SnapshotSchedule{Hourly: 2, Daily: 1}); err != nil {
		t.Fatal(err)
	}
	if sc, err := e.s.GetSnapshotSchedule(ctx, "bkt"); err != nil || sc != (SnapshotSchedule{Hourly: 2, Daily: 1}) {
		t.Fatalf("schedule %+v, %v", sc, err)
	}
	if err := e.s.SetSnapshotSchedule(ctx, "bkt", SnapshotSchedule{Hourly: -1}); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("a negative count: %v", err)
	}
	names := func() []string {
		l, err := e.s.SnapshotList(ctx, "bkt")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range l {
			out = append(out, s.Name)
		}
		return out
	}
	pass := func() {
		t.Helper()
		if err := e.s.runSchedules(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pass()
	if got := names(); len(got) != 2 {
		t.Fatalf("first pass: %v", got)
	}
	e.clock.Add(30 * time.Minute)
	pass()
	if got := names(); len(got) != 2 {
		t.Fatalf("half an hour later: %v", got)
	}
	for range 3 {
		e.clock.Add(time.Hour)
		mustPut(t, e.s, "f.txt", []byte(e.clock.Now().String()))
		pass()
	}
	got := names()
	hourly := 0
	for _, n := range got {
		if strings.HasPrefix(n, "auto-hourly-") {
			hourly++
		}
	}
	if hourly != 2 || len(got) != 3 || got[len(got)-1] != "auto-hourly-"+e.clock.Now().UTC().Format("2006-01-02T15-04-05Z") {
		t.Fatalf("after 3.5 hours: %v", got)
	}
	if err := e.s.SetSnapshotSchedule(ctx, "bkt", SnapshotSchedule{}); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(48 * time.Hour)
	pass()
	if got2 := names(); len(got2) != 3 {
		t.Fatalf("without a schedule the pass changed %v to %v", got, got2)
	}
}
