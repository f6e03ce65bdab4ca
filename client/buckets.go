package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

func (c *Client) bucketsURL(name string) string {
	u := c.base + "/_cairn/buckets"
	if name != "" {
		u += "/" + url.PathEscape(name)
	}
	return u
}

func jsonRequest(method, u string, v any) (request, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return request{}, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return request{
		method: method, url: u,
		header: http.Header{"Content-Type": {"application/json"}},
		body:   bytes.NewReader(data), size: int64(len(data)),
	}, nil
}

// CreateBucket creates the bucket b (b.Created is ignored) and returns it as
// the server stored it. ErrConflict if it exists, ErrBadRequest for a bad name.
func (c *Client) CreateBucket(ctx context.Context, b BucketInfo) (BucketInfo, error) {
	if b.Name == "" {
		return BucketInfo{}, fmt.Errorf("create bucket: %w: empty name", ErrInvalidArgument)
	}
	body := struct {
		Name             string `json:"name"`
		Public           bool   `json:"public"`
		ChecksumSidecars bool   `json:"checksum_sidecars"`
		CacheControl     string `json:"cache_control"`
		Replicas         int    `json:"replicas,omitempty"`
		WriteQuorum      int    `json:"write_quorum,omitempty"`
		Strict           bool   `json:"strict,omitempty"`
		UID              uint32 `json:"uid,omitempty"`
		GID              uint32 `json:"gid,omitempty"`
		FileMode         uint32 `json:"file_mode,omitempty"`
		DirMode          uint32 `json:"dir_mode,omitempty"`
		TrashSeconds     int64  `json:"trash_seconds,omitempty"`
	}{b.Name, b.Public, b.ChecksumSidecars, b.CacheControl, b.Replicas, b.WriteQuorum, b.Strict, b.UID, b.GID, b.FileMode, b.DirMode, b.TrashSeconds}
	rq, err := jsonRequest(http.MethodPost, c.bucketsURL(""), body)
	if err != nil {
		return BucketInfo{}, err
	}
	var out BucketInfo
	if err := c.doJSON(ctx, rq, &out); err != nil {
		return BucketInfo{}, fmt.Errorf("create bucket %s: %w", b.Name, err)
	}
	return out, nil
}

// Bucket returns one bucket's options. ErrNotFound if there is none.
func (c *Client) Bucket(ctx context.Context, name string) (BucketInfo, error) {
	if name == "" {
		return BucketInfo{}, fmt.Errorf("bucket: %w: empty name", ErrInvalidArgument)
	}
	var out BucketInfo
	if err := c.doJSON(ctx, request{method: http.MethodGet, url: c.bucketsURL(name)}, &out); err != nil {
		return BucketInfo{}, fmt.Errorf("bucket %s: %w", name, err)
	}
	return out, nil
}

// UpdateBucket changes the non-nil fields of u and returns the bucket's new
// options. ErrNotFound if there is no such bucket.
func (c *Client) UpdateBucket(ctx context.Context, name string, u BucketUpdate) (BucketInfo, error) {
	if name == "" {
		return BucketInfo{}, fmt.Errorf("update bucket: %w: empty name", ErrInvalidArgument)
	}
	rq, err := jsonRequest(http.MethodPatch, c.bucketsURL(name), u)
	if err != nil {
		return BucketInfo{}, err
	}
	var out BucketInfo
	if err := c.doJSON(ctx, rq, &out); err != nil {
		return BucketInfo{}, fmt.Errorf("update bucket %s: %w", name, err)
	}
	return out, nil
}

// ListBuckets returns every bucket, in the server's order (by name).
func (c *Client) ListBuckets(ctx context.Context) ([]BucketInfo, error) {
	var out []BucketInfo
	if err := c.doJSON(ctx, request{method: http.MethodGet, url: c.bucketsURL("")}, &out); err != nil {
		return nil, fmt.Errorf("list buckets: %w", err)
	}
	return out, nil
}

// DeleteBucket removes an empty bucket. ErrConflict if it is not empty,
// ErrNotFound if there is none.
func (c *Client) DeleteBucket(ctx context.Context, name string) error {
	if name == "" {
		return fmt.Errorf("delete bucket: %w: empty name", ErrInvalidArgument)
	}
	resp, err := c.do(ctx, request{method: http.MethodDelete, url: c.bucketsURL(name)})
	if err != nil {
		return fmt.Errorf("delete bucket %s: %w", name, err)
	}
	drain(resp.Body)
	return nil
}

// doJSON sends rq and decodes a 2xx JSON answer into out.
func (c *Client) doJSON(ctx context.Context, rq request, out any) error {
	if rq.header == nil {
		rq.header = http.Header{}
	}
	rq.header.Set("Accept", "application/json")
	resp, err := c.do(ctx, rq)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		drain(resp.Body)
		return fmt.Errorf("%w: status %d", ErrProtocol, resp.StatusCode)
	}
	return decodeJSON(resp, out)
}
