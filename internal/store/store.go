package store

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/consensus"
	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/placement"
	"github.com/cairn-fs/cairn/internal/replica"
	"github.com/cairn-fs/cairn/internal/transport"
)

// Config configures a Local store.
type Config struct {
	// Blobs is the node's blob store. Required.
	Blobs *blob.Store
	// KV is the node's namespace store. Required.
	KV kv.Store
	// Log orders namespace commands. Required.
	Log consensus.Log
	// GCGrace is how long an unreferenced blob is kept before it is deleted.
	// Default 15 minutes.
	GCGrace time.Duration
	// GCInterval is how often garbage is collected and volumes compacted.
	// Default 1 minute. Zero or negative: no background loop (call GC yourself).
	GCInterval time.Duration
	// PathCacheEntries bounds the in-memory cache of resolved paths.
	// Default 65536.
	PathCacheEntries int
	// ParallelBlobWrites is how many blobs of one upload may be in flight
	// (each holds up to blob.MaxSize bytes of memory). Default 4.
	ParallelBlobWrites int
	// ReadBarrierTimeout bounds Barrier (a consistent read's wait for the
	// leader's read index). Default 3 s.
	ReadBarrierTimeout time.Duration
	// ReplicaPutWait bounds how long a replica put waits for this node to
	// apply the uploader's start index (GuardReplicaPut). Default 5s.
	ReplicaPutWait time.Duration
	// Replication, if set, writes each blob to its replicas and reads blobs
	// this node lacks from them (a cluster). Nil: blobs are local only.
	Replication Replication
	// NodeID is this node's ID (its lock session's); default 1.
	NodeID uint64
	// LockLease is how long a node's file locks outlive its last renewal
	// when it stops renewing (dies, or is cut off). Default 5 s.
	LockLease time.Duration
	// IsLeader reports whether this node leads the log: the leader expires
	// the lock sessions of nodes that stopped renewing. Nil: always (one
	// node).
	IsLeader func() bool
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns a Config with defaults and no dependencies set.
func DefaultConfig() Config {
	return Config{GCGrace: 15 * time.Minute, GCInterval: time.Minute,
		PathCacheEntries: 65536, ParallelBlobWrites: 4, ReadBarrierTimeout: 3 * time.Second,
		ReplicaPutWait: 5 * time.Second}
}

// Validate reports a missing dependency or a bad value.
func (c *Config) Validate() error {
	switch {
	case c.Blobs == nil:
		return errors.New("store: Config.Blobs is required")
	case c.KV == nil:
		return errors.New("store: Config.KV is required")
	case c.Log == nil:
		return errors.New("store: Config.Log is required")
	case c.GCGrace < 0:
		return errors.New("store: GCGrace must not be negative")
	}
	return nil
}

// Replication moves blobs between the nodes of a cluster
// (replica.Replicator implements it).
type Replication interface {
	// WriteBlob stores blob h on its replicas under pol and returns once
	// the write is decided (see placement.Policy): W copies are durable,
	// or, not strict, every reachable target holds one. copies says how
	// many were made of how many wanted. The error wraps
	// replica.ErrNoQuorum when the write cannot succeed.
	WriteBlob(ctx context.Context, h blob.Hash, data []byte, pol placement.Policy) (placement.Copies, error)
	// ReadAt reads blob h from this node's copy or a replica's.
	ReadAt(ctx context.Context, h blob.Hash, p []byte, off int64) (int, error)
}

// DefaultReplicas is R for a bucket that does not set it.
const DefaultReplicas = 3

// Local is the Store of one node over its blob store and namespace.
type Local struct {
	cfg   Config
	blobs *blob.Store
	kv    kv.Store
	log   consensus.Log
	meta  *meta.Reader
	cache *pathCache
	pins  *pins
	del   *deleter
	reap  *reapGuard // blobs whose approved deletion has not run yet
	// syncMu serializes the KV syncs of GuardReplicaPut.
	syncMu sync.Mutex
	bufs   sync.Pool
	stop   chan struct{}
	wg     sync.WaitGroup
	// beforePropose, if set (tests), runs in Put between the blob writes
	// and the namespace command.
	beforePropose func()
	// afterBucketRead, if set (tests), runs in Bucket between the KV read
	// and the cache insert.
	afterBucketRead func()
	closed          sync.Once
	watch           watchers       // watch.go
	recWatch        recordWatchers // records.go
	locks           *lockSessions  // locks.go
}

var _ Store = (*Local)(nil)

// New returns a Local store. The caller keeps ownership of Blobs, KV and
// Log; wire Log's OnApply to the store's Applied method (see cmd/cairn).
func New(cfg Config) (*Local, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := DefaultConfig()
	if cfg.GCGrace == 0 {
		cfg.GCGrace = d.GCGrace
	}
	if cfg.PathCacheEntries <= 0 {
		cfg.PathCacheEntries = d.PathCacheEntries
	}
	if cfg.ParallelBlobWrites <= 0 {
		cfg.ParallelBlobWrites = d.ParallelBlobWrites
	}
	if cfg.ReadBarrierTimeout <= 0 {
		cfg.ReadBarrierTimeout = d.ReadBarrierTimeout
	}
	if cfg.ReplicaPutWait <= 0 {
		cfg.ReplicaPutWait = d.ReplicaPutWait
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.NodeID == 0 {
		cfg.NodeID = 1
	}
	if cfg.LockLease <= 0 {
		cfg.LockLease = DefaultLockLease
	}
	s := &Local{cfg: cfg, blobs: cfg.Blobs, kv: cfg.KV, log: cfg.Log,
		meta: meta.NewReader(cfg.KV), cache: newPathCache(cfg.PathCacheEntries),
		pins: newPins(), reap: newReapGuard(), stop: make(chan struct{})}
	s.bufs.New = func() any { b := make([]byte, blob.MaxSize); return &b }
	s.del = newDeleter(s.deleteBlob)
	s.locks = newLockSessions(cfg.NodeID, cfg.LockLease, cfg.Now())
	s.wg.Add(1)
	go s.lockLoop()
	if cfg.GCInterval > 0 {
		s.wg.Add(1)
		go s.gcLoop()
	}
	return s, nil
}

// Applied must be called after each log entry is applied (consensus
// OnApply): it drops stale cached paths and deletes blobs whose reclamation
// the entry approved.
func (s *Local) Applied(index uint64, cmds []meta.Command, res []meta.Result) {
	for i := range res {
		r := &res[i]
		all := r.ChangedAll
		if r.ChangedAll {
			s.cache.clear()
		}
		for _, p := range r.Changed {
			s.cache.drop(p)
		}
		switch cmds[i].Op {
		case meta.OpCreateBucket, meta.OpUpdateBucket, meta.OpDeleteBucket:
			s.cache.clear()
			all = true
		case meta.OpPutRecord, meta.OpDeleteRecord:
			if r.Err == nil {
				s.recordsChanged()
			}
		case meta.OpLock, meta.OpLockCancel, meta.OpLockSession, meta.OpLockExpire:
			s.appliedLocks(&cmds[i], r)
		}
		s.notify(r.Changed, all)
		if len(r.Freed) > 0 {
			// Deleting costs an fsync per blob (shared by group commit):
			// do it off the apply goroutine so namespace writes never wait.
			s.del.add(s.reap.reaped(index, r.Freed))
		}
	}
	s.reap.appliedTo(index)
	if s.reap.unsyncedReaps() > maxUnsyncedReaps {
		// Bound the memory of reapedAt: one sync makes them all durable.
		if err := s.kv.Sync(); err == nil {
			s.reap.didSync(index)
		}
	}
}

// Invalidate drops every cached path and bucket. The host calls it when the
// namespace changed wholesale (a Raft snapshot was installed).
func (s *Local) Invalidate() { s.cache.clear(); s.notify(nil, true); s.recordsChanged() }

// deleteBlob deletes the local copy of h unless an upload in flight holds
// it or the namespace references it again. Under the deletion guard no
// upload can start relying on the copy, and one that already committed a
// reference shows in the refcount.
func (s *Local) deleteBlob(h blob.Hash) {
	if !s.pins.startDelete(h) {
		s.reap.take(h) // an upload holds it: skipped, forget it
		s.cfg.Logger.Debug("approved deletion skipped: an upload holds the blob", "hash", h.String())
		return
	}
	defer s.pins.endDelete(h)
	if !s.reap.take(h) {
		s.cfg.Logger.Debug("approved deletion skipped: a replica put spared the blob", "hash", h.String())
		return // a replica put spared it since the reap (GuardReplicaPut)
	}
	if n, err := s.meta.RefCount(h); err != nil || n > 0 {
		s.cfg.Logger.Debug("approved deletion skipped: referenced again", "hash", h.String(), "refs", n, "err", err)
		return
	}
	if err := s.blobs.Delete(h); err != nil && !errors.Is(err, blob.ErrNotFound) {
		s.cfg.Logger.Warn("delete unreferenced blob", "hash", h.String(), "err", err)
	}
}

// Close stops background work. It does not close Blobs, KV or Log.
func (s *Local) Close() error {
	s.closed.Do(func() { close(s.stop) })
	s.wg.Wait()
	s.del.close()
	return nil
}

// mapErr translates errors of the layers below into the store's kinds.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if qe, ok := errors.AsType[*replica.QuorumError](err); ok {
		return &QuorumError{Reachable: qe.Reachable, Required: qe.Required, Strict: qe.Strict, Err: err}
	}
	table := []struct{ from, to error }{
		{meta.ErrNotFound, ErrNotFound},
		{meta.ErrNoBucket, ErrNoBucket},
		{meta.ErrBucketExists, ErrBucketExists},
		{meta.ErrBucketNotEmpty, ErrBucketNotEmpty},
		{meta.ErrExists, ErrExists},
		{meta.ErrNotEmpty, ErrNotEmpty},
		{meta.ErrIsDir, ErrIsDir},
		{meta.ErrNotDir, ErrNotDir},
		{meta.ErrInvalid, ErrInvalidName},
		{meta.ErrPrecondition, ErrPrecondition},
		{blob.ErrNoSpace, ErrNoSpace},
		{blob.ErrCorrupt, ErrCorrupt},
		{blob.ErrReadOnly, ErrReadOnly},
		{blob.ErrNotFound, ErrCorrupt}, // a referenced blob is missing
		{consensus.ErrStopped, ErrUnavailable},
		{consensus.ErrUnavailable, ErrUnavailable},
		{replica.ErrNoQuorum, ErrUnavailable}, // a *replica.QuorumError becomes a *QuorumError first
		{replica.ErrUnavailable, ErrUnavailable},
		{meta.ErrBlobReaped, ErrUnavailable}, // retries exhausted: the client may retry
	}
	for _, e := range table {
		if errors.Is(err, e.from) {
			if errors.Is(err, e.to) {
				return err
			}
			return fmt.Errorf("%w: %v", e.to, err)
		}
	}
	return err
}

