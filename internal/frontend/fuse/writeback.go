package fuse

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-fs/cairn/internal/store"
)

// The write-back queue (see "Writes" in doc.go). A file's version is
// queued when the writer closes it (flush, release): its content, a
// temporary file nobody writes any more, and the node whose attributes it
// takes. One goroutine publishes the queue in order, consecutive small
// files together (store.PutFiles, committed in order), a large one alone
// (store.Put, streamed from its file). Any other change through the mount
// first waits for the queue to be empty (drain), so the mount's changes
// reach the cluster in the order they were made.

const (
	// smallFile: a file up to this size is published in a batch.
	smallFile = 1 << 20
	// batchFiles and batchBytes bound one batch of files; batchChanges
	// one batch of unlinks, directories and attribute changes.
	batchFiles   = 256
	batchBytes   = 32 << 20
	batchChanges = 1024
	// queueFiles and queueBytes bound the queue: a writer that closes a
	// file when it is full waits (its content is on disk, but a crash
	// loses what is queued, so the queue stays short).
	queueFiles = 4096
	queueBytes = 256 << 20
	// reserveInos is how many inode numbers the mount reserves at a time.
	reserveInos = 1024
	// settle: a version is published once it has been queued this long
	// (or the queue holds a batch), so that the chmod, chown and utimensat
	// a writer (tar, cp -p, rsync) makes just after close go with it, and
	// more files share a batch.
	settle = 2 * time.Millisecond
)

// opKind is what a queued item does.
type opKind uint8

const (
	opPublish opKind = iota // a file's new version
	opMkdir                 // a directory made through the mount
	opAttrs                 // a change of a node's owner, mode or times
	opUnlink                // a file name removed through the mount (n: its node, or nil)
)

// namespace reports whether k is a change without content, which the
// publisher batches into one store.ChangeMany.
func (k opKind) namespace() bool { return k == opMkdir || k == opAttrs || k == opUnlink }

// pending is one queued change: a file's version, a new directory, or new
// attributes (taken from the node's uncommitted attrs when it runs).
type pending struct {
	kind    opKind
	n       *node
	parent  *node   // opMkdir: the directory it is made in (whose link count counts it, node.kids)
	path    string  // the node's path when it was queued
	f       *buffer // opPublish: its content, owned by the queue
	size    int64
	at      time.Time     // when it was queued
	changed time.Time     // opPublish: the content\'s last change
	claim   store.Claim   // the directory claim it was decided under (own.go), or zero
	claim2  store.Claim   // a removed directory's own claim (rmdir), or zero
	dir     uint64        // its directory's inode number (0: unknown)
	done    chan struct{} // closed once published or failed
	err     error         // set before done is closed
	taken   atomic.Bool   // the publisher has started it
	seq     uint64        // its place in the queue (writeback.pushed when queued)
}

// writeback is a mount's queue of versions to publish.
type writeback struct {
	m    *Mount
	mu   sync.Mutex
	cond *sync.Cond // signalled when the queue or busy changes
	q    []*pending
	// pushed counts the items ever queued, finished the first ones that
	// are published or failed (the publisher takes them in order): drain
	// waits for the items queued before it, not for an empty queue, which
	// a busy writer may never leave.
	pushed, finished uint64
	busy             int // items the publisher has taken and not finished
	// flying are those items (a fresh file among them cannot be moved).
	flying []*pending
	bytes  int64          // queued bytes
	paths  map[string]int // queued items per path
	// unlinks counts the queued unlinks per path: until they are
	// published, the mount answers as if the names were gone.
	unlinks map[string]int
	// nsErr is the first error of a queued unlink, mkdir or attribute
	// change with no writer left to tell, since a directory's fsync last
	// returned it.
	nsErr  error
	stop   bool
	urgent bool // someone waits for the queue: publish without settling
	done   chan struct{}
	// busySince is when the oldest item being published was queued.
	busySince time.Time
	// published and failed count items published and failed (Stats).
	published, failed atomic.Uint64

	inoMu            sync.Mutex
	inoNext, inoLast uint64 // reserved [inoNext, inoLast)
}

