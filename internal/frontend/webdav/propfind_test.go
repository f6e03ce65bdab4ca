package webdav

import (
	"context"
	"encoding/xml"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	xwebdav "golang.org/x/net/webdav"

	"github.com/cairn-fs/cairn/internal/store"
	"github.com/cairn-fs/cairn/internal/store/storetest"
)

// putMany stores n small files dir/f000000... in bucket bkt.
func putMany(t *testing.T, st *store.Local, dir string, n int) {
	t.Helper()
	for i := 0; i < n; i += 1000 {
		var files []store.FilePut
		for j := i; j < min(n, i+1000); j++ {
			files = append(files, store.FilePut{Path: fmt.Sprintf("%s/f%06d", dir, j), Data: []byte("x")})
		}
		for _, r := range st.PutFiles(context.Background(), "bkt", files) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
}

func propfindRequest(p, body string) *http.Request {
	r := httptest.NewRequest("PROPFIND", "/_dav/bkt"+p, strings.NewReader(body))
	r.Header.Set("Depth", "1")
	return r
}

type msProp struct {
	XMLName xml.Name
	Inner   string `xml:",innerxml"`
}

type msPropstat struct {
	Props  []msProp `xml:"prop>any"`
	Status string   `xml:"status"`
}

type msResponse struct {
	Href      string       `xml:"href"`
	Propstats []msPropstat `xml:"propstat"`
}

func responses(t *testing.T, body string) []msResponse {
	t.Helper()
	var ms struct {
		Responses []msResponse `xml:"response"`
	}
	if err := xml.Unmarshal([]byte(body), &ms); err != nil {
		t.Fatalf("multistatus does not parse: %v\n%.500s", err, body)
	}
	slices.SortFunc(ms.Responses, func(a, b msResponse) int { return strings.Compare(a.Href, b.Href) })
	for _, r := range ms.Responses { // x/net/webdav lists live properties in map order
		slices.SortFunc(r.Propstats, func(a, b msPropstat) int { return strings.Compare(a.Status, b.Status) })
		for _, ps := range r.Propstats {
			slices.SortFunc(ps.Props, func(a, b msProp) int {
				return strings.Compare(a.XMLName.Space+" "+a.XMLName.Local, b.XMLName.Space+" "+b.XMLName.Local)
			})
		}
	}
	return ms.Responses
}

// A PROPFIND of depth 1 streamed a page at a time answers what
// x/net/webdav answers, resource for resource, over several pages, for
// every kind of request body.
func TestPropfindMembersAsXNet(t *testing.T) {
	st := newStore(t)
	putMany(t, st, "d", 2500)
	for _, sub := range []string{"d/sub1", "d/sub2/deep"} {
		if err := st.Mkdir(context.Background(), "bkt", sub, store.Attrs{}); err != nil {
			t.Fatal(err)
		}
	}
	h := &Handler{cfg: Config{Store: st, Prefix: Prefix, Logger: slog.New(slog.DiscardHandler)}, handlers: map[string]*xwebdav.Handler{}}
	x := h.bucketHandler("bkt")
	fsys := &fileSystem{st: st, bucket: "bkt"}
	for _, body := range []string{
		"",
		`<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>`,
		`<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:propname/></D:propfind>`,
		`<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:getcontentlength/><D:resourcetype/><D:nosuch/></D:prop></D:propfind>`,
	} {
		for _, p := range []string{"/d", "/d/", "/"} {
			want := httptest.NewRecorder()
			x.ServeHTTP(want, propfindRequest(p, body))
			got := httptest.NewRecorder()
			if !propfindMembers(got, propfindRequest(p, body), x, fsys, strings.Trim(p, "/"), []byte(body)) {
				t.Fatalf("%s: not answered as a collection", p)
			}
			if got.Code != want.Code || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
				t.Fatalf("%s %q: %d %q, x/net/webdav %d %q", p, body, got.Code, got.Header().Get("Content-Type"), want.Code, want.Header().Get("Content-Type"))
			}
			g, w := responses(t, got.Body.String()), responses(t, want.Body.String())
			if len(g) != len(w) {
				t.Fatalf("%s %q: %d responses, x/net/webdav %d", p, body, len(g), len(w))
			}
			for i := range g {
				if !reflect.DeepEqual(g[i], w[i]) {
					t.Fatalf("%s %q: response %d\n%+v\nx/net/webdav:\n%+v", p, body, i, g[i], w[i])
				}
			}
		}
	}
	if propfindMembers(httptest.NewRecorder(), propfindRequest("/d/f000001", ""), x, fsys, "d/f000001", nil) {
		t.Fatal("a file was answered as a collection")
	}
	bad := httptest.NewRecorder()
	if !propfindMembers(bad, propfindRequest("/d", "<bad"), x, fsys, "d", []byte("<bad")) || bad.Code != http.StatusBadRequest {
		t.Fatalf("a bad body: %d, want x/net/webdav's 400", bad.Code)
	}
}

// heapAt is an http.ResponseWriter that measures the live heap when the
// n-th <D:response> is written.
type heapAt struct {
	httptest.ResponseRecorder
	hdr   http.Header
	n     int
	count int
	heap  uint64
}

func (h *heapAt) Header() http.Header { return h.hdr }
func (h *heapAt) WriteHeader(int)     {}
func (h *heapAt) Write(b []byte) (int, error) {
	before := h.count
	h.count += strings.Count(string(b), "<D:response>")
	if before < h.n && h.count >= h.n {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		h.heap = ms.HeapAlloc
	}
	return len(b), nil
}

// A PROPFIND of depth 1 on a 100,000-member collection holds a page, not
// the listing: half way through its answer, the heap it keeps is far
// below what the members' names alone would take.
func TestPropfindMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("stores 100,000 files")
	}
	const n = 100000
	// The path cache (bounded, 65,536 entries by default) keeps what the
	// members' stats resolved: small here, so that the listing is measured.
	st := storetest.NewWith(t, func(c *store.Config) { c.PathCacheEntries = 1000 })
	if err := st.CreateBucket(context.Background(), store.BucketInfo{Name: "bkt"}); err != nil {
		t.Fatal(err)
	}
	putMany(t, st, "big", n)
	h := &Handler{cfg: Config{Store: st, Prefix: Prefix, Logger: slog.New(slog.DiscardHandler)}, handlers: map[string]*xwebdav.Handler{}}
	x := h.bucketHandler("bkt")
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w := &heapAt{hdr: http.Header{}, n: n / 2}
	if !propfindMembers(w, propfindRequest("/big", ""), x, &fileSystem{st: st, bucket: "bkt"}, "big", nil) {
		t.Fatal("not answered as a collection")
	}
	if w.count != n+1 {
		t.Fatalf("%d responses, want %d", w.count, n+1)
	}
	grew := int64(w.heap) - int64(before.HeapAlloc)
	t.Logf("heap held half way through a PROPFIND of %d members: %d KB", n, grew/1024)
	if limit := int64(n * 40 / 2); grew > limit {
		t.Fatalf("a PROPFIND of %d members holds %d KB half way through: more than %d KB, the listing is held", n, grew/1024, limit/1024)
	}
}