func (s *Local) propose(ctx context.Context, cmd meta.Command) (meta.Result, error) {
	if cmd.TimeNs == 0 {
		cmd.TimeNs = s.cfg.Now().UnixNano()
	}
	res, err := s.log.Propose(ctx, cmd)
	if err != nil {
		return res, mapErr(err)
	}
	return res, mapErr(res.Err)
}

func bucketInfo(b *meta.Bucket) BucketInfo {
	return BucketInfo{Name: b.Name, Public: b.Public, ChecksumSidecars: b.ChecksumSidecars,
		CacheControl: b.CacheControl, Created: time.Unix(0, b.CreatedNs).UTC(),
		Replicas: int(b.Replicas), WriteQuorum: int(b.WriteQuorum), Strict: b.Strict,
		UID: b.UID, GID: b.GID, FileMode: b.FileMode, DirMode: b.DirMode, Owner: b.Owner, ACL: b.ACL}
}

// owned fills the zero owner and mode of a write that does not give them
// (Explicit false) with the bucket's defaults.
func owned(b BucketInfo, uid, gid, mode *uint32, explicit bool, defMode uint32) {
	if explicit {
		return
	}
	if *uid == 0 {
		*uid = b.UID
	}
	if *gid == 0 {
		*gid = b.GID
	}
	if *mode == 0 {
		*mode = defMode
	}
}

