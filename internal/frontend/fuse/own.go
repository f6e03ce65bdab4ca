package fuse

import (
	"context"
	"errors"
	"sync"
	"syscall"

	"github.com/cairn-fs/cairn/internal/store"
)

// Directory ownership (design 0008). The mount decides creates, mkdirs
// and unlinks locally and publishes them later; it may do so only in a
// directory this node owns. Create, Mkdir and Unlink therefore take the
// directory's claim first (own: free when the node owns it, a commit to
// claim it, a recall when another node does), decide against the
// namespace as this node has applied it plus the mount's queue, queue the
// change with the claim, and let the claim go. The log refuses a queued
// change whose claim has moved (the node lost its session): it is
// returned as EIO by the next fsync or close. Every other change (rmdir,
// rename, link, symlink) is decided in the log by the store, which first
// has the mount publish what it decided in the directories concerned
// (FlushDir).

// ownership is the mount's side of the store's directory ownership.
type ownership struct {
	o       store.DirOwners // nil: the store has none (the mount decides alone)
	rootIno uint64          // the mount's root directory in the namespace
	unhold  func()

	mu    sync.Mutex
	fresh map[*node]uint64 // files created here and never published, by directory
}

// dirIno is directory n's inode number in the namespace.
func (n *node) dirIno() uint64 {
	if n.IsRoot() {
		return n.m.own.rootIno
	}
	return n.StableAttr().Ino
}

// own takes directory n's claim for a decision in it; done must be called
// once the decision is queued. Without ownership (a store without it, a
// cluster not yet upgraded to it) the claim is zero and the mount decides
// alone, as before.
func (n *node) own(ctx context.Context) (store.Claim, func(), syscall.Errno) {
	o := n.m.own.o
	if o == nil {
		return store.Claim{}, func() {}, 0
	}
	name := n.m.cfg.Bucket + "/" + n.storePath()
	c, done, err := o.Own(ctx, n.dirIno(), name)
	if errors.Is(err, store.ErrLockLost) {
		c, done, err = o.Own(ctx, n.dirIno(), name) // a new session
	}
	switch {
	case errors.Is(err, store.ErrNotUpgraded):
		return store.Claim{}, func() {}, 0
	case err != nil:
		return store.Claim{}, nil, n.m.failed("claim", n.storePath(), err)
	}
	return c, done, 0
}

// failed is the errno of a namespace change of path that returned err,
// logged when it is EIO: the caller sees no more than that.
func (m *Mount) failed(op, path string, err error) syscall.Errno {
	e := errno(err)
	if e == syscall.EIO {
		m.cfg.Logger.Warn("mount: a change failed", "op", op, "path", path, "err", err)
	}
	return e
}

// adopt records that directory c, made in n under claim, is owned under
// the same claim.
func (n *node) adopt(c *node, p string, claim store.Claim) {
	if o := n.m.own.o; o != nil && claim.Dir != 0 {
		o.Adopt(c.StableAttr().Ino, n.m.cfg.Bucket+"/"+p, claim)
	}
}

// addFresh remembers file c, created in directory dir and not published
// yet: a recall of dir publishes it (FlushDir).
func (m *Mount) addFresh(c *node, dir uint64) {
	m.own.mu.Lock()
	if m.own.fresh == nil {
		m.own.fresh = map[*node]uint64{}
	}
	m.own.fresh[c] = dir
	m.own.mu.Unlock()
}

// dropFresh forgets c (published, or unlinked).
func (m *Mount) dropFresh(c *node) {
	m.own.mu.Lock()
	delete(m.own.fresh, c)
	m.own.mu.Unlock()
}

// FlushDir implements store.Holder: the files created in dir and still
// open are queued with the content they have, and the queue is
// published.
func (m *Mount) FlushDir(ctx context.Context, dir uint64) {
	m.own.mu.Lock()
	var ns []*node
	for c, d := range m.own.fresh {
		if d == dir {
			ns = append(ns, c)
		}
	}
	m.own.mu.Unlock()
	for _, c := range ns {
		c.queueDirty()
	}
	m.wb.drain()
}

// claims are the directory claims a queued change p is published under:
// the ones it was decided under (a create, a mkdir, an unlink, an rmdir).
// A new version of a file that exists changes no name and carries none:
// the log fences a stamped command whole, and a claim that moved since
// would refuse a mere content change.
func (m *Mount) claims(p *pending) []store.Claim {
	switch {
	case p.claim.Dir != 0 && p.claim2.Dir != 0:
		return []store.Claim{p.claim, p.claim2}
	case p.claim.Dir != 0:
		return []store.Claim{p.claim}
	}
	return nil
}

// parentIno is the namespace inode number of n's directory (0 unknown).
func (n *node) parentIno() uint64 {
	_, p := n.Parent()
	if p == nil {
		return 0
	}
	if pn, ok := p.Operations().(*node); ok {
		return pn.dirIno()
	}
	return 0
}
