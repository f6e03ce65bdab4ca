package backup

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestCheckPath(t *testing.T) {
	for p, ok := range map[string]bool{
		"a": true, "a/b.txt": true, "日本語/ü.txt": true, ".hidden": true, "a/.cairn-backup": true,
		"": false, "/a": false, "a/": false, "a//b": false, "./a": false, "a/../b": false, "..": false,
		"a\x00b": false, ".cairn-backup": false, ".cairn-backup/manifest.json": false,
	} {
		if err := CheckPath(p); (err == nil) != ok {
			t.Errorf("CheckPath(%q) = %v", p, err)
		}
	}
}

func TestManifestRoundTrip(t *testing.T) {
	m := &Manifest{Bucket: "web", Snapshot: "s1", Files: map[string]Entry{
		"a.txt":   {SHA256: strings.Repeat("a", 64), Size: 3, Mode: 0o644, Mtime: time.Unix(1700000000, 123456789).UTC()},
		"d/b.txt": {SHA256: strings.Repeat("a", 64), Size: 3, Mode: 0o600},
		"d/c.txt": {SHA256: strings.Repeat("b", 64), Size: 5, ContentType: "text/plain"},
	}}
	data, err := EncodeManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	if got.FileCount != 3 || got.Bytes != 11 || got.Hashes != 2 || !reflect.DeepEqual(got.Files, m.Files) {
		t.Fatalf("round trip: %+v", got)
	}
	for name, bad := range map[string]string{
		"not JSON":      "{",
		"future format": `{"format":2,"files":{}}`,
		"escaping path": `{"format":1,"files":{"../x":{"sha256":"` + strings.Repeat("a", 64) + `","size":1}}}`,
		"bad digest":    `{"format":1,"files":{"x":{"sha256":"zz","size":1}}}`,
	} {
		if _, err := DecodeManifest([]byte(bad)); !errors.Is(err, ErrBadMeta) {
			t.Errorf("%s: %v", name, err)
		}
	}
	j, err := EncodeJournal(&Journal{Bucket: "web", Paths: []string{"b", "a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	jr, err := DecodeJournal(j)
	if err != nil || !reflect.DeepEqual(jr.Paths, []string{"a", "b"}) {
		t.Fatalf("journal: %+v %v", jr, err)
	}
}

func TestMakePlan(t *testing.T) {
	h := func(c string) string { return strings.Repeat(c, 64) }
	t0 := time.Unix(1700000000, 0).UTC()
	e := func(c string, size int64) Entry { return Entry{SHA256: h(c), Size: size, Mode: 0o644, Mtime: t0} }
	type want struct{ copy, check, same, touch, del, foreign []string }
	cases := []struct {
		name    string
		snap    map[string]Entry
		old     map[string]Entry // nil: no manifest
		pending []string
		inv     map[string]Found
		want    want
	}{
		{
			name: "first backup into an empty destination",
			snap: map[string]Entry{"a": e("a", 1), "d/b": e("b", 2)},
			inv:  map[string]Found{},
			want: want{copy: []string{"a", "d/b"}},
		},
		{
			name: "unchanged, changed, new, gone, and a file someone else put there",
			snap: map[string]Entry{"same": e("a", 1), "changed": e("c", 2), "new": e("n", 3)},
			old:  map[string]Entry{"same": e("a", 1), "changed": e("b", 2), "gone": e("g", 4)},
			inv:  map[string]Found{"same": {Size: 1}, "changed": {Size: 2}, "gone": {Size: 4}, "mine": {Size: 9}},
			want: want{copy: []string{"changed", "new"}, same: []string{"same"}, del: []string{"gone"}, foreign: []string{"mine"}},
		},
		{
			name: "the manifest says held but the destination lost it or its size changed",
			snap: map[string]Entry{"lost": e("a", 1), "truncated": e("b", 5)},
			old:  map[string]Entry{"lost": e("a", 1), "truncated": e("b", 5)},
			inv:  map[string]Found{"truncated": {Size: 2}},
			want: want{copy: []string{"lost", "truncated"}},
		},
		{
			name:    "paths of an unfinished run are checked, or deleted when gone",
			snap:    map[string]Entry{"p": e("a", 1), "q": e("b", 2), "r": e("c", 3)},
			old:     map[string]Entry{"p": e("a", 1)},
			pending: []string{"p", "q", "x"},
			inv:     map[string]Found{"p": {Size: 1}, "q": {Size: 2}, "r": {Size: 7}, "x": {Size: 1}},
			want:    want{copy: []string{"r"}, check: []string{"p", "q"}, del: []string{"x"}},
		},
		{
			name: "a destination that lists digests decides by them",
			snap: map[string]Entry{"a": e("a", 1), "b": e("b", 1), "c": e("c", 1)},
			old:  map[string]Entry{"a": e("a", 1), "b": e("b", 1)},
			inv:  map[string]Found{"a": {Size: 1, SHA256: h("a")}, "b": {Size: 1, SHA256: h("x")}, "c": {Size: 1, SHA256: h("c")}},
			want: want{copy: []string{"b"}, same: []string{"a", "c"}},
		},
		{
			name: "mode or mtime changed, content the same",
			snap: map[string]Entry{"m": {SHA256: h("a"), Size: 1, Mode: 0o600, Mtime: t0}, "t": {SHA256: h("b"), Size: 1, Mode: 0o644, Mtime: t0.Add(time.Second)}},
			old:  map[string]Entry{"m": e("a", 1), "t": e("b", 1)},
			inv:  map[string]Found{"m": {Size: 1}, "t": {Size: 1}},
			want: want{same: []string{"m", "t"}, touch: []string{"m", "t"}},
		},
		{
			name: "no digest in the listing: copied",
			snap: map[string]Entry{"u": {Size: 1}},
			old:  map[string]Entry{"u": e("a", 1)},
			inv:  map[string]Found{"u": {Size: 1}},
			want: want{copy: []string{"u"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var old *Manifest
			if tc.old != nil {
				old = &Manifest{Files: tc.old}
			}
			pending := map[string]bool{}
			for _, p := range tc.pending {
				pending[p] = true
			}
			pl := MakePlan(tc.snap, old, pending, tc.inv)
			paths := func(ts []Task) []string {
				var out []string
				for _, t := range ts {
					out = append(out, t.Path)
				}
				return out
			}
			got := want{paths(pl.Copy), paths(pl.Check), pl.Same, pl.Touch, pl.Delete, pl.Foreign}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("plan:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestLocalSourcesAndPruneDirs(t *testing.T) {
	h := func(c string) string { return strings.Repeat(c, 64) }
	snap := map[string]Entry{"old/a": {SHA256: h("a")}, "new/a": {SHA256: h("a")}, "new/b": {SHA256: h("b")}}
	copies := []Task{{Path: "new/a", Entry: snap["new/a"]}, {Path: "new/b", Entry: snap["new/b"]}, {Path: "x", Entry: snap["new/b"]}}
	LocalSources(copies, map[string]string{"old/a": h("a"), "x/b": h("b")})
	if copies[0].From != "old/a" || copies[1].From != "" || copies[2].From != "" {
		t.Fatalf("local sources: %+v", copies)
	}
	dirs := PruneDirs([]string{"x/y/z/f", "x/g", "keep/h", "f2/i"},
		map[string]Entry{"keep/k": {}, "f2": {}}, map[string]Found{})
	if want := []string{"x/y/z", "x/y", "x"}; !reflect.DeepEqual(dirs, want) {
		t.Fatalf("PruneDirs = %v, want %v", dirs, want)
	}
}