// policy is the replication policy of a write into bucket b.
func policy(b BucketInfo) placement.Policy {
	r := b.Replicas
	if r == 0 {
		r = DefaultReplicas
	}
	return placement.Policy{Replicas: r, WriteQuorum: b.WriteQuorum, Strict: b.Strict}
}

// underTally collects the under-replicated blobs of one file's write.
type underTally struct {
	mu     sync.Mutex
	hashes []blob.Hash
	copies placement.Copies // the fewest copies among them
}

// add records one blob's outcome.
func (u *underTally) add(h blob.Hash, c placement.Copies) {
	if !c.Under() {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.hashes) == 0 || c.Made < u.copies.Made {
		u.copies = c
	}
	u.hashes = append(u.hashes, h)
}

// apply marks cmd's under-replicated blobs and info's copies.
func (u *underTally) apply(cmd *meta.Command) {
	u.mu.Lock()
	defer u.mu.Unlock()
	cmd.Under = u.hashes
}

// annotate sets info's copies when the write was under-replicated.
func (u *underTally) annotate(info *ObjectInfo) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.hashes) > 0 {
		info.Copies, info.CopiesWanted = u.copies.Made, u.copies.Wanted
	}
}

func metaBucket(b BucketInfo) *meta.Bucket {
	return &meta.Bucket{Name: b.Name, Public: b.Public, ChecksumSidecars: b.ChecksumSidecars,
		CacheControl: b.CacheControl, Replicas: clamp32(b.Replicas), WriteQuorum: clamp32(b.WriteQuorum), Strict: b.Strict,
		UID: b.UID, GID: b.GID, FileMode: b.FileMode, DirMode: b.DirMode, Owner: b.Owner, ACL: b.ACL}
}

// CreateBucket implements Store.
func (s *Local) CreateBucket(ctx context.Context, b BucketInfo) error {
	if err := meta.ValidBucketName(b.Name); err != nil {
		return mapErr(err)
	}
	_, err := s.propose(ctx, meta.Command{Op: meta.OpCreateBucket, Bucket: metaBucket(b)})
	return err
}

// UpdateBucket implements Store: it replaces the options of b.Name.
func (s *Local) UpdateBucket(ctx context.Context, b BucketInfo) error {
	_, err := s.propose(ctx, meta.Command{Op: meta.OpUpdateBucket, Bucket: metaBucket(b)})
	return err
}

// DeleteBucket implements Store.
func (s *Local) DeleteBucket(ctx context.Context, name string) error {
	_, err := s.propose(ctx, meta.Command{Op: meta.OpDeleteBucket, Bucket: &meta.Bucket{Name: name}})
	return err
}

// consistentKey marks a context made by WithConsistent.
type consistentKey struct{}

// WithConsistent returns ctx marked for a consistent read: the Local
// store's reads with it skip its path and bucket caches and read the
// namespace itself. Call Barrier first (once per request); together they
// make the reads linearizable. (The caches are invalidated when an entry
// is applied, but Raft publishes its applied index, which Barrier waits
// for, just before it calls OnApply: a cached path may be stale for that
// moment.)
func WithConsistent(ctx context.Context) context.Context {
	return context.WithValue(ctx, consistentKey{}, true)
}

// IsConsistent reports whether ctx was marked by WithConsistent.
func IsConsistent(ctx context.Context) bool {
	v, _ := ctx.Value(consistentKey{}).(bool)
	return v
}

// Barrier is the read barrier of a consistent read: it asks the log for a
// read index (in a cluster the leader's commit index, confirmed by a
// quorum) and waits until this node has applied it, within
// Config.ReadBarrierTimeout. Reads made afterwards with a WithConsistent
// context see every write acknowledged anywhere before Barrier was called.
// No leader reachable in time (or a stopped log) is ErrUnavailable. A log
// without read indexes (not a consensus.ReadIndexer) has nothing to wait for.
func (s *Local) Barrier(ctx context.Context) error {
	ri, ok := s.log.(consensus.ReadIndexer)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadBarrierTimeout)
	defer cancel()
	index, err := ri.ReadIndex(ctx)
	if err == nil {
		err = ri.WaitApplied(ctx, index)
	}
	if err != nil {
		if !errors.Is(err, consensus.ErrStopped) && !errors.Is(err, consensus.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", consensus.ErrUnavailable, err)
		}
		return mapErr(fmt.Errorf("consistent read: the read index was not confirmed by a leader (waited up to %v): %w", s.cfg.ReadBarrierTimeout, err))
	}
	return nil
}

// Bucket implements Store.
func (s *Local) Bucket(ctx context.Context, name string) (BucketInfo, error) {
	if IsConsistent(ctx) {
		b, err := s.meta.Bucket(name)
		if err != nil {
			return BucketInfo{}, mapErr(err)
		}
		return bucketInfo(b), nil
	}
	if b, ok := s.cache.bucket(name); ok {
		return bucketInfo(b), nil
	}
	// As in lookup: an apply between the read and the insert makes the
	// insert a no-op, so a stale bucket (deleted, or its options changed)
	// is never cached.
	gen := s.cache.generation()
	b, err := s.meta.Bucket(name)
	if err != nil {
		return BucketInfo{}, mapErr(err)
	}
	if s.afterBucketRead != nil {
		s.afterBucketRead()
	}
	s.cache.putBucket(name, b, gen)
	return bucketInfo(b), nil
}

// Buckets implements Store.
func (s *Local) Buckets(ctx context.Context) ([]BucketInfo, error) {
	bs, err := s.meta.Buckets()
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]BucketInfo, len(bs))
	for i, b := range bs {
		out[i] = bucketInfo(b)
	}
	return out, nil
}