func newWriteback(m *Mount) *writeback {
	wb := &writeback{m: m, done: make(chan struct{}), paths: map[string]int{}, unlinks: map[string]int{}}
	wb.cond = sync.NewCond(&wb.mu)
	go wb.run()
	return wb
}

// newIno returns an inode number for a file created through the mount,
// reserving a range from the store when the last one is used up.
func (wb *writeback) newIno(ctx context.Context) (uint64, error) {
	wb.inoMu.Lock()
	defer wb.inoMu.Unlock()
	if wb.inoNext == wb.inoLast {
		first, err := wb.m.cfg.Store.ReserveInos(ctx, reserveInos)
		if err != nil {
			return 0, err
		}
		wb.inoNext, wb.inoLast = first, first+reserveInos
	}
	ino := wb.inoNext
	wb.inoNext++
	return ino, nil
}

// enqueue queues n's content w (n.mu held): w gives up its file, and n's
// reads see the queued version until it is published.
func (wb *writeback) enqueue(n *node, w *content) *pending {
	return wb.enqueueAt(n, w, n.storePath())
}

// enqueueAt is enqueue to publish at path (a node the kernel forgot, and
// go-fuse took out of the tree: forget.go).
func (wb *writeback) enqueueAt(n *node, w *content, path string) *pending {
	p := &pending{kind: opPublish, n: n, path: path, f: w.f, size: w.size(), at: time.Now(),
		changed: w.changed, dir: n.parentIno(), done: make(chan struct{})}
	if orphaned(p.path) {
		wb.m.cfg.Logger.Warn("mount: a file lost its name in the mount before it was published; the change is dropped",
			"ino", n.StableAttr().Ino, "fresh", n.fresh)
	}
	if n.fresh {
		p.claim = n.claim // its create was decided under it
	}
	w.f, w.dirty = nil, false
	n.pend = p
	wb.push(p)
	return p
}

// errOrphan is the failure of a change queued for a node that had lost its
// name (go-fuse's placeholder path for an orphaned inode): publishing it
// would make a file of that name.
var errOrphan = errors.New("fuse: the file lost its name in the mount before it was published")

// orphaned reports whether path is go-fuse's placeholder for an inode
// that lost its parent.
func orphaned(path string) bool { return strings.Contains(path, ".go-fuse.") }

// enqueueOp queues a change of n at path, decided under claim (n.mu
// held): its attributes (opAttrs).
func (wb *writeback) enqueueOp(n *node, kind opKind, path string, claim store.Claim) *pending {
	p := &pending{kind: kind, n: n, path: path, at: time.Now(), claim: claim, done: make(chan struct{})}
	n.pendOp = p
	wb.push(p)
	return p
}

// enqueueMkdir queues the mkdir of directory n, made at path in parent
// under claim: parent's link count counts it until it settles.
func (wb *writeback) enqueueMkdir(parent, n *node, path string, claim store.Claim) {
	p := &pending{kind: opMkdir, n: n, parent: parent, path: path, at: time.Now(), claim: claim, done: make(chan struct{})}
	parent.mu.Lock()
	if parent.kids == nil {
		parent.kids = map[*pending]struct{}{}
	}
	parent.kids[p] = struct{}{}
	parent.mu.Unlock()
	n.mu.Lock()
	n.pendOp = p
	n.mu.Unlock()
	wb.push(p)
}

// enqueueUnlink queues the removal of file name path (n: its node, or nil):
// from now on the mount answers as if it were gone.
func (wb *writeback) enqueueUnlink(n *node, path string, claim store.Claim) {
	wb.push(&pending{kind: opUnlink, n: n, path: path, at: time.Now(), claim: claim, done: make(chan struct{})})
}

// enqueueRmdir queues the removal of empty directory path, decided under
// its parent's claim and its own: from now on the mount answers as if it
// were gone.
func (wb *writeback) enqueueRmdir(path string, parent, own store.Claim) {
	wb.push(&pending{kind: opUnlink, path: path, at: time.Now(), claim: parent, claim2: own, done: make(chan struct{})})
}

