package admin

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/cairn-fs/cairn/internal/store"
)

// GET /_cairn/usage: bucket sizes (docs/http-api.md, "Bucket usage"). The
// namespace keeps no per-bucket totals, so they are counted by listing;
// the count is cached for usageTTL, and stops at usageMaxFiles per bucket
// (complete=false), so the admin page polling it every few seconds costs
// at most one listing per bucket per usageTTL.
const (
	usageTTL      = 30 * time.Second
	usageMaxFiles = 200_000
	usageTimeout  = 10 * time.Second
)

// bucketUsageJSON is one bucket in GET /_cairn/usage.
type bucketUsageJSON struct {
	Name     string `json:"name"`
	Files    int64  `json:"files"`
	Bytes    int64  `json:"bytes"`    // logical size: the sum of the files' sizes, one copy
	Complete bool   `json:"complete"` // false: counting stopped at usageMaxFiles or timed out
}

// usageJSON is the answer of GET /_cairn/usage.
type usageJSON struct {
	Buckets  []bucketUsageJSON `json:"buckets"`
	Computed time.Time         `json:"computed"`
}

// usageCache holds the last count; one count runs at a time.
type usageCache struct {
	mu   sync.Mutex
	last usageJSON
	at   time.Time // monotonic: when last was computed (Computed is wall time, UTC)
}

// serveUsage answers GET /_cairn/usage (authorized by adminOnly).
func (h *Handler) serveUsage(w http.ResponseWriter, r *http.Request) {
	c := &h.usage
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) > usageTTL {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), usageTimeout)
		u, err := countUsage(ctx, h.store)
		cancel()
		if err != nil {
			h.fail(w, r, err)
			return
		}
		c.last, c.at = u, time.Now()
	}
	h.writeJSON(w, r, http.StatusOK, c.last)
}

// countUsage lists every bucket of st and sums its files' sizes.
func countUsage(ctx context.Context, st Store) (usageJSON, error) {
	bs, err := st.Buckets(ctx)
	if err != nil {
		return usageJSON{}, fmt.Errorf("list buckets: %w", err)
	}
	u := usageJSON{Buckets: []bucketUsageJSON{}}
	for _, b := range bs {
		if ctx.Err() != nil {
			break // not counted at all: left out (the page shows …), not reported as 0 files
		}
		bu := bucketUsageJSON{Name: b.Name, Complete: true}
		after := ""
		for {
			if bu.Files >= usageMaxFiles || ctx.Err() != nil {
				bu.Complete = false
				break
			}
			res, err := st.List(ctx, b.Name, store.ListOptions{StartAfter: after, Limit: 1000})
			if err != nil {
				if ctx.Err() != nil {
					bu.Complete = false
					break
				}
				return usageJSON{}, fmt.Errorf("list bucket %s: %w", b.Name, err)
			}
			for _, e := range res.Entries {
				if !e.IsDir {
					bu.Files++
					bu.Bytes += e.Size
				}
			}
			if !res.Truncated || res.NextToken == "" {
				break
			}
			after = res.NextToken
		}
		u.Buckets = append(u.Buckets, bu)
	}
	u.Computed = time.Now().UTC()
	return u, nil
}