func checkPath(bucket, path string) error {
	if err := meta.ValidBucketName(bucket); err != nil {
		return fmt.Errorf("%w: %v", ErrNoBucket, err)
	}
	if path == "" {
		return nil
	}
	if err := meta.ValidatePath(path); err != nil {
		return mapErr(err)
	}
	return nil
}

// lookup resolves bucket/path through the path cache, or past it for a
// consistent read (WithConsistent). It does not validate the path (List
// calls it with directories derived from a prefix): an invalid path is
// looked up in the namespace but never cached.
func (s *Local) lookup(ctx context.Context, bucket, path string) (*meta.Inode, error) {
	o, err := s.lookupObject(ctx, bucket, path, false)
	if err != nil {
		return nil, err
	}
	return o.ino, nil
}

// pathKeyMax bounds the "bucket/path" keys built on the stack for a cache
// lookup; longer ones are built on the heap.
const pathKeyMax = 512

// lookupObject resolves bucket/path to the immutable object of its inode
// (a file or a directory), through the path cache, or past it for a
// consistent read (WithConsistent). With check, an invalid bucket name or
// path fails (checkPath). Only valid paths are cached, and a bucket name
// holds no '/', so a cache hit ("bucket/path" names one valid pair) skips
// the check; it allocates nothing.
func (s *Local) lookupObject(ctx context.Context, bucket, path string, check bool) (*object, error) {
	if IsConsistent(ctx) {
		if check {
			if err := checkPath(bucket, path); err != nil {
				return nil, err
			}
		}
		ino, err := s.meta.Lookup(bucket, path)
		if err != nil {
			return nil, mapErr(err)
		}
		return s.newObject(bucket, path, ino), nil
	}
	var kb [pathKeyMax]byte
	key := append(append(append(kb[:0], bucket...), '/'), path...)
	if o, ok := s.cache.get(key); ok {
		return o, nil
	}
	if err, ok := s.cache.getAbsent(key); ok {
		return nil, err
	}
	cacheable := true
	if check {
		if err := checkPath(bucket, path); err != nil {
			return nil, err
		}
	} else {
		cacheable = checkPath(bucket, path) == nil
	}
	// Read the generation before the store: an apply that lands in between
	// makes the insert a no-op, so a stale inode is never cached.
	gen := s.cache.generation()
	ino, err := s.meta.Lookup(bucket, path)
	if err != nil {
		err = mapErr(err)
		if cacheable && errors.Is(err, ErrNotFound) {
			s.cache.putAbsent(string(key), err, gen)
		}
		return nil, err
	}
	o := s.newObject(bucket, path, ino)
	if cacheable {
		s.cache.put(string(key), o, gen)
	}
	return o, nil
}

// newObject returns the immutable object of ino; it keeps its own copies
// of bucket and path (the caller's strings may be reused buffers).
func (s *Local) newObject(bucket, path string, ino *meta.Inode) *object {
	return &object{s: s, info: objectInfo(strings.Clone(bucket), strings.Clone(path), ino), ino: ino}
}

func objectInfo(bucket, path string, ino *meta.Inode) ObjectInfo {
	return ObjectInfo{Bucket: bucket, Path: path, IsDir: ino.Type == meta.TypeDir,
		Size: ino.Size, ModTime: time.Unix(0, ino.MtimeNs).UTC(), ETag: ino.ETag,
		SHA256: ino.SHA256, ContentType: ino.ContentType, Mode: ino.Mode,
		Ino: uint64(ino.Ino), UID: ino.UID, GID: ino.GID, Symlink: symlinkTarget(ino), Nlink: ino.Nlink,
		ChangeTime: time.Unix(0, ino.CtimeNs).UTC(), AccessTime: accessTime(ino), Xattrs: ino.Xattrs}
}

// accessTime is ino's access time: the one last set, else the mtime.
func accessTime(ino *meta.Inode) time.Time {
	if ino.AtimeNs == 0 {
		return time.Unix(0, ino.MtimeNs).UTC()
	}
	return time.Unix(0, ino.AtimeNs).UTC()
}

// Stat implements Store.
func (s *Local) Stat(ctx context.Context, bucket, path string) (ObjectInfo, error) {
	o, err := s.lookupObject(ctx, bucket, path, true)
	if err != nil {
		return ObjectInfo{}, err
	}
	return o.info, nil
}

// Open implements Store. Opening a cached file allocates nothing: the
// returned Object is shared by every reader of that version (it is
// immutable and its Close does nothing).
func (s *Local) Open(ctx context.Context, bucket, path string) (Object, error) {
	o, err := s.lookupObject(ctx, bucket, path, true)
	if err != nil {
		return nil, err
	}
	switch o.ino.Type {
	case meta.TypeDir:
		return nil, ErrIsDir
	case meta.TypeSymlink:
		return nil, fmt.Errorf("%w: %s/%s is a symbolic link", ErrNotFound, bucket, path)
	}
	return o, nil
}

// symlinkTarget is a symlink's target, "" for other types.
func symlinkTarget(ino *meta.Inode) string {
	if ino.Type != meta.TypeSymlink {
		return ""
	}
	return ino.Target
}

// Symlink implements Store.
func (s *Local) Symlink(ctx context.Context, bucket, path, target string, attrs Attrs) (ObjectInfo, error) {
	if err := checkPath(bucket, path); err != nil {
		return ObjectInfo{}, err
	}
	if path == "" || target == "" || len(target) > 4096 || strings.IndexByte(target, 0) >= 0 {
		return ObjectInfo{}, ErrInvalidName
	}
	now := s.cfg.Now().UnixNano()
	f := &meta.Inode{Type: meta.TypeSymlink, Mode: 0o777, UID: attrs.UID, GID: attrs.GID, Target: target,
		Size: int64(len(target)), MtimeNs: now, CtimeNs: now}
	res, err := s.propose(ctx, meta.Command{Op: meta.OpPutFile, BucketName: bucket, Path: path, File: f, IfNoneMatchAny: true,
		StartIndex: s.log.AppliedIndex()})
	if errors.Is(err, ErrPrecondition) || errors.Is(err, ErrIsDir) {
		return ObjectInfo{}, fmt.Errorf("%w: %s/%s", ErrExists, bucket, path)
	}
	if err != nil {
		return ObjectInfo{}, err
	}
	return objectInfo(bucket, path, res.Inode), nil
}

