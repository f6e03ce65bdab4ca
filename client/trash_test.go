package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/client"
)

// TestTrashRequests: the trash calls' requests (paths, query, bodies with
// times in UTC RFC 3339, none for the zero time) and answers, and the
// error kinds of a refused restore.
func TestTrashRequests(t *testing.T) {
	var got []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+string(body)+" "+r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/_cairn/trash/web" && r.Method == "GET":
			w.Write([]byte(`[{"path":"d/a.txt","deleted":"2026-11-27T09:04:05.123456789Z","size":5,"replaced":true,"node":"3","frontend":"s3","key":"AK7","etag":"e","sha256":"s"}]`))
		case strings.HasSuffix(r.URL.Path, "/restore") && strings.Contains(string(body), `"taken"`):
			w.WriteHeader(409)
			w.Write([]byte(`{"error":"not restored: \"taken\" exists in bucket web, and a restore never overwrites","code":"TargetExists"}`))
		case strings.HasSuffix(r.URL.Path, "/restore") && strings.Contains(string(body), `"gone"`):
			w.WriteHeader(404)
			w.Write([]byte(`{"error":"no entry of \"gone\"","code":"NoSuchEntry"}`))
		case strings.HasSuffix(r.URL.Path, "/restore"):
			w.Write([]byte(`{"restored":["d/a.txt"]}`))
		case strings.HasSuffix(r.URL.Path, "/empty"):
			w.Write([]byte(`{"emptied":7}`))
		default:
			w.WriteHeader(500)
		}
	}))
	defer ts.Close()
	c := client.New(ts.URL, "k")
	ctx := context.Background()

	list, _, err := c.TrashPage(ctx, "web", "/d/", "", 0)
	want := client.TrashEntry{Path: "d/a.txt", Deleted: time.Date(2026, 11, 27, 9, 4, 5, 123456789, time.UTC), Size: 5, Replaced: true,
		Node: 3, Frontend: "s3", Key: "AK7", ETag: "e", SHA256: "s"}
	if err != nil || len(list) != 1 || !list[0].Deleted.Equal(want.Deleted) {
		t.Fatalf("list: %+v, %v", list, err)
	}
	list[0].Deleted = want.Deleted
	if list[0] != want {
		t.Fatalf("entry %+v, want %+v", list[0], want)
	}
	at := time.Date(2026, 11, 27, 10, 4, 5, 500, time.FixedZone("UTC+1", 3600))
	if r, err := c.TrashRestore(ctx, "web", "/d/", at, "/saved/"); err != nil || len(r) != 1 || r[0] != "d/a.txt" {
		t.Fatalf("restore: %v, %v", r, err)
	}
	if _, err := c.TrashRestore(ctx, "web", "d/a.txt", time.Time{}, ""); err != nil {
		t.Fatal(err)
	}
	if n, err := c.TrashEmpty(ctx, "web", time.Time{}); err != nil || n != 7 {
		t.Fatalf("empty: %d, %v", n, err)
	}
	if _, err := c.TrashEmpty(ctx, "web", at); err != nil {
		t.Fatal(err)
	}
	wantReqs := []string{
		`GET /_cairn/trash/web?prefix=d%2F  Bearer k`,
		`POST /_cairn/trash/web/restore {"path":"d/","at":"2026-11-27T09:04:05.0000005Z","to":"saved/"} Bearer k`,
		`POST /_cairn/trash/web/restore {"path":"d/a.txt"} Bearer k`,
		`POST /_cairn/trash/web/empty {} Bearer k`,
		`POST /_cairn/trash/web/empty {"before":"2026-11-27T09:04:05.0000005Z"} Bearer k`,
	}
	if strings.Join(got, "\n") != strings.Join(wantReqs, "\n") {
		t.Errorf("requests:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantReqs, "\n"))
	}

	_, err = c.TrashRestore(ctx, "web", "taken", time.Time{}, "")
	var ce *client.Error
	if !errors.Is(err, client.ErrConflict) || !errors.As(err, &ce) || ce.Code != "TargetExists" ||
		!strings.Contains(err.Error(), `restore web/taken from the trash: 409 Conflict: not restored: "taken" exists in bucket web, and a restore never overwrites (TargetExists)`) {
		t.Fatalf("conflict: %v", err)
	}
	if _, err = c.TrashRestore(ctx, "web", "gone", time.Time{}, ""); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("no entry: %v", err)
	}
	for _, err := range []error{
		func() error { _, _, err := c.TrashPage(ctx, "", "", "", 0); return err }(),
		func() error { _, err := c.TrashRestore(ctx, "", "x", time.Time{}, ""); return err }(),
		func() error { _, err := c.TrashEmpty(ctx, "", time.Time{}); return err }(),
	} {
		if !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("no bucket name: %v", err)
		}
	}
}
