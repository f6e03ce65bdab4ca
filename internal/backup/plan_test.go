package backup

import (
	"bytes"
	"context"
	"encoding/json"
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

// decodeManifest reads a manifest whole (tests).
func decodeManifest(t *testing.T, data []byte) (*Manifest, map[string]Entry) {
	t.Helper()
	files := map[string]Entry{}
	m, err := readManifest(bytes.NewReader(data), func(p string, e Entry) error {
		files[p] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m, files
}

// testLists are lists holding the given maps (tests).
func testLists(t *testing.T, spaces map[byte]map[string]Entry) *lists {
	t.Helper()
	l := newLists(t.TempDir())
	t.Cleanup(l.close)
	for space, m := range spaces {
		for p, e := range m {
			v := encodeEntry(e, "")
			if space == keyInv {
				v = encodeFound(Found{Size: e.Size, SHA256: e.SHA256})
			}
			if err := l.set(space, p, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	return l
}

// encodeManifest writes m with files (tests).
func encodeManifest(t *testing.T, m *Manifest, files map[string]Entry) []byte {
	t.Helper()
	l := testLists(t, map[byte]map[string]Entry{keySnap: files})
	if err := l.summarize(m, keySnap); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := writeManifest(&buf, m, l, keySnap); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// paths lists the paths of space.
func (l *lists) paths(t *testing.T, space byte) []string {
	t.Helper()
	var out []string
	if err := l.each(space, func(p string, _ []byte) error { out = append(out, p); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestManifestRoundTrip(t *testing.T) {
	m := &Manifest{Bucket: "web", Snapshot: "s1"}
	files := map[string]Entry{
		"a.txt":   {SHA256: strings.Repeat("a", 64), Size: 3, Mode: 0o644, Mtime: time.Unix(1700000000, 123456789).UTC()},
		"d/b.txt": {SHA256: strings.Repeat("a", 64), Size: 3, Mode: 0o600},
		"d/c.txt": {SHA256: strings.Repeat("b", 64), Size: 5, ContentType: "text/plain"},
	}
	data := encodeManifest(t, m, files)
	got, gotFiles := decodeManifest(t, data)
	if got.FileCount != 3 || got.Bytes != 11 || got.Hashes != 2 || !reflect.DeepEqual(gotFiles, files) {
		t.Fatalf("round trip: %+v %v", got, gotFiles)
	}
	// The document is the one json.Marshal writes of the head with its
	// files (what a manifest of an earlier release is, and reads).
	var whole struct {
		Manifest
		Files map[string]Entry `json:"files"`
	}
	whole.Manifest, whole.Files = *got, files
	if want, _ := json.Marshal(whole); !bytes.Equal(data, want) {
		t.Fatalf("manifest:\n%s\nwant\n%s", data, want)
	}
	for name, bad := range map[string]string{
		"not JSON":      "{",
		"future format": `{"format":2,"files":{}}`,
		"no format":     `{"files":{}}`,
		"escaping path": `{"format":1,"files":{"../x":{"sha256":"` + strings.Repeat("a", 64) + `","size":1}}}`,
		"bad digest":    `{"format":1,"files":{"x":{"sha256":"zz","size":1}}}`,
		"files a list":  `{"format":1,"files":[]}`,
	} {
		if _, err := readManifest(strings.NewReader(bad), func(string, Entry) error { return nil }); !errors.Is(err, ErrBadMeta) {
			t.Errorf("%s: %v", name, err)
		}
	}
	l := testLists(t, map[byte]map[string]Entry{keyJournal: {"b": {}, "a": {}}})
	var buf bytes.Buffer
	if err := writeJournal(&buf, &Journal{Bucket: "web"}, l, keyJournal); err != nil {
		t.Fatal(err)
	}
	var paths []string
	jr, err := readJournal(&buf, func(p string) error { paths = append(paths, p); return nil })
	if err != nil || jr.Bucket != "web" || jr.Paths != 2 || !reflect.DeepEqual(paths, []string{"a", "b"}) {
		t.Fatalf("journal: %+v %v %v", jr, paths, err)
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
			pending, inv := map[string]Entry{}, map[string]Entry{}
			for _, p := range tc.pending {
				pending[p] = Entry{}
			}
			for p, f := range tc.inv {
				inv[p] = Entry{Size: f.Size, SHA256: f.SHA256}
			}
			l := testLists(t, map[byte]map[string]Entry{keySnap: tc.snap, keyOld: tc.old, keyPending: pending, keyInv: inv})
			pc, err := makePlan(l, tc.old != nil, false)
			if err != nil {
				t.Fatal(err)
			}
			got := want{l.paths(t, keyCopy), l.paths(t, keyCheck), l.paths(t, keySame), l.paths(t, keyTouch),
				l.paths(t, keyDelete), l.paths(t, keyForeign)}
			if counts := []int{pc.copy, pc.check, pc.same, pc.touch, pc.delete, pc.foreign}; !reflect.DeepEqual(counts,
				[]int{len(got.copy), len(got.check), len(got.same), len(got.touch), len(got.del), len(got.foreign)}) {
				t.Fatalf("counts %v for %+v", counts, got)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("plan:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestLocalSourcesAndPruneDirs(t *testing.T) {
	h := func(c string) string { return strings.Repeat(c, 64) }
	a, b := Entry{SHA256: h("a")}, Entry{SHA256: h("b")}
	l := testLists(t, map[byte]map[string]Entry{
		keySnap: {"old/a": a, "new/a": a, "new/b": b, "x": b},
		keyCopy: {"new/a": a, "new/b": b, "x": b},
		keySame: {"old/a": a},
		keyOld:  {"x/b": b}, keyDelete: {"x/b": {}}, keyInv: {"x/b": {}},
	})
	if err := localSources(l, true); err != nil {
		t.Fatal(err)
	}
	from := map[string]string{}
	if err := l.eachEntry(keyCopy, func(p string, _ Entry, f string) error { from[p] = f; return nil }); err != nil {
		t.Fatal(err)
	}
	// x/b holds b's content, but x replaces its directory.
	if want := map[string]string{"new/a": "old/a", "new/b": "", "x": ""}; !reflect.DeepEqual(from, want) {
		t.Fatalf("local sources: %v, want %v", from, want)
	}
	l = testLists(t, map[byte]map[string]Entry{
		keyDeleted: {"x/y/z/f": {}, "x/g": {}, "keep/h": {}, "f2/i": {}},
		keySnap:    {"keep/k": {}, "f2": {}},
	})
	rec := &dirsRecorder{}
	if err := pruneDirs(context.Background(), l, keyDeleted, rec); err != nil {
		t.Fatal(err)
	}
	if want := []string{"x/y/z", "x/y", "x"}; !reflect.DeepEqual(rec.dirs, want) {
		t.Fatalf("pruneDirs = %v, want %v", rec.dirs, want)
	}
}

// dirsRecorder is a Location that records RemoveDirs.
type dirsRecorder struct {
	Location
	dirs []string
}

func (d *dirsRecorder) RemoveDirs(_ context.Context, dirs []string) { d.dirs = append(d.dirs, dirs...) }

// The tests run with lists that move to disk past 50 entries, so that
// both of spill.Map's homes are used.
func init() { spillAfter = 50 }
