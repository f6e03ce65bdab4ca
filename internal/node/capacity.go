package node

import (
	"context"
	"sync"
	"time"

	"github.com/cairn-fs/cairn/internal/frontend/admin"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/vfs"
)

// capacityTTL is how long the cluster's capacity is kept: a mount's
// statfs (df, PHP's disk_free_space) must not ask every member each time.
const capacityTTL = 10 * time.Second

// capacityCache is the last answer of clusterCapacity.
type capacityCache struct {
	mu          sync.Mutex
	at          time.Time
	total, free uint64
}

// clusterCapacity is the room the cluster has for files: the sum of its
// data nodes' disks (their own reports, as in `cairn status`), total and
// free, divided by the copies each file takes (R = 3, capped at the data
// nodes). Members that do not answer within a second are counted as the
// average of those that did. A lone node reports its own disk.
func (n *Node) clusterCapacity(ctx context.Context) (total, free uint64, err error) {
	cc := &n.capacity
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if !cc.at.IsZero() && time.Since(cc.at) < capacityTTL {
		return cc.total, cc.free, nil
	}
	f, t, err := vfs.OS().Statfs(n.cfg.DataDir)
	if err != nil {
		return 0, 0, err
	}
	total, free = t, f
	if c := n.cl; c != nil {
		nodes, err := c.reader.Nodes()
		if err != nil {
			return 0, 0, err
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		data, reporting := 0, 1
		for _, nd := range nodes {
			if nd.Witness || nd.State == meta.NodeClient {
				continue
			}
			data++
			if nd.ID == c.id || nd.URL == "" {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				rep, err := admin.FetchLocalStatus(pctx, n.peerDo, nd.ID, nd.URL, "Bearer "+n.AdminKey)
				if err != nil || rep.Disk.TotalBytes <= 0 {
					return
				}
				mu.Lock()
				total += uint64(rep.Disk.TotalBytes)
				free += uint64(rep.Disk.FreeBytes)
				reporting++
				mu.Unlock()
			}()
		}
		wg.Wait()
		// The members that answered stand for those that did not.
		data = max(data, reporting)
		r := uint64(min(data, 3))
		total = total / uint64(reporting) * uint64(data) / r
		free = free / uint64(reporting) * uint64(data) / r
	}
	cc.at, cc.total, cc.free = time.Now(), total, free
	return total, free, nil
}
