package client

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// snapshotURL is the URL of PATH in snapshot name of bucket:
// /_snapshots/BUCKET/NAME/PATH; dir adds a trailing slash.
func (c *Client) snapshotURL(bucket, name, p string, dir bool) string {
	u := c.base + "/_snapshots/" + url.PathEscape(bucket) + "/" + url.PathEscape(name) + "/"
	if p = strings.Trim(cleanPath(p), "/"); p != "" {
		u += escapePath(p)
		if dir {
			u += "/"
		}
	}
	return u
}

// SnapshotList returns one page of the listing of directory dir ("" is
// the root) as it was in snapshot name of bucket: GET
// /_snapshots/BUCKET/NAME/DIR/ (docs/http-api.md, "Snapshots"). Paths in
// the result are full paths inside the bucket, as in List. ErrNotFound if
// the bucket, the snapshot or the directory does not exist.
func (c *Client) SnapshotList(ctx context.Context, bucket, name, dir string, opts ListOptions) (ListResult, error) {
	if bucket == "" || strings.Contains(bucket, "/") || name == "" || strings.Contains(name, "/") {
		return ListResult{}, fmt.Errorf("list snapshot: %w: bad bucket or snapshot name %q/%q", ErrInvalidArgument, bucket, name)
	}
	q := url.Values{}
	if opts.Recursive {
		q.Set("recursive", "1")
	}
	if opts.After != "" {
		q.Set("after", opts.After)
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Prefix != "" {
		q.Set("prefix", opts.Prefix)
	}
	what := fmt.Sprintf("list snapshot %s of %s/%s", name, bucket, strings.Trim(dir, "/"))
	rq := request{method: http.MethodGet, url: c.snapshotURL(bucket, name, dir, true), query: q,
		header: http.Header{"Accept": {"application/json"}}}
	resp, err := c.do(ctx, rq)
	if err != nil {
		return ListResult{}, fmt.Errorf("%s: %w", what, err)
	}
	if resp.StatusCode >= 300 {
		drain(resp.Body)
		return ListResult{}, fmt.Errorf("%s: %w: status %d", what, ErrProtocol, resp.StatusCode)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		drain(resp.Body)
		return ListResult{}, fmt.Errorf("%s: %w: got %q instead of a JSON listing", what, ErrProtocol, mt)
	}
	var out ListResult
	if err := decodeJSON(resp, &out); err != nil {
		return ListResult{}, fmt.Errorf("%s: %w", what, err)
	}
	for i := range out.Entries {
		if out.Entries[i].Bucket == "" {
			out.Entries[i].Bucket = bucket
		}
	}
	return out, nil
}

// SnapshotListPages calls fn with each page of SnapshotList, following
// NextToken from opts.After on, until the listing ends, fn returns an
// error (returned as is) or ctx is done. Pages are fetched one after the
// other, so a tree of any size is listed in bounded memory.
func (c *Client) SnapshotListPages(ctx context.Context, bucket, name, dir string, opts ListOptions, fn func(ListResult) error) error {
	return eachPage(opts, fmt.Sprintf("list snapshot %s of %s", name, bucket), func(o ListOptions) (ListResult, error) {
		return c.SnapshotList(ctx, bucket, name, dir, o)
	}, fn)
}

// SnapshotGet opens file p as it was in snapshot name of bucket: GET
// /_snapshots/BUCKET/NAME/PATH. The caller must close the body; the info
// comes from the answer's headers (SHA256 from Repr-Digest). ErrNotFound
// if the bucket, the snapshot or the file does not exist.
func (c *Client) SnapshotGet(ctx context.Context, bucket, name, p string) (io.ReadCloser, ObjectInfo, error) {
	if err := checkArgs("get snapshot", bucket, p); err != nil {
		return nil, ObjectInfo{}, err
	}
	p = cleanPath(p)
	resp, err := c.do(ctx, request{method: http.MethodGet, url: c.snapshotURL(bucket, name, p, false)})
	if err != nil {
		return nil, ObjectInfo{}, fmt.Errorf("get %s/%s in snapshot %s: %w", bucket, p, name, err)
	}
	if resp.StatusCode >= 300 {
		drain(resp.Body)
		return nil, ObjectInfo{}, fmt.Errorf("get %s/%s in snapshot %s: %w: status %d (a directory?)", bucket, p, name, ErrProtocol, resp.StatusCode)
	}
	return resp.Body, infoFromHeaders(bucket, p, resp), nil
}
