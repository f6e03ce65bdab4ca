package fuse

import (
	"context"
)

// What the mount holds written and not yet queued needs the file's name
// to be published: the write-back queue takes the path from go-fuse's
// tree when it queues the content (writeback.enqueue). The kernel may
// forget an inode whenever nothing uses it (an invalidated entry, memory
// pressure, drop_caches), and go-fuse then takes the node out of the
// tree. With a FLUSH at every close that never mattered: a closed file
// was queued while the kernel still held it. In noflush mode a closed
// file waits for the idle publisher (noFlushIdle), and forgetting it
// first would lose what was written. So:
//
//   - a file created here is persistent in go-fuse's tree until it is
//     published or unlinked (Create, unpin): the kernel finds it again by
//     name (Lookup), and the publisher finds its path;
//   - a file that existed, written and forgotten before it was queued, is
//     queued when go-fuse forgets it (OnForget), under the path it had
//     when it was last made dirty (idleSet), if the store still has that
//     file there. A file whose name went meanwhile (another node renamed
//     or removed it or its directory) has no path to be published under:
//     its change is dropped, with a warning, as any change to a file
//     another node removed.

// unpin makes a file created here an ordinary node of go-fuse's tree once
// it is published or unlinked: the kernel's references keep it from then.
func (n *node) unpin() {
	n.mu.Lock()
	p := n.persist && !n.fresh
	if p {
		n.persist = false
	}
	n.mu.Unlock()
	if p {
		n.ForgetPersistent()
	}
}

// OnForget implements fs.NodeOnForgetter: go-fuse took n out of its tree.
// Content written and not queued is queued now (see above).
func (n *node) OnForget() {
	path, ok := n.m.idle.pathOf(n)
	if !ok || orphaned(path) || !n.dirtyUnqueued() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	ino := n.StableAttr().Ino
	if _, err := n.m.cfg.Store.StatIno(ctx, n.m.cfg.Bucket, path, ino); err != nil {
		n.mu.Lock()
		if w := n.write; w != nil && w.dirty {
			w.dirty = false
			n.m.cfg.Logger.Warn("mount: a file written here lost its name to another node's change before it was published; the change is dropped",
				"path", path, "ino", ino, "err", err)
		}
		n.mu.Unlock()
		return
	}
	n.mu.Lock()
	if w := n.write; w != nil && w.dirty && !n.gone {
		// Not throttled: this runs in go-fuse's FORGET, which must not
		// wait for the publisher.
		n.m.wb.enqueueAt(n, w, path)
	}
	n.mu.Unlock()
}

// dirtyUnqueued reports whether n holds content written and not queued.
func (n *node) dirtyUnqueued() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.write != nil && n.write.dirty && !n.gone
}