// StatIno implements Store.
func (s *Local) StatIno(ctx context.Context, bucket, path string, ino uint64) (ObjectInfo, error) {
	n, err := s.meta.Inode(meta.Ino(ino))
	if err != nil {
		return ObjectInfo{}, mapErr(err)
	}
	return objectInfo(bucket, path, n), nil
}

// OpenIno implements Store.
func (s *Local) OpenIno(ctx context.Context, bucket, path string, ino uint64) (Object, error) {
	n, err := s.meta.Inode(meta.Ino(ino))
	if err != nil {
		return nil, mapErr(err)
	}
	switch n.Type {
	case meta.TypeDir:
		return nil, ErrIsDir
	case meta.TypeSymlink:
		return nil, fmt.Errorf("%w: %s/%s is a symbolic link", ErrNotFound, bucket, path)
	}
	return s.newObject(bucket, path, n), nil
}

// dirMode is the File.Mode of an OpMkdir with attrs: explicit (0
// included) when the caller gives it.
func dirMode(attrs Attrs) uint32 {
	if attrs.Explicit {
		return attrs.Mode&0o7777 | meta.ModeExplicit
	}
	return attrs.Mode & 0o7777
}

// ReserveInos implements Store.
func (s *Local) ReserveInos(ctx context.Context, n int) (uint64, error) {
	if n < 1 || n > 1<<16 {
		return 0, fmt.Errorf("store: reserve %d inode numbers: want 1..65536", n)
	}
	res, err := s.propose(ctx, meta.Command{Op: meta.OpReserveInos, Count: uint64(n)})
	if err != nil {
		return 0, err
	}
	return uint64(res.Inode.Ino), nil
}

// Link implements Store.
func (s *Local) Link(ctx context.Context, bucket, src, dst string) (ObjectInfo, error) {
	if err := checkPath(bucket, src); err != nil {
		return ObjectInfo{}, err
	}
	if err := checkPath(bucket, dst); err != nil {
		return ObjectInfo{}, err
	}
	if src == "" || dst == "" {
		return ObjectInfo{}, ErrInvalidName
	}
	res, err := s.propose(ctx, meta.Command{Op: meta.OpLink, BucketName: bucket, Path: src, DstPath: dst})
	if err != nil {
		return ObjectInfo{}, err
	}
	return objectInfo(bucket, dst, res.Inode), nil
}

// Xattrs implements Store.
func (s *Local) Xattrs(ctx context.Context, bucket, path string) (map[string][]byte, error) {
	if err := checkPath(bucket, path); err != nil {
		return nil, err
	}
	ino, err := s.lookup(ctx, bucket, path)
	if err != nil {
		return nil, err
	}
	return ino.Xattrs, nil
}

// Mkdir implements Store.
func (s *Local) Mkdir(ctx context.Context, bucket, path string, attrs Attrs) error {
	cmd, err := s.mkdirCommand(ctx, bucket, path, attrs)
	if err != nil {
		return err
	}
	_, err = s.propose(ctx, cmd)
	return err
}

// mkdirCommand is Mkdir's command.
func (s *Local) mkdirCommand(ctx context.Context, bucket, path string, attrs Attrs) (meta.Command, error) {
	if err := checkPath(bucket, path); err != nil {
		return meta.Command{}, err
	}
	if path == "" {
		return meta.Command{}, ErrInvalidName
	}
	if !attrs.Explicit {
		b, err := s.Bucket(ctx, bucket)
		if err != nil {
			return meta.Command{}, err
		}
		owned(b, &attrs.UID, &attrs.GID, &attrs.Mode, false, b.DirMode)
	}
	return meta.Command{Op: meta.OpMkdir, BucketName: bucket, Path: path,
		File: &meta.Inode{Type: meta.TypeDir, Ino: meta.Ino(attrs.Ino), Mode: dirMode(attrs), UID: attrs.UID, GID: attrs.GID}}, nil
}

// SetAttrs implements Store: it reads the inode, changes what set names and
// proposes the result (meta.OpSetAttr replaces mode, owner, mtime and
// xattrs together; a concurrent change of the same inode's attributes made
// between the read and the commit is overwritten).
func (s *Local) SetAttrs(ctx context.Context, bucket, path string, set SetAttrs) (ObjectInfo, error) {
	cmd, err := s.setAttrsCommand(ctx, bucket, path, set)
	if err != nil {
		return ObjectInfo{}, err
	}
	res, err := s.propose(ctx, cmd)
	if err != nil {
		return ObjectInfo{}, err
	}
	return objectInfo(bucket, path, res.Inode), nil
}

// setAttrsCommand is SetAttrs's command, from path's current inode.
func (s *Local) setAttrsCommand(ctx context.Context, bucket, path string, set SetAttrs) (meta.Command, error) {
	if err := checkPath(bucket, path); err != nil {
		return meta.Command{}, err
	}
	cur, err := s.lookup(ctx, bucket, path)
	if err != nil {
		return meta.Command{}, err
	}
	f := &meta.Inode{Mode: cur.Mode, UID: cur.UID, GID: cur.GID, MtimeNs: cur.MtimeNs, AtimeNs: cur.AtimeNs, Xattrs: cur.Xattrs}
	if set.Mode != nil {
		f.Mode = *set.Mode & 0o7777
	}
	if set.UID != nil {
		f.UID = *set.UID
	}
	if set.GID != nil {
		f.GID = *set.GID
	}
	if set.ModTime != nil {
		f.MtimeNs = set.ModTime.UnixNano()
	}
	if set.ATime != nil {
		f.AtimeNs = set.ATime.UnixNano()
	}
	if len(set.Xattrs) > 0 {
		x := make(map[string][]byte, len(cur.Xattrs)+len(set.Xattrs))
		for k, v := range cur.Xattrs {
			x[k] = v
		}
		for k, v := range set.Xattrs {
			if v == nil {
				delete(x, k)
			} else {
				x[k] = v
			}
		}
		f.Xattrs = x
	}
	return meta.Command{Op: meta.OpSetAttr, BucketName: bucket, Path: path, File: f}, nil
}