// unlinking reports whether an unlink of path is queued and not yet
// published (the name is gone for the mount).
func (wb *writeback) unlinking(path string) bool {
	wb.mu.Lock()
	defer wb.mu.Unlock()
	return wb.unlinks[path] > 0
}

// only reports whether every change queued at path is an unlink (gone)
// and whether any is queued.
func (wb *writeback) only(path string) (gone, queued bool) {
	wb.mu.Lock()
	defer wb.mu.Unlock()
	return wb.unlinks[path] > 0 && wb.unlinks[path] == wb.paths[path], wb.paths[path] > 0
}

// takeNsErr returns and forgets the first error of a queued namespace
// change since the last call.
func (wb *writeback) takeNsErr() error {
	wb.mu.Lock()
	defer wb.mu.Unlock()
	err := wb.nsErr
	wb.nsErr = nil
	return err
}

func (wb *writeback) push(p *pending) {
	wb.mu.Lock()
	wb.pushed++
	p.seq = wb.pushed
	wb.q = append(wb.q, p)
	wb.bytes += p.size
	if p.kind == opUnlink {
		wb.unlinks[p.path]++
	}
	wb.paths[p.path]++
	wb.cond.Broadcast()
	wb.mu.Unlock()
}

// move gives fresh file c (never published) the path dst in directory
// dir, decided under claim: its queued version, if any, is published
// there instead, and so is what it queues later. False when its version
// is already being published (the caller renames in the log).
func (wb *writeback) move(c *node, dst string, dir uint64, claim store.Claim) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fresh || c.gone {
		return false
	}
	wb.mu.Lock()
	defer wb.mu.Unlock()
	for _, p := range wb.flying {
		if p.n == c {
			return false // being published under its old name
		}
	}
	for _, p := range wb.q {
		if p.n != c {
			continue
		}
		if wb.paths[p.path]--; wb.paths[p.path] <= 0 {
			delete(wb.paths, p.path)
		}
		p.path, p.dir, p.claim = dst, dir, claim
		wb.paths[p.path]++
	}
	c.claim = claim
	wb.m.own.mu.Lock()
	if _, ok := wb.m.own.fresh[c]; ok {
		wb.m.own.fresh[c] = dir
	}
	wb.m.own.mu.Unlock()
	return true
}

// queued reports whether a change of path is queued or being published.
func (wb *writeback) queued(path string) bool {
	wb.mu.Lock()
	defer wb.mu.Unlock()
	return wb.paths[path] > 0
}

// throttle waits while the queue is full (never with a node's lock held).
func (wb *writeback) throttle() {
	wb.mu.Lock()
	for !wb.stop && (len(wb.q) > queueFiles || wb.bytes > queueBytes) {
		wb.cond.Wait()
	}
	wb.mu.Unlock()
}

// hurry makes the publisher take what is queued without settling.
func (wb *writeback) hurry() {
	wb.mu.Lock()
	wb.urgent = true
	wb.cond.Broadcast()
	wb.mu.Unlock()
}

// drain waits until everything queued so far is published (or failed).
func (wb *writeback) drain() {
	wb.mu.Lock()
	for target := wb.pushed; wb.finished < target; {
		wb.urgent = true
		wb.cond.Broadcast()
		wb.cond.Wait()
	}
	wb.mu.Unlock()
}

// close publishes what is queued and stops the publisher.
func (wb *writeback) close() {
	wb.mu.Lock()
	wb.stop = true
	wb.cond.Broadcast()
	wb.mu.Unlock()
	<-wb.done
}

