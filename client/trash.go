package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// TrashEntry is a file a bucket's trash keeps: deleted, or overwritten
// (Replaced), at Deleted (GET /_cairn/trash/BUCKET).
type TrashEntry struct {
	// Path is where the file was, inside the bucket.
	Path string `json:"path"`
	// Deleted is when it was removed, to the nanosecond.
	Deleted time.Time `json:"deleted"`
	// Size is the file's size in bytes.
	Size int64 `json:"size"`
	// Replaced is true when another file took its place (a PUT over it,
	// a rename onto it), false when it was deleted.
	Replaced bool `json:"replaced"`
	// Node, Frontend (http, s3, webdav, mount) and Key (an access key
	// ID; "" for the admin key) say where the change came from; zero
	// where unknown.
	Node     uint64 `json:"node,string"`
	Frontend string `json:"frontend"`
	Key      string `json:"key"`
	// ETag is the hex MD5 of the content, SHA256 its hex SHA-256.
	ETag   string `json:"etag,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
}

// TrashUsage is one bucket's trash in Status.
type TrashUsage struct {
	Bucket string `json:"bucket"`
	// RetentionSeconds is the bucket's BucketInfo.TrashSeconds; 0 when
	// the trash was turned off with entries left in it.
	RetentionSeconds int64 `json:"retention_seconds"`
	Entries          int64 `json:"entries"`
	Bytes            int64 `json:"bytes"`
}

func (c *Client) trashURL(bucket, action string) string {
	u := c.base + "/_cairn/trash/" + url.PathEscape(bucket)
	if action != "" {
		u += "/" + action
	}
	return u
}

// rfc3339 formats t for the trash API; "" for the zero time.
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// TrashPage returns a page of the entries of bucket's trash whose path
// starts with prefix ("" all), by path and then deletion time (admin):
// at most limit (0: the server's default, 1,000), from after (the next
// of the page before; "" from the first). next is "" on the last page.
// ErrNotFound if there is no such bucket.
func (c *Client) TrashPage(ctx context.Context, bucket, prefix, after string, limit int) (entries []TrashEntry, next string, err error) {
	if bucket == "" {
		return nil, "", fmt.Errorf("trash list: %w: empty bucket name", ErrInvalidArgument)
	}
	q := url.Values{}
	if p := cleanPath(prefix); p != "" {
		q.Set("prefix", p)
	}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	rq := request{method: http.MethodGet, url: c.trashURL(bucket, ""), query: q, header: http.Header{"Accept": {"application/json"}}}
	resp, err := c.do(ctx, rq)
	if err == nil {
		next = resp.Header.Get("X-Cairn-Next")
		err = decodeJSON(resp, &entries)
	}
	if err != nil {
		return nil, "", fmt.Errorf("trash list %s: %w", strings.TrimSuffix(bucket+"/"+cleanPath(prefix), "/"), err)
	}
	return entries, next, nil
}

// TrashEach calls fn for every entry of bucket's trash whose path starts
// with prefix, in TrashPage's order, one page in memory at a time, until
// fn returns an error (returned).
func (c *Client) TrashEach(ctx context.Context, bucket, prefix string, fn func(TrashEntry) error) error {
	after := ""
	for {
		page, next, err := c.TrashPage(ctx, bucket, prefix, after, 0)
		if err != nil {
			return err
		}
		for _, e := range page {
			if err := fn(e); err != nil {
				return err
			}
		}
		if next == "" {
			return nil
		}
		after = next
	}
}

// TrashRestore puts entries of bucket's trash back as files (admin): for
// path, its newest entry deleted at or before at (zero: the newest); for
// a tree (path ending in "/", or "" for the whole bucket), the same for
// every path under it. to restores elsewhere: a path for a file, a prefix
// for a tree ("" the same place). It returns the paths restored.
//
// A restore never overwrites: ErrConflict when a file or directory is at
// a target (for a tree the other paths are restored, and the error's
// message counts them and names the targets in the way); ErrNotFound when
// the trash holds no entry of path at or before at, or there is no such
// bucket.
func (c *Client) TrashRestore(ctx context.Context, bucket, path string, at time.Time, to string) ([]string, error) {
	if bucket == "" {
		return nil, fmt.Errorf("trash restore: %w: empty bucket name", ErrInvalidArgument)
	}
	body := struct {
		Path string `json:"path"`
		At   string `json:"at,omitempty"`
		To   string `json:"to,omitempty"`
	}{cleanPath(path), rfc3339(at), cleanPath(to)}
	rq, err := jsonRequest(http.MethodPost, c.trashURL(bucket, "restore"), body)
	if err != nil {
		return nil, err
	}
	var out struct {
		Restored []string `json:"restored"`
	}
	if err := c.doJSON(ctx, rq, &out); err != nil {
		return nil, fmt.Errorf("restore %s/%s from the trash: %w", bucket, body.Path, err)
	}
	return out.Restored, nil
}

// TrashEmpty drops the entries of bucket's trash deleted before before
// (zero: every entry), for good, and returns how many (admin). Their
// space is reclaimed by the node's next garbage collection.
func (c *Client) TrashEmpty(ctx context.Context, bucket string, before time.Time) (int, error) {
	if bucket == "" {
		return 0, fmt.Errorf("trash empty: %w: empty bucket name", ErrInvalidArgument)
	}
	body := struct {
		Before string `json:"before,omitempty"`
	}{rfc3339(before)}
	rq, err := jsonRequest(http.MethodPost, c.trashURL(bucket, "empty"), body)
	if err != nil {
		return 0, err
	}
	var out struct {
		Emptied int `json:"emptied"`
	}
	if err := c.doJSON(ctx, rq, &out); err != nil {
		return 0, fmt.Errorf("empty the trash of %s: %w", bucket, err)
	}
	return out.Emptied, nil
}
