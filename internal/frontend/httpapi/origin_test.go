package httpapi

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/store"
)

// TestChangeOrigin: an overwrite and a delete over the native API, on the
// fast path and through net/http, are recorded in the bucket's trash as
// coming from "http" with the request's key.
func TestChangeOrigin(t *testing.T) {
	st := realStore(t)
	ctx := context.Background()
	must(t, st.CreateBucket(ctx, store.BucketInfo{Name: "trashy", TrashSeconds: 3600}))
	for _, fast := range []bool{true, false} {
		base := realServer(t, st, func(c *Config) { c.DisableFastPath = !fast }, nil)
		do := func(method, path, body string) {
			req, err := http.NewRequest(method, "http://"+base+path, strings.NewReader(body))
			must(t, err)
			req.Header.Set("Authorization", "Bearer "+testKey)
			resp, err := http.DefaultClient.Do(req)
			must(t, err)
			resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				t.Fatalf("%s %s: %d", method, path, resp.StatusCode)
			}
		}
		do("PUT", "/trashy/a.txt", "one")
		do("PUT", "/trashy/a.txt", "two")
		do("DELETE", "/trashy/a.txt", "")
		page, err := st.TrashList(ctx, "trashy", store.TrashListOptions{Prefix: "a.txt"})
		list := page.Entries
		must(t, err)
		if len(list) != 2 {
			t.Fatalf("fast=%v: %d trash entries", fast, len(list))
		}
		for _, e := range list {
			if e.Frontend != "http" || e.Key != "admin" {
				t.Fatalf("fast=%v: origin %+v", fast, e)
			}
		}
		_, err = st.TrashEmpty(ctx, "trashy", time.Time{})
		must(t, err)
	}
}
