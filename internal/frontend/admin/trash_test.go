package admin

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/store"
)

func putFile(t *testing.T, st *store.Local, ctx context.Context, bucket, path, body string) {
	t.Helper()
	if _, _, err := st.Put(ctx, bucket, path, strings.NewReader(body), store.PutOptions{Size: int64(len(body))}); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, st *store.Local, bucket, path string) string {
	t.Helper()
	o, err := st.Open(context.Background(), bucket, path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer o.Close()
	b := make([]byte, o.Info().Size)
	if _, err := o.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return string(b)
}

// wantError checks an error answer's status, code and message.
func wantError(t *testing.T, what string, code int, body string, status int, errCode, msg string) {
	t.Helper()
	var e struct{ Error, Code string }
	if err := json.Unmarshal([]byte(body), &e); err != nil || code != status || e.Code != errCode || !strings.Contains(e.Error, msg) {
		t.Fatalf("%s: %d %s, want %d %s %q", what, code, body, status, errCode, msg)
	}
}

// TestTrashEndpoints: list (with origin and prefix), restore of a file
// (refused over a file, 404 without an entry, to another path), of a tree
// (a conflict names what did not come back), restore at a time, empty
// (before a time, then all), the usage in the status view, and the
// refusals.
func TestTrashEndpoints(t *testing.T) {
	_, srv, st := newTest(t, nil, nil)
	ctx := store.WithOrigin(context.Background(), "http", "AKTEST")
	if err := st.CreateBucket(ctx, store.BucketInfo{Name: "web", TrashSeconds: 7 * 86400}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateBucket(ctx, store.BucketInfo{Name: "plain"}); err != nil {
		t.Fatal(err)
	}
	code, _, body := call(t, srv, "GET", TrashPath+"/web", testKey, "")
	if code != 200 || body != "[]\n" {
		t.Fatalf("empty trash: %d %s", code, body)
	}
	putFile(t, st, ctx, "web", "a.txt", "version one")
	putFile(t, st, ctx, "web", "a.txt", "version two!")
	for _, p := range []string{"d/b.txt", "d/c.txt"} {
		putFile(t, st, ctx, "web", p, "content of "+p)
		if err := st.Delete(ctx, "web", p, ""); err != nil {
			t.Fatal(err)
		}
	}
	code, hdr, body := call(t, srv, "GET", TrashPath+"/web", testKey, "")
	var list []trashEntryJSON
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil || len(list) != 3 || hdr.Get("Cache-Control") != "no-store" {
		t.Fatalf("list: %d %s", code, body)
	}
	a := list[0]
	if a.Path != "a.txt" || !a.Replaced || a.Size != 11 || a.Frontend != "http" || a.Key != "AKTEST" || a.ETag == "" || len(a.SHA256) != 64 ||
		time.Since(a.Deleted) > time.Minute || list[1].Path != "d/b.txt" || list[1].Replaced {
		t.Fatalf("entries: %s", body)
	}
	if !strings.Contains(body, `"node":"1"`) || !strings.Contains(body, `"deleted":"`+a.Deleted.Format(time.RFC3339Nano)+`"`) {
		t.Fatalf("node as a string, deleted in RFC 3339: %s", body)
	}
	if code, _, body = call(t, srv, "GET", TrashPath+"/web?prefix=/d/", testKey, ""); code != 200 || strings.Count(body, `"path"`) != 2 || strings.Contains(body, "a.txt") {
		t.Fatalf("prefix d/: %d %s", code, body)
	}
	code, _, body = call(t, srv, "GET", StatusPath, testKey, "")
	if code != 200 || !strings.Contains(body, `"trash":[{"bucket":"web","retention_seconds":604800,"entries":3,"bytes":`) || strings.Contains(body, `"bucket":"plain"`) {
		t.Fatalf("status: trash usage of web only: %d %s", code, body)
	}

	// A file: never over the live one; to another path; no entry.
	code, _, body = call(t, srv, "POST", TrashPath+"/web/restore", testKey, `{"path":"a.txt"}`)
	wantError(t, "restore over a file", code, body, 409, "TargetExists", `not restored: "a.txt" exists in bucket web, and a restore never overwrites`)
	code, _, body = call(t, srv, "POST", TrashPath+"/web/restore", testKey, `{"path":"a.txt","to":"old/a.v1.txt"}`)
	if code != 200 || body != `{"restored":["old/a.v1.txt"]}`+"\n" {
		t.Fatalf("restore to another path: %d %s", code, body)
	}
	if got := readFile(t, st, "web", "old/a.v1.txt"); got != "version one" {
		t.Fatalf("restored %q", got)
	}
	if got := readFile(t, st, "web", "a.txt"); got != "version two!" {
		t.Fatalf("the live file changed: %q", got)
	}
	code, _, body = call(t, srv, "POST", TrashPath+"/web/restore", testKey, `{"path":"a.txt"}`)
	wantError(t, "restore without an entry", code, body, 404, "NoSuchEntry", `no entry of "a.txt" in the trash of bucket web`)

	// At a time before every deletion: nothing.
	before := list[1].Deleted.Add(-time.Hour).Format(time.RFC3339Nano)
	code, _, body = call(t, srv, "POST", TrashPath+"/web/restore", testKey, `{"path":"d/","at":"`+before+`"}`)
	wantError(t, "restore before the deletions", code, body, 404, "NoSuchEntry", `nothing under "d/" in the trash of bucket web deleted at or before `)

	// A tree: one target is taken; the other comes back, and the answer
	// names what did not.
	putFile(t, st, ctx, "web", "d/b.txt", "a new b")
	at := list[2].Deleted.Format(time.RFC3339Nano)
	code, _, body = call(t, srv, "POST", TrashPath+"/web/restore", testKey, `{"path":"d/","at":"`+at+`"}`)
	wantError(t, "tree with a taken target", code, body, 409, "TargetExists",
		`restored 1 files under "d/"; 1 not restored because something exists at their target, and a restore never overwrites: move or delete those first, or restore to another prefix ("to"): "d/b.txt"`)
	if got := readFile(t, st, "web", "d/c.txt"); got != "content of d/c.txt" {
		t.Fatalf("d/c.txt restored as %q", got)
	}
	if got := readFile(t, st, "web", "d/b.txt"); got != "a new b" {
		t.Fatalf("d/b.txt overwritten: %q", got)
	}
	code, _, body = call(t, srv, "POST", TrashPath+"/web/restore", testKey, `{"path":"d/","to":"/saved"}`)
	if code != 200 || body != `{"restored":["saved/b.txt"]}`+"\n" {
		t.Fatalf("tree to another prefix: %d %s", code, body)
	}

	// Empty: before a time long past drops nothing; then everything.
	for _, tc := range []struct{ body, want string }{
		{`{"before":"2001-01-01T00:00:00Z"}`, `{"emptied":0}`},
		{`{}`, `{"emptied":0}`},
	} {
		if code, _, body = call(t, srv, "POST", TrashPath+"/web/empty", testKey, tc.body); code != 200 || body != tc.want+"\n" {
			t.Fatalf("empty %s: %d %s", tc.body, code, body)
		}
	}
	if err := st.Delete(ctx, "web", "d/c.txt", ""); err != nil {
		t.Fatal(err)
	}
	putFile(t, st, ctx, "web", "a.txt", "version three")
	if code, _, body = call(t, srv, "POST", TrashPath+"/web/empty", testKey, ``); code != 200 || body != `{"emptied":2}`+"\n" {
		t.Fatalf("empty all (no body): %d %s", code, body)
	}
	if code, _, body = call(t, srv, "GET", TrashPath+"/web", testKey, ""); code != 200 || body != "[]\n" {
		t.Fatalf("emptied trash: %d %s", code, body)
	}
	if code, _, body = call(t, srv, "GET", StatusPath, testKey, ""); !strings.Contains(body, `"trash":[{"bucket":"web","retention_seconds":604800,"entries":0,"bytes":0}]`) {
		t.Fatalf("status after emptying: %d %s", code, body)
	}

	// Refusals.
	for _, tc := range []struct {
		name, method, path, key, body string
		status                        int
		code, msg                     string
	}{
		{"no key", "GET", TrashPath + "/web", "", "", 401, "Unauthorized", ""},
		{"wrong key", "POST", TrashPath + "/web/empty", "wrong-key-0123456789", "", 403, "AccessDenied", ""},
		{"no bucket named", "GET", TrashPath, testKey, "", 404, "NotFound", "name a bucket"},
		{"no bucket named /", "GET", TrashPath + "/", testKey, "", 404, "NotFound", "name a bucket"},
		{"bad bucket", "GET", TrashPath + "/Bad_Bucket", testKey, "", 400, "BadRequest", "Bad_Bucket"},
		{"no such bucket", "GET", TrashPath + "/nope", testKey, "", 404, "NoSuchBucket", `no bucket "nope"`},
		{"restore, no such bucket", "POST", TrashPath + "/nope/restore", testKey, `{"path":"x"}`, 404, "NoSuchBucket", `no bucket "nope"`},
		{"empty, no such bucket", "POST", TrashPath + "/nope/empty", testKey, ``, 404, "NoSuchBucket", `no bucket "nope"`},
		{"unknown call", "POST", TrashPath + "/web/undo", testKey, "", 404, "NotFound", "restore or empty"},
		{"POST a list", "POST", TrashPath + "/web", testKey, "", 405, "MethodNotAllowed", "allowed: GET, HEAD"},
		{"GET restore", "GET", TrashPath + "/web/restore", testKey, "", 405, "MethodNotAllowed", "allowed: POST"},
		{"restore without body", "POST", TrashPath + "/web/restore", testKey, "", 400, "BadRequest", "bad restore request"},
		{"restore without path", "POST", TrashPath + "/web/restore", testKey, `{"to":"x"}`, 400, "BadRequest", `no "path"`},
		{"restore, unknown field", "POST", TrashPath + "/web/restore", testKey, `{"path":"x","when":"now"}`, 400, "BadRequest", "when"},
		{"restore, bad time", "POST", TrashPath + "/web/restore", testKey, `{"path":"x","at":"yesterday"}`, 400, "BadRequest", `"at": "yesterday" is not an RFC 3339 time`},
		{"restore, bad path", "POST", TrashPath + "/web/restore", testKey, `{"path":"a/../b"}`, 400, "BadRequest", ""},
		{"empty, bad time", "POST", TrashPath + "/web/empty", testKey, `{"before":"2026-13-01"}`, 400, "BadRequest", `"before"`},
		{"empty, bad body", "POST", TrashPath + "/web/empty", testKey, `[1]`, 400, "BadRequest", "bad empty request"},
	} {
		code, _, body := call(t, srv, tc.method, tc.path, tc.key, tc.body)
		wantError(t, tc.name, code, body, tc.status, tc.code, tc.msg)
	}
}
