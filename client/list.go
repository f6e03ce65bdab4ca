package client

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// List returns one page of the listing of directory dir of bucket ("" is the
// bucket's root). Paths in the result are full paths inside the bucket.
// ErrNotFound if the directory does not exist; ErrProtocol if the server
// answered with something other than a JSON listing (an index.html page).
func (c *Client) List(ctx context.Context, bucket, dir string, opts ListOptions) (ListResult, error) {
	if bucket == "" || strings.Contains(bucket, "/") {
		return ListResult{}, fmt.Errorf("list: %w: bad bucket name %q", ErrInvalidArgument, bucket)
	}
	dir = strings.Trim(dir, "/")
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
	rq := request{method: http.MethodGet, url: c.objectURL(bucket, dir, true), query: q,
		header: http.Header{"Accept": {"application/json"}}}
	resp, err := c.do(ctx, rq)
	if err != nil {
		return ListResult{}, fmt.Errorf("list %s/%s: %w", bucket, dir, err)
	}
	if resp.StatusCode >= 300 {
		drain(resp.Body)
		return ListResult{}, fmt.Errorf("list %s/%s: %w: status %d", bucket, dir, ErrProtocol, resp.StatusCode)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		drain(resp.Body)
		return ListResult{}, fmt.Errorf("list %s/%s: %w: got %q instead of a JSON listing", bucket, dir, ErrProtocol, mt)
	}
	var out ListResult
	if err := decodeJSON(resp, &out); err != nil {
		return ListResult{}, fmt.Errorf("list %s/%s: %w", bucket, dir, err)
	}
	for i := range out.Entries {
		if out.Entries[i].Bucket == "" {
			out.Entries[i].Bucket = bucket
		}
	}
	return out, nil
}

// ListPages calls fn with each page of the listing of bucket/dir, following
// NextToken from opts.After on, until the listing ends, fn returns an error
// (returned as is) or ctx is done. Pages are fetched one after the other.
func (c *Client) ListPages(ctx context.Context, bucket, dir string, opts ListOptions, fn func(ListResult) error) error {
	return eachPage(opts, fmt.Sprintf("list %s/%s", bucket, dir), func(o ListOptions) (ListResult, error) {
		return c.List(ctx, bucket, dir, o)
	}, fn)
}

// eachPage calls fn with each page list returns, following NextToken from
// opts.After on, until the listing ends or either returns an error; what
// names the listing in an error.
func eachPage(opts ListOptions, what string, list func(ListOptions) (ListResult, error), fn func(ListResult) error) error {
	for {
		page, err := list(opts)
		if err != nil {
			return err
		}
		if err := fn(page); err != nil {
			return err
		}
		if !page.Truncated {
			return nil
		}
		if page.NextToken == "" || page.NextToken == opts.After {
			return fmt.Errorf("%s: %w: truncated page without a new next token", what, ErrProtocol)
		}
		opts.After = page.NextToken
	}
}

// ListAll returns the whole listing of bucket/dir in one ListResult
// (Truncated false), following pagination. For very large trees prefer
// ListPages, which does not hold every entry at once.
func (c *Client) ListAll(ctx context.Context, bucket, dir string, opts ListOptions) (ListResult, error) {
	var all ListResult
	err := c.ListPages(ctx, bucket, dir, opts, func(p ListResult) error {
		all.Entries = append(all.Entries, p.Entries...)
		all.CommonPrefixes = append(all.CommonPrefixes, p.CommonPrefixes...)
		return nil
	})
	if err != nil {
		return ListResult{}, err
	}
	return all, nil
}

// RemoveAll deletes bucket/p: a file, or a directory with everything below
// it (files first, up to 8 at a time, then directories deepest first, then
// the directory itself). It returns how many files and directories it
// deleted. A directory is walked one non-recursive listing per directory, so
// that empty subdirectories are found too. ErrNotFound if nothing is at p.
// On failure it stops after the current batch and returns the first error.
func (c *Client) RemoveAll(ctx context.Context, bucket, p string) (files, dirs int, err error) {
	p = strings.Trim(cleanPath(p), "/")
	if bucket == "" {
		return 0, 0, fmt.Errorf("remove: %w: empty bucket name", ErrInvalidArgument)
	}
	if p != "" {
		info, err := c.Stat(ctx, bucket, p)
		if err != nil {
			return 0, 0, err
		}
		err = c.Delete(ctx, bucket, p)
		switch {
		case err == nil && info.IsDir:
			return 0, 1, nil
		case err == nil:
			return 1, 0, nil
		case !info.IsDir || !errors.Is(err, ErrConflict):
			return 0, 0, err
		}
	}
	var fileList, dirList []string
	queue := []string{p}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		if d != p {
			dirList = append(dirList, d)
		}
		err := c.ListPages(ctx, bucket, d, ListOptions{}, func(page ListResult) error {
			for _, e := range page.Entries {
				if e.IsDir {
					queue = append(queue, strings.Trim(e.Path, "/"))
				} else {
					fileList = append(fileList, e.Path)
				}
			}
			for _, cp := range page.CommonPrefixes {
				queue = append(queue, strings.Trim(cp, "/"))
			}
			return nil
		})
		if err != nil {
			return files, dirs, err
		}
	}
	// Files, in parallel.
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		work     = make(chan string)
	)
	for range min(8, len(fileList)) {
		wg.Go(func() {
			for f := range work {
				if err := c.Delete(ctx, bucket, f); err != nil && !errors.Is(err, ErrNotFound) {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				mu.Lock()
				files++
				mu.Unlock()
			}
		})
	}
feed:
	for _, f := range fileList {
		mu.Lock()
		stop := firstErr != nil
		mu.Unlock()
		if stop {
			break
		}
		select {
		case work <- f:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return files, dirs, firstErr
	}
	if err := ctx.Err(); err != nil {
		return files, dirs, err
	}
	// Directories, deepest first.
	sort.SliceStable(dirList, func(i, j int) bool {
		return strings.Count(dirList[i], "/") > strings.Count(dirList[j], "/")
	})
	if p != "" {
		dirList = append(dirList, p)
	}
	for _, d := range dirList {
		if err := c.Delete(ctx, bucket, d); err != nil && !errors.Is(err, ErrNotFound) {
			return files, dirs, err
		}
		dirs++
	}
	return files, dirs, nil
}
