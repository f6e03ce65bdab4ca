package node

// Mounts (--mount BUCKET[/PREFIX]:DIR[:OPTIONS], repeatable): the POSIX front end
// (internal/frontend/fuse) runs inside the node process over its store.
// They start once the node serves (in a cluster, bucket creation needs
// the log), and are unmounted first at Close, before the store closes.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-fs/cairn/internal/frontend/fuse"
	"github.com/cairn-fs/cairn/internal/store"
)

// mountStartTimeout bounds the start of one mount (the bucket's creation
// waits for a Raft leader in a new cluster).
const mountStartTimeout = 60 * time.Second

// startMounts mounts every cfg.Mounts spec.
func (n *Node) startMounts() error {
	if len(n.cfg.Mounts) == 0 {
		return nil
	}
	tmp := filepath.Join(n.cfg.DataDir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return fmt.Errorf("mount: %w", err)
	}
	for _, spec := range n.cfg.Mounts {
		sp, err := fuse.ParseSpec(spec)
		if err != nil {
			return err
		}
		var locks store.Locker = n.store
		if sp.NoLocks {
			locks = nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), mountStartTimeout)
		var m *fuse.Mount
		for {
			m, err = fuse.New(ctx, fuse.Config{Store: n.store, Watch: func(w store.Watcher) func() { return n.store.Watch(w) },
				Bucket: sp.Bucket, Prefix: sp.Prefix, Dir: sp.Dir, TmpDir: tmp, Logger: n.cfg.Logger, Capacity: n.clusterCapacity,
				NoOpen: !n.cfg.MountHandles && !sp.Handles, Locks: locks})
			// A new cluster has no leader for a moment: creating the
			// bucket waits for one.
			if err == nil || !errors.Is(err, store.ErrUnavailable) || ctx.Err() != nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("--mount %s: %w", spec, err)
		}
		n.mountsMu.Lock()
		n.mounts = append(n.mounts, m)
		n.mountsMu.Unlock()
	}
	return nil
}

// closeMounts unmounts every mount, last first.
func (n *Node) closeMounts() error {
	n.mountsMu.Lock()
	ms := n.mounts
	n.mounts = nil
	n.mountsMu.Unlock()
	var errs []error
	for i := len(ms) - 1; i >= 0; i-- {
		errs = append(errs, ms[i].Close())
	}
	return errors.Join(errs...)
}