// run publishes the queue in order until close.
func (wb *writeback) run() {
	defer close(wb.done)
	for {
		wb.mu.Lock()
		for len(wb.q) == 0 && !wb.stop {
			wb.cond.Wait()
		}
		if len(wb.q) == 0 {
			wb.mu.Unlock()
			return
		}
		if wait := settle - time.Since(wb.q[0].at); wait > 0 && len(wb.q) < batchFiles && !wb.stop && !wb.urgent {
			wb.mu.Unlock()
			time.Sleep(wait)
			continue
		}
		wb.urgent = false
		k, bytes := 1, wb.q[0].size
		switch {
		case wb.q[0].kind == opPublish && wb.q[0].size <= smallFile:
			for k < len(wb.q) && k < batchFiles && wb.q[k].kind == opPublish && wb.q[k].size <= smallFile && bytes+wb.q[k].size <= batchBytes {
				bytes += wb.q[k].size
				k++
			}
		case wb.q[0].kind.namespace():
			// Unlinks, directories and attribute changes in a row: one
			// batch (store.ChangeMany). An attribute change reads its
			// path's inode before the batch applies, so it must not follow
			// a directory made in the same batch at that path.
			made := map[string]bool{}
			if wb.q[0].kind == opMkdir {
				made[wb.q[0].path] = true
			}
			for k < len(wb.q) && k < batchChanges && wb.q[k].kind.namespace() && !(wb.q[k].kind == opAttrs && made[wb.q[k].path]) {
				if wb.q[k].kind == opMkdir {
					made[wb.q[k].path] = true
				}
				k++
			}
		}
		batch := wb.q[:k:k]
		wb.q = wb.q[k:]
		wb.busy = k
		wb.flying = batch
		wb.busySince = batch[0].at
		for _, p := range batch {
			p.taken.Store(true)
		}
		wb.mu.Unlock()

		if batch[0].kind == opPublish {
			wb.publish(batch)
		} else {
			wb.applyBatch(batch)
		}

		wb.mu.Lock()
		wb.busy = 0
		wb.flying = nil
		wb.finished = batch[k-1].seq
		wb.bytes -= bytes
		for _, p := range batch {
			if wb.paths[p.path]--; wb.paths[p.path] <= 0 {
				delete(wb.paths, p.path)
			}
			if p.kind == opUnlink {
				if wb.unlinks[p.path]--; wb.unlinks[p.path] <= 0 {
					delete(wb.unlinks, p.path)
				}
				if p.err != nil && wb.nsErr == nil {
					wb.nsErr = p.err
				}
			}
		}
		wb.cond.Broadcast()
		wb.mu.Unlock()
	}
}

// count counts one item published (err nil) or failed.
func (wb *writeback) count(err error) {
	if err != nil {
		wb.failed.Add(1)
	} else {
		wb.published.Add(1)
	}
}

// applyBatch makes a batch of queued unlinks, directories and attribute
// changes, in order: one store.ChangeMany when the store takes batches
// (a directory given times or an owner after it was made gets them in a
// second one), else one call each.
func (wb *writeback) applyBatch(batch []*pending) {
	cfg := wb.m.cfg
	ctx, cancel := context.WithTimeout(changeCtx(context.Background()), writeTimeout+time.Duration(len(batch)/64)*time.Second)
	defer cancel()
	changes := make([]store.Change, len(batch))
	gens := make([]uint64, len(batch))
	var later []int // directories whose attributes changed since they were queued
	for i, p := range batch {
		switch p.kind {
		case opMkdir:
			a, gen := p.n.attrsNow()
			gens[i] = gen
			changes[i] = store.Change{Kind: store.ChangeMkdir, Path: p.path,
				Attrs: store.Attrs{Mode: a.mode, UID: a.uid, GID: a.gid, Explicit: true, Exclusive: true, Ino: p.n.StableAttr().Ino}}
			if gen > 0 { // changed since (tar sets a directory's times and owner)
				later = append(later, i)
			}
		case opAttrs:
			a, gen := p.n.attrsNow()
			gens[i] = gen
			changes[i] = store.Change{Kind: store.ChangeSetAttrs, Path: p.path, Set: a.set()}
		case opUnlink:
			changes[i] = store.Change{Kind: store.ChangeDelete, Path: p.path}
		}
		changes[i].Decided, changes[i].Claims = true, wb.m.claims(p) // own.go
	}
	errs := wb.changeMany(ctx, changes)
	if len(later) > 0 {
		var more []store.Change
		var at []int
		for _, i := range later {
			if errs[i] == nil {
				a, _ := batch[i].n.attrsNow()
				more = append(more, store.Change{Kind: store.ChangeSetAttrs, Path: batch[i].path, Set: a.set(), Decided: true})
				at = append(at, i)
			}
		}
		for k, err := range wb.changeMany(ctx, more) {
			errs[at[k]] = err
		}
	}
	for i, p := range batch {
		err := errs[i]
		if p.kind == opUnlink && errors.Is(err, store.ErrNotFound) {
			err = nil // gone already (another node removed it): the name is gone, as asked
		}
		wb.count(err)
		if err != nil {
			cfg.Logger.Warn("mount: a queued change failed; it is reported at the next fsync or close",
				"path", p.path, "err", err)
		}
		if p.kind == opUnlink {
			p.err = err
			close(p.done)
			continue
		}
		p.n.published(ctx, p, gens[i], err)
	}
}