// Delete implements Store.
func (s *Local) Delete(ctx context.Context, bucket, path, ifMatch string) error {
	cmd, err := s.deleteCommand(bucket, path, ifMatch)
	if err != nil {
		return err
	}
	_, err = s.propose(ctx, cmd)
	return err
}

// deleteCommand is Delete's command.
func (s *Local) deleteCommand(bucket, path, ifMatch string) (meta.Command, error) {
	if err := checkPath(bucket, path); err != nil {
		return meta.Command{}, err
	}
	if path == "" {
		return meta.Command{}, ErrInvalidName
	}
	return meta.Command{Op: meta.OpDelete, BucketName: bucket, Path: path, IfMatch: ifMatch}, nil
}

// Rename implements Store.
func (s *Local) Rename(ctx context.Context, bucket, src, dst string) error {
	if err := checkPath(bucket, src); err != nil {
		return err
	}
	if err := checkPath(bucket, dst); err != nil {
		return err
	}
	if src == "" || dst == "" {
		return ErrInvalidName
	}
	_, err := s.propose(ctx, meta.Command{Op: meta.OpRename, BucketName: bucket, Path: src, DstPath: dst})
	return err
}

// Put implements Store. The body is cut into blobs of blob.MaxSize that are
// hashed and written while the next one is read, at most
// ParallelBlobWrites at a time; the namespace change is proposed only after
// every blob is durable.
func (s *Local) Put(ctx context.Context, bucket, path string, r io.Reader, opts PutOptions) (ObjectInfo, bool, error) {
	if err := checkPath(bucket, path); err != nil {
		return ObjectInfo{}, false, err
	}
	if path == "" {
		return ObjectInfo{}, false, ErrInvalidName
	}
	binfo, err := s.Bucket(ctx, bucket)
	if err != nil {
		return ObjectInfo{}, false, err
	}
	pol := policy(binfo)
	owned(binfo, &opts.UID, &opts.GID, &opts.Mode, opts.Explicit, binfo.FileMode)
	var under underTally
	startIndex := s.log.AppliedIndex()
	// Replicas store the blobs only once they have applied startIndex
	// (GuardReplicaPut): a reap this upload saw cannot delete, under it, a
	// copy a replica deduplicated against.
	ctx = transport.WithMinIndex(ctx, startIndex)
	held := make(map[blob.Hash]struct{})
	defer func() {
		for h := range held {
			s.pins.unpin(h)
		}
	}()

	md := md5.New()
	sh := sha256.New()
	// A body declared to fit one blob has the blob's name as its SHA-256:
	// skip hashing it twice (a longer body fails with ErrTooLarge anyway).
	single := opts.Size >= 0 && opts.Size <= blob.MaxSize
	var (
		extents []meta.Extent
		total   int64
		wg      sync.WaitGroup
		errMu   sync.Mutex
		werr    error
		sem     = make(chan struct{}, s.cfg.ParallelBlobWrites)
	)
	setErr := func(err error) {
		errMu.Lock()
		if werr == nil {
			werr = err
		}
		errMu.Unlock()
	}
	getErr := func() error { errMu.Lock(); defer errMu.Unlock(); return werr }
	for {
		if err := ctx.Err(); err != nil {
			setErr(err)
			break
		}
		if getErr() != nil {
			break
		}
		// Take a write slot before reading, so at most ParallelBlobWrites
		// blob buffers exist for this upload, the one being filled included.
		sem <- struct{}{}
		bp := s.bufs.Get().(*[]byte)
		buf := *bp
		release := func() { s.bufs.Put(bp); <-sem }
		n, eof, rerr := fill(r, buf)
		if n > 0 {
			data := buf[:n]
			h := hashChunk(md, sh, data, !single)
			extents = append(extents, meta.Extent{Hash: h, Offset: total, Length: int64(n)})
			total += int64(n)
			if opts.Size >= 0 && total > opts.Size {
				release()
				setErr(ErrTooLarge)
				break
			}
			if _, dup := held[h]; !dup {
				held[h] = struct{}{}
				s.pins.pin(h)
				wg.Add(1)
				go func() {
					defer wg.Done()
					var (
						err    error
						copies placement.Copies
					)
					if br, ok := s.cfg.Replication.(BatchReplication); ok && n > handOverBytes {
						// The buffer goes to the replication (its sends to
						// slow replicas outlive this call) instead of
						// being copied there; the pool makes a new one.
						cs, errs := br.WriteMany(ctx, []transport.BlobPut{{Hash: h, Data: data}}, pol)
						copies, err = cs[0], errs[0]
						<-sem
					} else {
						copies, err = s.writeBlob(ctx, h, data, pol)
						release()
					}
					under.add(h, copies)
					if err != nil {
						setErr(fmt.Errorf("write blob: %w", err))
					}
				}()
			} else {
				release()
			}
		} else {
			release()
		}
		if rerr != nil {
			// The transport's error: a client gone mid-body, a body shorter
			// than its Content-Length (io.ErrUnexpectedEOF), a read timeout.
			setErr(fmt.Errorf("%w: read body: %v", ErrShortBody, rerr))
			break
		}
		if eof {
			break
		}
	}
	wg.Wait()
	if err := getErr(); err != nil {
		return ObjectInfo{}, false, mapErr(err)
	}
	if opts.Size >= 0 && total != opts.Size {
		if total < opts.Size {
			return ObjectInfo{}, false, ErrShortBody
		}
		return ObjectInfo{}, false, ErrTooLarge
	}
	sum := md.Sum(nil)
	if opts.ContentMD5 != nil && !bytes.Equal(sum, opts.ContentMD5) {
		return ObjectInfo{}, false, fmt.Errorf("%w: the body's MD5 is %x, Content-MD5 said %x", ErrBadDigest, sum, opts.ContentMD5)
	}
	cmd := s.putFileCommand(bucket, path, opts, total, hex.EncodeToString(sum),
		fileSHA256(single, sh, extents), extents, startIndex)
	under.apply(&cmd)
	if s.beforePropose != nil {
		s.beforePropose()
	}
	info, created, err := s.commitFile(ctx, cmd)
	under.annotate(&info)
	return info, created, err
}

