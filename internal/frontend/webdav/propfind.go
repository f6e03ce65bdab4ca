package webdav

import (
	"bytes"
	"io"
	"net/http"
	"path"
	"strings"

	xwebdav "golang.org/x/net/webdav"

	"github.com/cairn-fs/cairn/internal/store"
)

// propfindMembers answers a PROPFIND of depth 1 on a collection with its
// members read from the store a page at a time, so that its memory does
// not grow with the collection: x/net/webdav reads a collection's whole
// listing before it answers (walkFS calls Readdir(0)). x/net/webdav still
// answers for every resource, as a PROPFIND of depth 0 of the collection
// and then of each member; their <D:response> elements go into one
// multistatus as they come. It returns false, having written nothing,
// when p is not a collection (x/net/webdav answers then).
func propfindMembers(w http.ResponseWriter, r *http.Request, x *xwebdav.Handler, fsys *fileSystem, p string, body []byte) bool {
	ctx := r.Context()
	info, err := fsys.stat(ctx, p)
	if err != nil || !info.IsDir {
		return false
	}
	base := strings.TrimSuffix(r.URL.Path, "/")
	sub := &captured{}
	one := func(urlPath string) {
		sub.reset()
		r2 := r.Clone(ctx)
		r2.URL.Path, r2.URL.RawPath = urlPath, ""
		r2.Header.Set("Depth", "0")
		r2.Body, r2.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		x.ServeHTTP(sub, r2)
	}
	one(base + "/")
	_, end, ok := sub.multistatus()
	if !ok {
		sub.copyTo(w) // an error, answered as x/net/webdav did
		return true
	}
	for k, v := range sub.hdr {
		w.Header()[k] = v
	}
	w.WriteHeader(http.StatusMultiStatus)
	if _, err := w.Write(sub.buf.Bytes()[:end]); err != nil {
		return true
	}
	prefix := ""
	if p != "" {
		prefix = p + "/"
	}
	opts := store.ListOptions{Prefix: prefix, Delimiter: "/", Limit: 1000}
	member := func(name string) error {
		one(base + "/" + name)
		if open, end, ok := sub.multistatus(); ok {
			_, err := w.Write(sub.buf.Bytes()[open:end])
			return err
		}
		return nil // gone since the listing, or not readable: left out, as x/net/webdav does
	}
	for {
		res, err := fsys.st.List(ctx, fsys.bucket, opts)
		if err != nil {
			// The status is sent: the multistatus ends here, incomplete.
			x.Logger(r, err)
			break
		}
		for _, e := range res.Entries {
			if member(path.Base(e.Path)) != nil {
				return true
			}
		}
		for _, cp := range res.CommonPrefixes {
			if member(path.Base(strings.TrimSuffix(cp, "/"))) != nil {
				return true
			}
		}
		if !res.Truncated {
			break
		}
		opts.StartAfter = res.NextToken
	}
	w.Write([]byte(multistatusEnd))
	return true
}

const multistatusEnd = "</D:multistatus>"

// captured is an http.ResponseWriter that keeps a response in memory.
type captured struct {
	hdr  http.Header
	code int
	buf  bytes.Buffer
}

func (c *captured) reset() {
	c.hdr, c.code = http.Header{}, 0
	c.buf.Reset()
}

func (c *captured) Header() http.Header { return c.hdr }

func (c *captured) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
}

func (c *captured) Write(b []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	return c.buf.Write(b)
}

// multistatus finds, in a 207 answer, where its responses start (after
// the multistatus start tag) and end (at its end tag).
func (c *captured) multistatus() (open, end int, ok bool) {
	if c.code != http.StatusMultiStatus {
		return 0, 0, false
	}
	b := c.buf.Bytes()
	i := bytes.Index(b, []byte("<D:multistatus"))
	end = bytes.LastIndex(b, []byte(multistatusEnd))
	if i < 0 || end < 0 {
		return 0, 0, false
	}
	j := bytes.IndexByte(b[i:], '>')
	if j < 0 || i+j+1 > end {
		return 0, 0, false
	}
	return i + j + 1, end, true
}

func (c *captured) copyTo(w http.ResponseWriter) {
	for k, v := range c.hdr {
		w.Header()[k] = v
	}
	w.WriteHeader(max(c.code, http.StatusOK))
	w.Write(c.buf.Bytes())
}