// changeMany makes cs through the store's batch call, or one call each.
func (wb *writeback) changeMany(ctx context.Context, cs []store.Change) []error {
	cfg := wb.m.cfg
	if bc, ok := cfg.Store.(store.BatchChanger); ok {
		return bc.ChangeMany(ctx, cfg.Bucket, cs)
	}
	errs := make([]error, len(cs))
	for i, c := range cs {
		switch c.Kind {
		case store.ChangeMkdir:
			errs[i] = cfg.Store.Mkdir(ctx, cfg.Bucket, c.Path, c.Attrs)
		case store.ChangeSetAttrs:
			_, errs[i] = cfg.Store.SetAttrs(ctx, cfg.Bucket, c.Path, c.Set)
		case store.ChangeDelete:
			errs[i] = cfg.Store.Delete(ctx, cfg.Bucket, c.Path, "")
		}
	}
	return errs
}

// publish stores one batch, in order, and settles each item.
func (wb *writeback) publish(batch []*pending) {
	cfg := wb.m.cfg
	var bytes int64
	opts := make([]store.PutOptions, len(batch))
	gens := make([]uint64, len(batch))
	for i, p := range batch {
		opts[i], gens[i] = p.n.putOptions(p.size)
		opts[i].Decided, opts[i].Claims = true, wb.m.claims(p) // own.go
		bytes += p.size
	}
	// Bounded: a node without its write quorum fails the batch (and the
	// writers hear of it) instead of holding the queue forever.
	ctx, cancel := context.WithTimeout(changeCtx(context.Background()), writeTimeout+time.Duration(bytes>>20)*time.Second)
	defer cancel()
	errs := make([]error, len(batch))
	bp, ok := cfg.Store.(store.BatchPutter)
	if len(batch) == 1 || !ok {
		for i, p := range batch {
			if orphaned(p.path) {
				errs[i] = errOrphan
				continue
			}
			_, _, errs[i] = cfg.Store.Put(ctx, cfg.Bucket, p.path, io.NewSectionReader(p.f, 0, p.size), opts[i])
		}
	} else {
		files := make([]store.FilePut, 0, len(batch))
		at := make([]int, 0, len(batch))
		for i, p := range batch {
			if orphaned(p.path) {
				errs[i] = errOrphan
				continue
			}
			data, ok := p.f.Bytes()
			if !ok {
				data = make([]byte, p.size)
				if _, err := p.f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
					errs[i] = err
				}
			}
			files = append(files, store.FilePut{Path: p.path, Data: data, Opts: opts[i]})
			at = append(at, i)
		}
		for k, r := range bp.PutFiles(ctx, cfg.Bucket, files) {
			if errs[at[k]] == nil {
				errs[at[k]] = r.Err
			}
		}
	}
	for i, p := range batch {
		wb.count(errs[i])
		if errs[i] != nil {
			cfg.Logger.Warn("mount: publishing a written file failed; the writer gets EIO at its next fsync or close",
				"path", p.path, "err", errs[i])
		}
		p.n.published(ctx, p, gens[i], errs[i])
	}
}
