package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Snapshot is a bucket's read-only, point-in-time copy (docs/operations.md,
// "Snapshots"). It mirrors the server's JSON.
type Snapshot struct {
	Bucket  string    `json:"bucket"`
	Name    string    `json:"name"`
	ID      uint64    `json:"id,string"`
	Created time.Time `json:"created"`
	Index   uint64    `json:"index"`
}

func (c *Client) snapshotsURL(bucket, name string) string {
	u := c.base + "/_cairn/snapshots/" + url.PathEscape(bucket)
	if name != "" {
		u += "/" + url.PathEscape(name)
	}
	return u
}

// CreateSnapshot takes a snapshot of bucket named name ("" names it by the
// time). ErrConflict if the name is taken.
func (c *Client) CreateSnapshot(ctx context.Context, bucket, name string) (Snapshot, error) {
	rq, err := jsonRequest(http.MethodPost, c.snapshotsURL(bucket, ""), map[string]string{"name": name})
	if err != nil {
		return Snapshot{}, err
	}
	var out Snapshot
	if err := c.doJSON(ctx, rq, &out); err != nil {
		return Snapshot{}, fmt.Errorf("snapshot %s: %w", bucket, err)
	}
	return out, nil
}

// Snapshots lists a bucket's snapshots, oldest first.
func (c *Client) Snapshots(ctx context.Context, bucket string) ([]Snapshot, error) {
	var out []Snapshot
	if err := c.doJSON(ctx, request{method: http.MethodGet, url: c.snapshotsURL(bucket, "")}, &out); err != nil {
		return nil, fmt.Errorf("snapshots of %s: %w", bucket, err)
	}
	return out, nil
}

// DeleteSnapshot deletes one. ErrNotFound if there is none of that name.
func (c *Client) DeleteSnapshot(ctx context.Context, bucket, name string) error {
	resp, err := c.do(ctx, request{method: http.MethodDelete, url: c.snapshotsURL(bucket, name)})
	if err != nil {
		return fmt.Errorf("delete snapshot %s/%s: %w", bucket, name, err)
	}
	drain(resp.Body)
	return nil
}

// RestoreStats says what a snapshot restore did.
type RestoreStats struct {
	Restored  int `json:"restored"`
	Unchanged int `json:"unchanged"`
	Dirs      int `json:"dirs"`
	Deleted   int `json:"deleted"`
}

// RestoreSnapshot puts path ("" the whole bucket) of a snapshot back, at
// to ("" the same path); with del, the live files under it that the
// snapshot does not hold are deleted. No byte is copied.
func (c *Client) RestoreSnapshot(ctx context.Context, bucket, name, path, to string, del bool) (RestoreStats, error) {
	rq, err := jsonRequest(http.MethodPost, c.snapshotsURL(bucket, name)+"/restore",
		map[string]any{"path": path, "to": to, "delete": del})
	if err != nil {
		return RestoreStats{}, err
	}
	var out RestoreStats
	if err := c.doJSON(ctx, rq, &out); err != nil {
		return RestoreStats{}, fmt.Errorf("restore snapshot %s/%s: %w", bucket, name, err)
	}
	return out, nil
}

// SnapshotSchedule is how many automatic snapshots of a bucket are kept
// per period (0: none of that period).
type SnapshotSchedule struct {
	Hourly int `json:"hourly"`
	Daily  int `json:"daily"`
	Weekly int `json:"weekly"`
}

// Schedule returns a bucket's snapshot schedule.
func (c *Client) Schedule(ctx context.Context, bucket string) (SnapshotSchedule, error) {
	var out SnapshotSchedule
	if err := c.doJSON(ctx, request{method: http.MethodGet, url: c.base + "/_cairn/snapshot-schedules/" + url.PathEscape(bucket)}, &out); err != nil {
		return out, fmt.Errorf("snapshot schedule of %s: %w", bucket, err)
	}
	return out, nil
}

// SetSchedule sets a bucket's snapshot schedule (all zero: none).
func (c *Client) SetSchedule(ctx context.Context, bucket string, sc SnapshotSchedule) (SnapshotSchedule, error) {
	rq, err := jsonRequest(http.MethodPut, c.base+"/_cairn/snapshot-schedules/"+url.PathEscape(bucket), sc)
	if err != nil {
		return sc, err
	}
	var out SnapshotSchedule
	if err := c.doJSON(ctx, rq, &out); err != nil {
		return out, fmt.Errorf("set the snapshot schedule of %s: %w", bucket, err)
	}
	return out, nil
}