// parallelHashBytes: a chunk at least this long has its MD5 computed on
// another core while this one computes its SHA-256s.
const parallelHashBytes = 256 << 10

// hashChunk adds data to the upload's MD5 md (and to its SHA-256 sh when
// file is set) and returns the blob's name.
func hashChunk(md, sh hash.Hash, data []byte, file bool) blob.Hash {
	if len(data) < parallelHashBytes {
		md.Write(data)
		if file {
			sh.Write(data)
		}
		return blob.Sum(data)
	}
	done := make(chan struct{})
	go func() {
		md.Write(data)
		close(done)
	}()
	if file {
		sh.Write(data)
	}
	h := blob.Sum(data)
	<-done
	return h
}

// putFileCommand is the OpPutFile command of an upload whose blobs are
// written: opts' mode (default 0644), mtime (default now), content type
// and conditions, the file's size, ETag, SHA-256 and extents.
func (s *Local) putFileCommand(bucket, path string, opts PutOptions, size int64, etag, sha string,
	extents []meta.Extent, startIndex uint64) meta.Command {
	mode := opts.Mode & 0o7777
	switch {
	case opts.Explicit:
		mode |= meta.ModeExplicit // 0 included (a mount's file of mode 0)
	case mode == 0:
		mode = 0o644
	}
	now := s.cfg.Now()
	mtime := opts.ModTime
	if mtime.IsZero() {
		mtime = now
	}
	file := &meta.Inode{Ino: meta.Ino(opts.Ino), Type: meta.TypeFile, Mode: mode, UID: opts.UID, GID: opts.GID, Size: size, MtimeNs: mtime.UnixNano(),
		CtimeNs: now.UnixNano(), ContentType: opts.ContentType, ETag: etag, SHA256: sha, Extents: extents, Xattrs: opts.Xattrs}
	if !opts.AccessTime.IsZero() {
		file.AtimeNs = opts.AccessTime.UnixNano()
	}
	return meta.Command{Op: meta.OpPutFile, BucketName: bucket, Path: path, File: file,
		TimeNs: now.UnixNano(), IfMatch: opts.IfMatch, IfNoneMatchAny: opts.IfNoneMatchAny,
		StartIndex: startIndex}
}

// commitFile proposes the OpPutFile cmd of an upload whose blobs are
// written (and pinned by the caller) and returns the file's description.
func (s *Local) commitFile(ctx context.Context, cmd meta.Command) (ObjectInfo, bool, error) {
	var (
		res meta.Result
		err error
	)
	for attempt := 0; ; attempt++ {
		res, err = s.log.Propose(ctx, cmd)
		if err == nil && errors.Is(res.Err, meta.ErrBlobReaped) && attempt < 3 {
			// A blob this upload deduplicated against was reclaimed while
			// the upload was in flight. Our pins kept the local copies, so
			// the bytes are still here: write them again (a no-op when
			// present) and retry from the current index.
			cmd.StartIndex = s.log.AppliedIndex()
			if rerr := s.rewriteMissing(cmd.File.Extents); rerr != nil {
				return ObjectInfo{}, false, mapErr(rerr)
			}
			continue
		}
		break
	}
	return committed(cmd, res, err)
}

// committed is the outcome of an OpPutFile cmd proposed with result res
// and error err.
func committed(cmd meta.Command, res meta.Result, err error) (ObjectInfo, bool, error) {
	if err != nil {
		return ObjectInfo{}, false, mapErr(err)
	}
	if res.Err != nil {
		return ObjectInfo{}, false, mapErr(res.Err)
	}
	ino := res.Inode
	if ino == nil {
		ino = cmd.File
	}
	return objectInfo(cmd.BucketName, cmd.Path, ino), res.Created, nil
}

// handOverBytes: an upload's blobs larger than this are handed to a
// BatchReplication with their buffer (no copy) rather than written with
// Replication.WriteBlob, which copies them but coalesces small blobs of
// concurrent uploads into batches (a blob this large travels alone anyway).
const handOverBytes = 256 << 10

// writeBlob stores one blob of an upload: on its replicas in a cluster,
// else in the local blob store (one copy, all that is wanted).
func (s *Local) writeBlob(ctx context.Context, h blob.Hash, data []byte, pol placement.Policy) (placement.Copies, error) {
	if s.cfg.Replication != nil {
		return s.cfg.Replication.WriteBlob(ctx, h, data, pol)
	}
	return placement.Copies{Made: 1, Wanted: 1}, s.blobs.Put(h, data)
}

// rewriteMissing verifies that every blob of extents is present locally
// before a retry. In a cluster it always fails: the copies that mattered
// were on the replicas.
func (s *Local) rewriteMissing(extents []meta.Extent) error {
	if s.cfg.Replication != nil {
		// The reap deleted every replica's copy (pins guard only this
		// node's), and the upload's buffers are gone: retrying would commit
		// a file whose blobs exist nowhere (found by internal/sim, seed
		// 1180). Fail; the client retries the whole upload.
		return fmt.Errorf("%w: a blob this upload deduplicated against was reclaimed on its replicas", ErrUnavailable)
	}
	for _, e := range extents {
		if !s.blobs.Has(e.Hash) {
			return fmt.Errorf("%w: blob %s vanished during upload", ErrUnavailable, e.Hash)
		}
	}
	return nil
}

