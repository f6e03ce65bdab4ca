package client

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
)

func checkArgs(op, bucket, p string) error {
	if bucket == "" || strings.Contains(bucket, "/") {
		return fmt.Errorf("%s: %w: bad bucket name %q", op, ErrInvalidArgument, bucket)
	}
	if cleanPath(p) == "" {
		return fmt.Errorf("%s %s: %w: empty path", op, bucket, ErrInvalidArgument)
	}
	return nil
}

// FormatMtime formats t as X-Cairn-Mtime: Unix seconds with nine fractional
// digits ("1700000000.123456789"), exact to the nanosecond.
func FormatMtime(t time.Time) string {
	sec, nsec := t.Unix(), t.Nanosecond()
	if sec < 0 && nsec > 0 {
		// Unix() floors; write the value as a signed decimal.
		return fmt.Sprintf("-%d.%09d", -(sec + 1), 1e9-nsec)
	}
	return fmt.Sprintf("%d.%09d", sec, nsec)
}

// ParseMtime parses an X-Cairn-Mtime value (Unix seconds, optionally with a
// fraction of up to nine digits) exactly, without going through float64.
func ParseMtime(s string) (time.Time, error) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	intPart, frac, _ := strings.Cut(s, ".")
	sec, err := strconv.ParseInt(intPart, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: mtime %q", ErrInvalidArgument, s)
	}
	var nsec int64
	if frac != "" {
		if len(frac) > 9 {
			frac = frac[:9]
		}
		n, err := strconv.ParseUint(frac, 10, 32)
		if err != nil {
			return time.Time{}, fmt.Errorf("%w: mtime %q", ErrInvalidArgument, s)
		}
		nsec = int64(n)
		for i := len(frac); i < 9; i++ {
			nsec *= 10
		}
	}
	if neg {
		sec, nsec = -sec, -nsec
	}
	return time.Unix(sec, nsec), nil
}

// Put streams size bytes of r to bucket/p, replacing any file there and
// creating parent directories, and returns the stored file's info. size -1
// sends the body chunked (the server may answer 411, ErrBadRequest family).
// A body shorter than size fails and stores nothing. Put blocks until the
// server acknowledged the write as durable.
func (c *Client) Put(ctx context.Context, bucket, p string, r io.Reader, size int64, opts PutOptions) (ObjectInfo, error) {
	if err := checkArgs("put", bucket, p); err != nil {
		return ObjectInfo{}, err
	}
	p = cleanPath(p)
	h := http.Header{"Accept": {"application/json"}}
	if opts.ContentType != "" {
		h.Set("Content-Type", opts.ContentType)
	}
	if !opts.ModTime.IsZero() {
		h.Set("X-Cairn-Mtime", FormatMtime(opts.ModTime))
	}
	if opts.Mode != 0 {
		h.Set("X-Cairn-Mode", strconv.FormatUint(uint64(opts.Mode&0o7777), 8))
	}
	if opts.IfMatch != "" {
		h.Set("If-Match", `"`+strings.Trim(opts.IfMatch, `"`)+`"`)
	}
	if opts.IfNoneMatchAny {
		h.Set("If-None-Match", "*")
	}
	if r == nil {
		r, size = http.NoBody, 0
	}
	resp, err := c.do(ctx, request{method: http.MethodPut, url: c.objectURL(bucket, p, false), header: h, body: r, size: size})
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("put %s/%s: %w", bucket, p, err)
	}
	var body ObjectInfo
	if err := decodeJSON(resp, &body); err == nil && body.Path != "" {
		if body.Bucket == "" {
			body.Bucket = bucket
		}
		return body, nil
	}
	// No JSON body (a proxy in between?): what the headers and the request say.
	return ObjectInfo{
		Bucket: bucket, Path: p, Size: max(size, 0),
		ETag:        unquoteETag(resp.Header.Get("ETag")),
		SHA256:      sha256FromDigest(resp.Header.Get("Repr-Digest")),
		ContentType: opts.ContentType, ModTime: opts.ModTime, Mode: opts.Mode,
	}, nil
}

