package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// ExtractIssue is one archive entry a bulk upload did not store.
type ExtractIssue struct {
	Path   string `json:"path"`
	Error  string `json:"error,omitempty"`
	Code   string `json:"code,omitempty"`
	Status int    `json:"status,omitempty"`
	// Reason says why an entry was skipped: "symlink", "hardlink", "device"...
	Reason string `json:"reason,omitempty"`
}

// ExtractResult is the answer of a bulk upload (Extract).
type ExtractResult struct {
	// Files and Bytes: the regular files stored, and their bytes.
	Files int64 `json:"files"`
	Bytes int64 `json:"bytes"`
	// Dirs counts the empty directories created.
	Dirs int64 `json:"dirs"`
	// Failed counts the entries not stored (Errors lists up to 1000).
	Failed int64          `json:"failed"`
	Errors []ExtractIssue `json:"errors,omitempty"`
	// Skipped counts the entries of other types, such as symlinks
	// (SkippedItems lists up to 1000).
	Skipped      int64          `json:"skipped"`
	SkippedItems []ExtractIssue `json:"skipped_items,omitempty"`
	// Error and Code are set when the request failed as a whole (a cut or
	// malformed archive, a missing bucket); the files counted are stored
	// even then.
	Error string `json:"error,omitempty"`
	Code  string `json:"code,omitempty"`
}

// Extract uploads a tar archive (gzip-compressed if gz) and stores its
// regular files under bucket/prefix: POST /BUCKET/PREFIX/?extract=tar
// (docs/http-api.md, "Bulk upload"). size is the archive's length, or -1.
// The result is returned whenever the server answered with one, together
// with an *Error when some entry failed or the request as a whole did (the
// result then tells which files are stored).
func (c *Client) Extract(ctx context.Context, bucket, prefix string, archive io.Reader, size int64, gz bool) (ExtractResult, error) {
	if err := checkArgs("extract", bucket, "x"); err != nil {
		return ExtractResult{}, err
	}
	kind, ctype := "tar", "application/x-tar"
	if gz {
		kind, ctype = "tar.gz", "application/gzip"
	}
	rq := request{method: http.MethodPost, url: c.objectURL(bucket, prefix, true), body: archive, size: size,
		query:  map[string][]string{"extract": {kind}},
		header: http.Header{"Content-Type": {ctype}, "Accept": {"application/json"}}}
	if size < 0 {
		rq.size = -1
	}
	resp, err := c.send(ctx, rq)
	if err != nil {
		return ExtractResult{}, fmt.Errorf("extract into %s/%s: %w", bucket, strings.Trim(prefix, "/"), err)
	}
	defer drain(resp.Body)
	data, rerr := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	var res ExtractResult
	jerr := json.Unmarshal(data, &res)
	if resp.StatusCode < 400 {
		if rerr != nil || jerr != nil {
			return res, fmt.Errorf("extract into %s: %w: bad answer: %v", bucket, ErrProtocol, errorsJoin(rerr, jerr))
		}
		return res, nil
	}
	e := &Error{Status: resp.StatusCode, Message: http.StatusText(resp.StatusCode)}
	if jerr == nil {
		if res.Error != "" {
			e.Message = res.Error
		}
		e.Code = res.Code
	}
	return res, fmt.Errorf("extract into %s/%s: %w", bucket, strings.Trim(prefix, "/"), e)
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