// List implements Store.
func (s *Local) List(ctx context.Context, bucket string, opts ListOptions) (ListResult, error) {
	if err := checkPath(bucket, ""); err != nil {
		return ListResult{}, err
	}
	if opts.Limit <= 0 {
		opts.Limit = 1000
	}
	if opts.Delimiter != "" && opts.Delimiter != "/" {
		return ListResult{}, fmt.Errorf("%w: only \"/\" is supported as a delimiter", ErrInvalidName)
	}
	// The directory that holds every key with the prefix.
	dir, namePrefix := "", opts.Prefix
	if i := strings.LastIndexByte(opts.Prefix, '/'); i >= 0 {
		dir, namePrefix = opts.Prefix[:i], opts.Prefix[i+1:]
	}
	var dirIno *meta.Inode
	var err error
	if dir == "" {
		dirIno, err = s.lookup(ctx, bucket, "")
	} else {
		if verr := meta.ValidatePath(dir); verr != nil {
			return ListResult{}, nil // no key can have an invalid prefix
		}
		dirIno, err = s.lookup(ctx, bucket, dir)
	}
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrNotDir) {
			return ListResult{}, nil
		}
		return ListResult{}, err
	}
	if dirIno.Type != meta.TypeDir {
		return ListResult{}, nil
	}
	snap := s.kv.Snapshot()
	defer snap.Close()
	l := &lister{s: s, bucket: bucket, limit: opts.Limit, recursive: opts.Delimiter == "",
		snap: meta.NewReader(snap)}
	dirPrefix := ""
	if dir != "" {
		dirPrefix = dir + "/"
	}
	var after []string
	if opts.StartAfter != "" && opts.StartAfter >= dirPrefix {
		rest := strings.TrimPrefix(opts.StartAfter, dirPrefix)
		if !strings.HasPrefix(opts.StartAfter, dirPrefix) {
			// Not a proper prefix and not smaller: StartAfter sorts after
			// every key under dirPrefix, so nothing is left to list.
			return ListResult{}, nil
		}
		after = splitKeep(rest)
	}
	if err := l.walk(dirIno.Ino, dirPrefix, namePrefix, after); err != nil && !errors.Is(err, errPageFull) {
		return ListResult{}, mapErr(err)
	}
	return l.res, nil
}

// splitKeep splits "a/b/c" into ["a/", "b/", "c"]: directory components
// keep their slash, which is how they sort in a directory.
func splitKeep(p string) []string {
	var out []string
	for {
		i := strings.IndexByte(p, '/')
		if i < 0 {
			if p != "" {
				out = append(out, p)
			}
			return out
		}
		out = append(out, p[:i+1])
		p = p[i+1:]
	}
}

var errPageFull = errors.New("page full")

type lister struct {
	s         *Local
	snap      *meta.Reader
	bucket    string
	limit     int
	recursive bool
	res       ListResult
	last      string
}

func (l *lister) full() bool {
	return len(l.res.Entries)+len(l.res.CommonPrefixes) >= l.limit
}

func (l *lister) emit(key string, ino *meta.Inode, dir bool) error {
	if l.full() {
		l.res.Truncated = true
		l.res.NextToken = l.last
		return errPageFull
	}
	if dir {
		l.res.CommonPrefixes = append(l.res.CommonPrefixes, key)
	} else {
		l.res.Entries = append(l.res.Entries, objectInfo(l.bucket, key, ino))
	}
	l.last = key
	return nil
}

// walk lists directory ino (whose full path prefix is prefix) for names
// starting with namePrefix, resuming after the components in after.
func (l *lister) walk(ino meta.Ino, prefix, namePrefix string, after []string) error {
	start := ""
	if len(after) > 0 {
		start = after[0]
		if strings.HasSuffix(start, "/") && l.recursive {
			// Resume inside the directory first.
			child, err := l.snap.Lookup(l.bucket, strings.TrimSuffix(prefix+start, "/"))
			if err == nil && child.Type == meta.TypeDir {
				if err := l.walk(child.Ino, prefix+start, "", after[1:]); err != nil {
					return err
				}
			}
		}
	} else if namePrefix != "" {
		// Start just before namePrefix: no valid (UTF-8) name contains 0xff.
		b := []byte(namePrefix)
		b[len(b)-1]--
		start = string(b) + "\xff"
	}
	for {
		ents, err := l.snap.ReadDir(ino, start, 256)
		if err != nil {
			return err
		}
		if len(ents) == 0 {
			return nil
		}
		for _, d := range ents {
			start = meta.DirentKeyName(d)
			if !strings.HasPrefix(d.Name, namePrefix) {
				if d.Name > namePrefix {
					return nil
				}
				continue
			}
			full := prefix + d.Name
			if d.Type == meta.TypeDir {
				if !l.recursive {
					if err := l.emit(full+"/", nil, true); err != nil {
						return err
					}
					continue
				}
				if err := l.walk(d.Ino, full+"/", "", nil); err != nil {
					return err
				}
				continue
			}
			child, err := l.snap.Inode(d.Ino)
			if err != nil {
				if errors.Is(err, meta.ErrNotFound) {
					continue
				}
				return err
			}
			if err := l.emit(full, child, false); err != nil {
				return err
			}
		}
	}
}

// fill reads into buf until it is full or r ends. eof reports a clean end
// of r; err is any other error of r (io.ErrUnexpectedEOF included).
func fill(r io.Reader, buf []byte) (n int, eof bool, err error) {
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err == io.EOF {
			return n, true, nil
		}
		if err != nil {
			return n, false, err
		}
	}
	return n, false, nil
}

// fileSHA256 is the hex SHA-256 of the whole content: the hash of its only
// blob for a single-blob file, else the streaming hash.
func fileSHA256(single bool, sh hash.Hash, extents []meta.Extent) string {
	if !single {
		return hex.EncodeToString(sh.Sum(nil))
	}
	if len(extents) == 0 {
		return hex.EncodeToString(sh.Sum(nil)) // empty file
	}
	return extents[0].Hash.String()
}

// clamp32 converts an int option to int32, saturating (meta rejects
// out-of-range values with a clear error).
func clamp32(v int) int32 {
	if v > 1<<30 {
		return 1 << 30
	}
	if v < -(1 << 30) {
		return -(1 << 30)
	}
	return int32(v)
}