// Mkdir creates the directory bucket/dir and its parents. It succeeds if the
// directory exists.
func (c *Client) Mkdir(ctx context.Context, bucket, dir string) error {
	if err := checkArgs("mkdir", bucket, dir); err != nil {
		return err
	}
	resp, err := c.do(ctx, request{method: http.MethodPut, url: c.objectURL(bucket, dir, true), body: http.NoBody})
	if err != nil {
		return fmt.Errorf("mkdir %s/%s: %w", bucket, cleanPath(dir), err)
	}
	drain(resp.Body)
	return nil
}

// Get opens bucket/p for reading. The caller must close the returned body;
// the info comes from the response headers (see ObjectInfo).
func (c *Client) Get(ctx context.Context, bucket, p string) (io.ReadCloser, ObjectInfo, error) {
	return c.GetRange(ctx, bucket, p, 0, -1)
}

// GetRange opens n bytes of bucket/p starting at off (n < 0: to the end).
// The returned info describes the whole file (Size is the file's size).
// ErrRange if off is past the end of a non-empty file. The caller must close
// the body.
func (c *Client) GetRange(ctx context.Context, bucket, p string, off, n int64) (io.ReadCloser, ObjectInfo, error) {
	if err := checkArgs("get", bucket, p); err != nil {
		return nil, ObjectInfo{}, err
	}
	if off < 0 {
		return nil, ObjectInfo{}, fmt.Errorf("get %s/%s: %w: negative offset", bucket, p, ErrInvalidArgument)
	}
	if n == 0 {
		info, err := c.Stat(ctx, bucket, p)
		return io.NopCloser(strings.NewReader("")), info, err
	}
	p = cleanPath(p)
	h := http.Header{}
	ranged := off > 0 || n > 0
	if ranged {
		if n > 0 {
			h.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
		} else {
			h.Set("Range", fmt.Sprintf("bytes=%d-", off))
		}
	}
	resp, err := c.do(ctx, request{method: http.MethodGet, url: c.objectURL(bucket, p, false), header: h})
	if err != nil {
		return nil, ObjectInfo{}, fmt.Errorf("get %s/%s: %w", bucket, p, err)
	}
	if resp.StatusCode >= 300 {
		drain(resp.Body)
		if isDirRedirect(resp) {
			return nil, ObjectInfo{}, fmt.Errorf("get %s/%s: %w: is a directory", bucket, p, ErrInvalidArgument)
		}
		return nil, ObjectInfo{}, fmt.Errorf("get %s/%s: %w: status %d", bucket, p, ErrProtocol, resp.StatusCode)
	}
	info := infoFromHeaders(bucket, p, resp)
	body := resp.Body
	if resp.StatusCode == http.StatusOK && ranged {
		// The server ignored the range: cut it out of the whole file.
		if _, err := io.CopyN(io.Discard, body, off); err != nil {
			body.Close()
			return nil, ObjectInfo{}, fmt.Errorf("get %s/%s: skip to %d: %w", bucket, p, off, err)
		}
		if n > 0 {
			body = struct {
				io.Reader
				io.Closer
			}{io.LimitReader(body, n), body}
		}
	}
	return body, info, nil
}

// Stat describes bucket/p with a HEAD request. A directory is reported with
// IsDir set (the server redirects it to its trailing-slash form).
// ErrNotFound if nothing is there.
func (c *Client) Stat(ctx context.Context, bucket, p string) (ObjectInfo, error) {
	if bucket == "" {
		return ObjectInfo{}, fmt.Errorf("stat: %w: empty bucket name", ErrInvalidArgument)
	}
	dir := strings.HasSuffix(p, "/") || cleanPath(p) == ""
	p = strings.TrimRight(cleanPath(p), "/")
	resp, err := c.do(ctx, request{method: http.MethodHead, url: c.objectURL(bucket, p, dir)})
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("stat %s/%s: %w", bucket, p, err)
	}
	drain(resp.Body)
	if dir || isDirRedirect(resp) || (resp.Request != nil && strings.HasSuffix(resp.Request.URL.Path, "/")) {
		return ObjectInfo{Bucket: bucket, Path: p, IsDir: true}, nil
	}
	if resp.StatusCode >= 300 {
		return ObjectInfo{}, fmt.Errorf("stat %s/%s: %w: status %d", bucket, p, ErrProtocol, resp.StatusCode)
	}
	return infoFromHeaders(bucket, p, resp), nil
}

