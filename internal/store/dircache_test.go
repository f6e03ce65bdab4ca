package store

import (
	"context"
	"testing"
	"time"
)

// A directory's cached description follows the changes of the names in
// it: a Stat by path after a mkdir, a put, a rename or an rmdir in it
// shows its new link count and times (issue 32: the mount's lookups and
// its root's getattr go by path).
func TestStatDirAfterChangeInIt(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	stat := func(p string) ObjectInfo {
		t.Helper()
		info, err := e.s.Stat(ctx, "bkt", p)
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	for _, dir := range []string{"", "d", "d/e"} {
		if dir != "" {
			if err := e.s.Mkdir(ctx, "bkt", dir, Attrs{}); err != nil {
				t.Fatal(err)
			}
		}
		sub := func(name string) string {
			if dir == "" {
				return name
			}
			return dir + "/" + name
		}
		for _, c := range []struct {
			name  string
			do    func() error
			nlink int
		}{
			{"mkdir", func() error { return e.s.Mkdir(ctx, "bkt", sub("s"), Attrs{}) }, +1},
			{"put", func() error { mustPut(t, e.s, sub("f"), []byte("x")); return nil }, 0},
			{"rename", func() error { return e.s.Rename(ctx, "bkt", sub("s"), sub("t")) }, 0},
			{"delete", func() error { return e.s.Delete(ctx, "bkt", sub("f"), "") }, 0},
			{"rmdir", func() error { return e.s.Delete(ctx, "bkt", sub("t"), "") }, -1},
		} {
			before := stat(dir) // cached
			e.clock.Add(time.Second)
			if err := c.do(); err != nil {
				t.Fatalf("%s in %q: %v", c.name, dir, err)
			}
			after := stat(dir)
			if int(after.Nlink) != int(before.Nlink)+c.nlink || !after.ModTime.After(before.ModTime) || !after.ChangeTime.After(before.ChangeTime) {
				t.Errorf("%q after a %s in it: nlink %d, mtime %v, ctime %v; was %d, %v, %v (want the link count %+d, the times moved)",
					dir, c.name, after.Nlink, after.ModTime, after.ChangeTime, before.Nlink, before.ModTime, before.ChangeTime, c.nlink)
			}
		}
	}
}