// isDirRedirect reports a redirect to the same path with a trailing slash.
func isDirRedirect(resp *http.Response) bool {
	if resp.StatusCode < 300 || resp.StatusCode >= 400 {
		return false
	}
	loc, err := resp.Location()
	return err == nil && strings.HasSuffix(loc.Path, "/") &&
		strings.TrimSuffix(loc.Path, "/") == resp.Request.URL.Path
}

// Delete removes the file bucket/p, or the directory there if it is empty.
// ErrNotFound if nothing is there, ErrConflict for a non-empty directory.
func (c *Client) Delete(ctx context.Context, bucket, p string) error {
	if err := checkArgs("delete", bucket, p); err != nil {
		return err
	}
	p = strings.TrimRight(cleanPath(p), "/")
	resp, err := c.do(ctx, request{method: http.MethodDelete, url: c.objectURL(bucket, p, false)})
	if err != nil {
		return fmt.Errorf("delete %s/%s: %w", bucket, p, err)
	}
	drain(resp.Body)
	return nil
}

// Rename moves bucket/src to bucket/dst, replacing a file at dst. It works
// for files and directories.
func (c *Client) Rename(ctx context.Context, bucket, src, dst string) error {
	if err := checkArgs("rename", bucket, src); err != nil {
		return err
	}
	if err := checkArgs("rename", bucket, dst); err != nil {
		return err
	}
	src, dst = cleanPath(src), cleanPath(dst)
	q := url.Values{"rename-to": {dst}}
	resp, err := c.do(ctx, request{method: http.MethodPost, url: c.objectURL(bucket, src, false), query: q, body: http.NoBody})
	if err != nil {
		return fmt.Errorf("rename %s/%s to %s: %w", bucket, src, dst, err)
	}
	drain(resp.Body)
	return nil
}

// infoFromHeaders builds an ObjectInfo from GET/HEAD/PUT answer headers.
func infoFromHeaders(bucket, p string, resp *http.Response) ObjectInfo {
	h := resp.Header
	info := ObjectInfo{Bucket: bucket, Path: p, ContentType: h.Get("Content-Type")}
	info.Size = resp.ContentLength
	if cr := h.Get("Content-Range"); cr != "" {
		if i := strings.LastIndexByte(cr, '/'); i >= 0 {
			if n, err := strconv.ParseInt(cr[i+1:], 10, 64); err == nil {
				info.Size = n
			}
		}
	}
	if info.Size < 0 {
		info.Size = 0
	}
	info.ETag = unquoteETag(h.Get("ETag"))
	info.SHA256 = sha256FromDigest(h.Get("Repr-Digest"))
	if t, err := http.ParseTime(h.Get("Last-Modified")); err == nil {
		info.ModTime = t
	}
	// Not in the contract, but precise when a server sends them.
	if t, err := ParseMtime(h.Get("X-Cairn-Mtime")); err == nil {
		info.ModTime = t
	}
	if m, err := strconv.ParseUint(h.Get("X-Cairn-Mode"), 8, 32); err == nil {
		info.Mode = uint32(m)
	}
	return info
}

func unquoteETag(s string) string {
	s = strings.TrimPrefix(s, "W/")
	return strings.Trim(s, `"`)
}

// sha256FromDigest extracts the hex SHA-256 of a Repr-Digest header
// ("sha-256=:BASE64:", possibly among other algorithms).
func sha256FromDigest(s string) string {
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || !strings.EqualFold(k, "sha-256") {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(strings.Trim(v, ":"))
		if err != nil || len(raw) != 32 {
			return ""
		}
		return hex.EncodeToString(raw)
	}
	return ""
}

// joinPath joins bucket-relative path parts with "/", ignoring empty ones.
func joinPath(parts ...string) string {
	var nonEmpty []string
	for _, s := range parts {
		if s = strings.Trim(s, "/"); s != "" {
			nonEmpty = append(nonEmpty, s)
		}
	}
	return path.Join(nonEmpty...)
}
