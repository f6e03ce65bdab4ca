package meta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/kv"
)

// ReapMarkerWindow is how many log indices a reaped marker (`x` key) is
// kept after the reap that wrote it. An OpPutFile whose StartIndex is
// older than index-ReapMarkerWindow can no longer be checked against
// pruned markers, so it fails with ErrBlobReaped if it references a blob
// with no refcount entry (see OpPutFile in doc.go).
const ReapMarkerWindow = 1 << 22

// ModeExplicit, set in a command's File.Mode (OpPutFile, OpMkdir), says
// that the mode is the proposer's even when it is 0 (a mount's chmod 0 or
// create with mode 0); without it a 0 takes the default. It is never
// stored.
const ModeExplicit = 1 << 31

// explicitMode is mode without ModeExplicit, or def when mode is 0 and
// not explicit.
func explicitMode(mode, def uint32) uint32 {
	if mode&ModeExplicit != 0 {
		return mode &^ ModeExplicit
	}
	if mode == 0 {
		return def
	}
	return mode
}

// Default modes when a command leaves File.Mode at 0.
const (
	defaultFileMode    = 0o644
	defaultDirMode     = 0o755
	defaultSymlinkMode = 0o777
)

// kvFailure marks an error of the KV layer: Apply stops and returns it
// instead of recording it in a Result.
type kvFailure struct{ err error }

func (e *kvFailure) Error() string { return "meta: kv: " + e.err.Error() }
func (e *kvFailure) Unwrap() error { return e.err }

// txn stages the writes of one command over the batch so that a command
// that fails can be dropped whole. Reads see the staged writes.
type txn struct {
	b kv.Batch
	w map[string][]byte // nil value: deleted
}

func (t *txn) Get(key []byte) ([]byte, error) {
	if v, ok := t.w[string(key)]; ok {
		if v == nil {
			return nil, kv.ErrNotFound
		}
		return bytes.Clone(v), nil
	}
	v, err := t.b.Get(key)
	if err != nil && !errors.Is(err, kv.ErrNotFound) {
		return nil, &kvFailure{err}
	}
	return v, err
}

func (t *txn) Scan(lower, upper []byte, fn func(k, v []byte) bool) error {
	var over []string
	for k := range t.w {
		if (lower == nil || k >= string(lower)) && (upper == nil || k < string(upper)) {
			over = append(over, k)
		}
	}
	slices.Sort(over)
	i, stopped := 0, false
	emit := func(k string) bool {
		if v := t.w[k]; v != nil {
			return fn([]byte(k), v)
		}
		return true
	}
	err := t.b.Scan(lower, upper, func(k, v []byte) bool {
		for ; i < len(over) && over[i] < string(k); i++ {
			if !emit(over[i]) {
				stopped = true
				return false
			}
		}
		if i < len(over) && over[i] == string(k) {
			i++
			if !emit(string(k)) {
				stopped = true
				return false
			}
			return true
		}
		if !fn(k, v) {
			stopped = true
			return false
		}
		return true
	})
	if err != nil {
		return &kvFailure{err}
	}
	for ; !stopped && i < len(over); i++ {
		if !emit(over[i]) {
			break
		}
	}
	return nil
}

func (t *txn) set(k, v []byte) {
	if v == nil {
		v = []byte{}
	}
	t.w[string(k)] = v
}

func (t *txn) del(k []byte) { t.w[string(k)] = nil }

// flush writes the staged changes to the batch in key order.
func (t *txn) flush() error {
	for _, k := range slices.Sorted(maps.Keys(t.w)) {
		var err error
		if v := t.w[k]; v == nil {
			err = t.b.Delete([]byte(k))
		} else {
			err = t.b.Set([]byte(k), v)
		}
		if err != nil {
			return &kvFailure{err}
		}
	}
	return nil
}

// Apply applies cmds, in order, as log entry index onto b (which it does
// not commit), and records index as the applied index in the same batch.
// It returns one Result per command. A command that fails (Result.Err)
// changes nothing. err != nil only for a KV failure or a corrupt stored
// value; the batch must then be discarded. Apply is deterministic: it reads
// nothing but cmds and b. Not safe for concurrent use of the same b.
func Apply(b kv.Batch, index uint64, cmds []Command) ([]Result, error) {
	if err := ensureRoot(b); err != nil {
		return nil, err
	}
	results := make([]Result, len(cmds))
	var st applyState
	for i := range cmds {
		t := &txn{b: b, w: map[string][]byte{}}
		a := &applier{t: t, r: NewReader(t), st: &st, index: index, cmd: &cmds[i], now: cmds[i].TimeNs}
		if cmds[i].Op == OpReap || cmds[i].Op == OpReapOrphans {
			st.reapedKnown = false // a reap writes and prunes markers
		}
		res, err := a.apply()
		if err != nil {
			var kf *kvFailure
			if errors.As(err, &kf) || errors.Is(err, ErrCorrupt) {
				return nil, fmt.Errorf("apply entry %d command %d: %w", index, i, err)
			}
			results[i] = Result{Err: err}
			continue
		}
		if err := t.flush(); err != nil {
			return nil, fmt.Errorf("apply entry %d command %d: %w", index, i, err)
		}
		results[i] = res
	}
	if err := b.Set(keyApplied, u64(index)); err != nil {
		return nil, fmt.Errorf("apply entry %d: %w", index, err)
	}
	return results, nil
}

// ensureRoot creates the root directory on the first Apply.
func ensureRoot(b kv.Batch) error {
	if _, err := b.Get(inodeKey(RootIno)); err == nil {
		return nil
	} else if !errors.Is(err, kv.ErrNotFound) {
		return fmt.Errorf("apply: read root: %w", err)
	}
	root := &Inode{Ino: RootIno, Type: TypeDir, Mode: defaultDirMode, Nlink: 2}
	if err := b.Set(inodeKey(RootIno), EncodeInode(root)); err != nil {
		return fmt.Errorf("apply: init root: %w", err)
	}
	if err := b.Set(keyNextIno, u64(uint64(RootIno)+1)); err != nil {
		return fmt.Errorf("apply: init root: %w", err)
	}
	return nil
}

// applyState is what one Apply call learns once for all its commands.
type applyState struct {
	// reapedKnown: anyReaped says whether a reaped marker (x key) exists.
	// Only OpReap and OpReapOrphans write or delete markers; Apply
	// forgets it before one.
	reapedKnown, anyReaped bool
}

// applier applies one command through a txn.
type applier struct {
	t     *txn
	r     *Reader
	st    *applyState
	index uint64
	cmd   *Command
	now   int64
}

func (a *applier) apply() (Result, error) {
	switch a.cmd.Op {
	case OpCreateBucket:
		return a.createBucket()
	case OpUpdateBucket:
		return a.updateBucket()
	case OpDeleteBucket:
		return a.deleteBucket()
	case OpPutFile:
		return a.putFile()
	case OpMkdir:
		return a.mkdirP()
	case OpDelete:
		return a.delete()
	case OpRename:
		return a.rename()
	case OpReap:
		return a.reap()
	case OpSetAttr:
		return a.setAttr()
	case OpSetNode:
		return a.setNode()
	case OpRemoveNode:
		return a.removeNode()
	case OpReplicated:
		return a.replicated()
	case OpLink:
		return a.link()
	case OpReserveInos:
		return a.reserveInos()
	case OpPutRecord:
		return a.putRecord()
	case OpDeleteRecord:
		return a.deleteRecord()
	case OpReapOrphans:
		return a.reapOrphans()
	case OpLock:
		return a.lock()
	case OpLockCancel:
		return a.lockCancel()
	case OpLockSession:
		return a.lockRenew()
	case OpLockExpire:
		return a.lockExpire()
	default:
		return Result{}, fmt.Errorf("%w: unknown op %d", ErrInvalid, a.cmd.Op)
	}
}

func (a *applier) changed(path string) string { return a.cmd.BucketName + "/" + path }

// --- small state helpers ---

func (a *applier) putInode(n *Inode) { a.t.set(inodeKey(n.Ino), EncodeInode(n)) }

// maxReserve bounds one OpReserveInos.
const maxReserve = 1 << 16

// reserveInos hands out Count inode numbers, never allocated otherwise,
// for the proposer's new files (a mount creates files before they are
// committed and needs their numbers at once).
func (a *applier) reserveInos() (Result, error) {
	if a.cmd.Count < 1 || a.cmd.Count > maxReserve {
		return Result{}, fmt.Errorf("%w: reserve %d inode numbers (1..%d)", ErrInvalid, a.cmd.Count, maxReserve)
	}
	next, err := a.r.getU64(keyNextIno)
	if err != nil {
		return Result{}, err
	}
	a.t.set(keyNextIno, u64(next+a.cmd.Count))
	return Result{Inode: &Inode{Ino: Ino(next)}}, nil
}

// newIno is the inode number of a file or directory the command creates:
// want, a number the proposer reserved, when it was handed out and is
// free, else a new one.
func (a *applier) newIno(want Ino) (Ino, error) {
	if want > RootIno {
		next, err := a.r.getU64(keyNextIno)
		if err != nil {
			return 0, err
		}
		if uint64(want) < next {
			if _, err := a.r.Inode(want); errors.Is(err, ErrNotFound) {
				return want, nil
			}
		}
	}
	return a.allocIno()
}

func (a *applier) allocIno() (Ino, error) {
	next, err := a.r.getU64(keyNextIno)
	if err != nil {
		return 0, err
	}
	a.t.set(keyNextIno, u64(next+1))
	return Ino(next), nil
}

func (a *applier) addCounts(files, dirs, nbytes int64) error {
	c, err := a.r.counts()
	if err != nil {
		return err
	}
	c.files += files
	c.dirs += dirs
	c.bytes += nbytes
	v := binary.BigEndian.AppendUint64(nil, uint64(c.files))
	v = binary.BigEndian.AppendUint64(v, uint64(c.dirs))
	v = binary.BigEndian.AppendUint64(v, uint64(c.bytes))
	a.t.set(keyCounts, v)
	return nil
}

// touchDir sets dir's mtime and ctime to now and adds nlinkDelta to its
// link count (a subdirectory's ".." link).
func (a *applier) touchDir(dir Ino, nlinkDelta int) error {
	n, err := a.r.Inode(dir)
	if err != nil {
		return err
	}
	n.MtimeNs, n.CtimeNs = a.now, a.now
	n.Nlink = uint32(int64(n.Nlink) + int64(nlinkDelta))
	a.putInode(n)
	return nil
}

// mkdir creates directory name in parent.
func (a *applier) mkdir(parent Ino, name string, mode, uid, gid uint32) (*Inode, error) {
	return a.mkdirIno(parent, name, mode, uid, gid, 0)
}

// mkdirIno is mkdir with the inode number want when it was reserved and
// is free (see newIno).
func (a *applier) mkdirIno(parent Ino, name string, mode, uid, gid uint32, want Ino) (*Inode, error) {
	ino, err := a.newIno(want)
	if err != nil {
		return nil, err
	}
	mode = explicitMode(mode, defaultDirMode)
	n := &Inode{Ino: ino, Type: TypeDir, Mode: mode, UID: uid, GID: gid, Nlink: 2, MtimeNs: a.now, CtimeNs: a.now}
	a.putInode(n)
	a.t.set(dentryKey(parent, name+"/"), encodeDentry(ino, TypeDir))
	if err := a.touchDir(parent, +1); err != nil {
		return nil, err
	}
	return n, a.addCounts(0, 1, 0)
}

// walkDirs resolves the directory components comps below dir, creating
// missing ones when create (mkdir -p, owned by uid:gid).
func (a *applier) walkDirs(dir Ino, comps []string, create bool, uid, gid uint32) (Ino, error) {
	for i, c := range comps {
		ino, t, ok, err := a.r.child(dir, c, true)
		if err != nil {
			return 0, err
		}
		switch {
		case !ok && !create:
			return 0, fmt.Errorf("%q: %w", strings.Join(comps[:i+1], "/"), ErrNotFound)
		case !ok:
			n, err := a.mkdir(dir, c, defaultDirMode, uid, gid)
			if err != nil {
				return 0, err
			}
			dir = n.Ino
		case t != TypeDir:
			return 0, fmt.Errorf("%q: %w", strings.Join(comps[:i+1], "/"), ErrNotDir)
		default:
			dir = ino
		}
	}
	return dir, nil
}

// split returns the parent components and the last component of path.
func split(path string) ([]string, string) {
	comps := strings.Split(path, "/")
	return comps[:len(comps)-1], comps[len(comps)-1]
}

func (a *applier) bucket() (*Bucket, error) { return a.r.Bucket(a.cmd.BucketName) }

// adjustRefs applies per-blob reference deltas in hash order, keeping the
// garbage queue in step: a count that reaches 0 queues the blob at now, a
// count that leaves 0 dequeues it.
func (a *applier) adjustRefs(delta map[cas.Hash]int64) error {
	hashes := slices.SortedFunc(maps.Keys(delta), func(x, y cas.Hash) int { return bytes.Compare(x[:], y[:]) })
	for _, h := range hashes {
		d := delta[h]
		if d == 0 {
			continue
		}
		v, known, err := a.r.get(refKey(h))
		if err != nil {
			return err
		}
		var old uint64
		if known {
			if len(v) != 8 {
				return errCorrupt("%q: %d-byte value", refKey(h), len(v))
			}
			old = binary.BigEndian.Uint64(v)
		}
		nv := int64(old) + d
		if nv < 0 {
			return errCorrupt("refcount of %s would go negative (%d%+d)", h, old, d)
		}
		a.t.set(refKey(h), u64(uint64(nv)))
		switch {
		case old == 0 && nv > 0 && known:
			// Only a blob with a refcount entry can be queued: the queue
			// entry is written with a count of 0 and both go together
			// (reap), so a blob without one (new, or reaped) skips the read.
			if err := a.dequeueGarbage(h); err != nil {
				return err
			}
		case old > 0 && nv == 0:
			a.t.set(garbageKey(a.now, h), nil)
			a.t.set(garbageHashKey(h), u64(sortableTime(a.now)))
		}
	}
	return nil
}

func (a *applier) dequeueGarbage(h cas.Hash) error {
	v, ok, err := a.r.get(garbageHashKey(h))
	if err != nil || !ok {
		return err
	}
	if len(v) != 8 {
		return errCorrupt("garbage time of %s: %d bytes", h, len(v))
	}
	a.t.del(garbageKey(unsortableTime(binary.BigEndian.Uint64(v)), h))
	a.t.del(garbageHashKey(h))
	return nil
}

// dropLink removes one link of file n (its dentry is already gone): at
// zero links the inode goes and its blobs lose a reference.
func (a *applier) dropLink(n *Inode) error {
	if n.Nlink > 1 {
		n.Nlink--
		n.CtimeNs = a.now
		a.putInode(n)
		return nil
	}
	a.t.del(inodeKey(n.Ino))
	delta := map[cas.Hash]int64{}
	for _, x := range n.Extents {
		delta[x.Hash]--
	}
	if err := a.adjustRefs(delta); err != nil {
		return err
	}
	return a.addCounts(-1, 0, -n.Size)
}

// removeDir removes empty directory n, entry name in parent.
func (a *applier) removeDir(parent Ino, name string, n *Inode) error {
	a.t.del(dentryKey(parent, name+"/"))
	a.t.del(inodeKey(n.Ino))
	if err := a.touchDir(parent, -1); err != nil {
		return err
	}
	return a.addCounts(0, -1, 0)
}

// --- buckets ---

func bucketName(c *Command) string {
	if c.Bucket != nil && c.Bucket.Name != "" {
		return c.Bucket.Name
	}
	return c.BucketName
}

func (a *applier) createBucket() (Result, error) {
	name := bucketName(a.cmd)
	if err := ValidBucketName(name); err != nil {
		return Result{}, err
	}
	if _, ok, err := a.r.get(bucketKey(name)); err != nil {
		return Result{}, err
	} else if ok {
		return Result{}, fmt.Errorf("bucket %q: %w", name, ErrBucketExists)
	}
	dir, err := a.mkdir(RootIno, name, defaultDirMode, 0, 0)
	if err != nil {
		return Result{}, err
	}
	b := &Bucket{Name: name, Ino: dir.Ino, CreatedNs: a.now}
	if o := a.cmd.Bucket; o != nil {
		if err := validReplication(o); err != nil {
			return Result{}, err
		}
		b.Public, b.ChecksumSidecars, b.CacheControl = o.Public, o.ChecksumSidecars, o.CacheControl
		b.Replicas, b.WriteQuorum, b.Strict = o.Replicas, o.WriteQuorum, o.Strict
		b.UID, b.GID, b.FileMode, b.DirMode = o.UID, o.GID, o.FileMode&0o7777, o.DirMode&0o7777
		b.Owner, b.ACL = o.Owner, o.ACL
	}
	a.t.set(bucketKey(name), encodeBucket(b))
	return Result{Created: true, Inode: dir, Changed: []string{name}}, nil
}

func (a *applier) updateBucket() (Result, error) {
	o := a.cmd.Bucket
	if o == nil {
		return Result{}, fmt.Errorf("%w: OpUpdateBucket without Bucket", ErrInvalid)
	}
	b, err := a.r.Bucket(bucketName(a.cmd))
	if err != nil {
		return Result{}, err
	}
	if err := validReplication(o); err != nil {
		return Result{}, err
	}
	b.Public, b.ChecksumSidecars, b.CacheControl = o.Public, o.ChecksumSidecars, o.CacheControl
	b.Replicas, b.WriteQuorum, b.Strict = o.Replicas, o.WriteQuorum, o.Strict
	b.UID, b.GID, b.FileMode, b.DirMode = o.UID, o.GID, o.FileMode&0o7777, o.DirMode&0o7777
	b.ACL = o.ACL
	a.t.set(bucketKey(b.Name), encodeBucket(b))
	return Result{Changed: []string{b.Name}}, nil
}

func (a *applier) deleteBucket() (Result, error) {
	b, err := a.r.Bucket(bucketName(a.cmd))
	if err != nil {
		return Result{}, err
	}
	empty, err := a.r.isEmptyDir(b.Ino)
	if err != nil {
		return Result{}, err
	}
	if !empty {
		return Result{}, fmt.Errorf("bucket %q: %w", b.Name, ErrBucketNotEmpty)
	}
	a.t.del(bucketKey(b.Name))
	dir, err := a.r.Inode(b.Ino)
	if err != nil {
		return Result{}, err
	}
	if err := a.removeDir(RootIno, b.Name, dir); err != nil {
		return Result{}, err
	}
	return Result{ChangedAll: true}, nil
}

// --- files and directories ---

func validExtents(f *Inode) error {
	var off int64
	for i, x := range f.Extents {
		if x.Offset != off || x.Length <= 0 || x.Length > cas.MaxSize {
			return fmt.Errorf("%w: extent %d (offset %d, length %d) is not contiguous or has a bad length", ErrInvalid, i, x.Offset, x.Length)
		}
		off += x.Length
	}
	if off != f.Size {
		return fmt.Errorf("%w: extents cover %d bytes, size is %d", ErrInvalid, off, f.Size)
	}
	return nil
}

// checkReaped fails with ErrBlobReaped if a blob of the new file may have
// been deleted by a reap the proposer did not see. A blob with a refcount
// entry has not been reaped since it was last written, so it is safe.
func (a *applier) checkReaped(exts []Extent) error {
	for _, x := range exts {
		if _, ok, err := a.r.get(refKey(x.Hash)); err != nil {
			return err
		} else if ok {
			continue
		}
		at, ok, err := a.reapedMarker(x.Hash)
		if err != nil {
			return err
		}
		switch {
		case ok && len(at) != 8:
			return errCorrupt("reaped marker of %s: %d bytes", x.Hash, len(at))
		case ok && binary.BigEndian.Uint64(at) > a.cmd.StartIndex:
			return fmt.Errorf("blob %s reaped at index %d after start index %d: %w",
				x.Hash, binary.BigEndian.Uint64(at), a.cmd.StartIndex, ErrBlobReaped)
		case !ok && a.cmd.StartIndex+ReapMarkerWindow < a.index:
			return fmt.Errorf("start index %d older than the reap marker window at %d: %w",
				a.cmd.StartIndex, a.index, ErrBlobReaped)
		}
	}
	return nil
}

// reapedMarker returns blob h's reaped marker like a.r.get. While no
// marker exists at all (found with one scan per Apply), it answers "absent"
// without a read: an ingest then skips one negative lookup per blob.
func (a *applier) reapedMarker(h cas.Hash) ([]byte, bool, error) {
	if !a.st.reapedKnown {
		found := false
		p := []byte{pReaped}
		if err := a.t.Scan(p, prefixEnd(p), func(_, _ []byte) bool { found = true; return false }); err != nil {
			return nil, false, err
		}
		a.st.reapedKnown, a.st.anyReaped = true, found
	}
	if !a.st.anyReaped {
		return nil, false, nil
	}
	return a.r.get(reapedKey(h))
}

func (a *applier) putFile() (Result, error) {
	bk, err := a.bucket()
	if err != nil {
		return Result{}, err
	}
	if err := ValidatePath(a.cmd.Path); err != nil {
		return Result{}, err
	}
	f := a.cmd.File
	if f == nil {
		return Result{}, fmt.Errorf("%w: OpPutFile without File", ErrInvalid)
	}
	typ, mode := f.Type, f.Mode
	switch typ {
	case 0, TypeFile:
		typ = TypeFile
		mode = explicitMode(mode, defaultFileMode)
	case TypeSymlink:
		if len(f.Extents) > 0 || f.Size != int64(len(f.Target)) {
			return Result{}, fmt.Errorf("%w: a symlink has no extents and its size is len(Target)", ErrInvalid)
		}
		mode = explicitMode(mode, defaultSymlinkMode)
	default:
		return Result{}, fmt.Errorf("%w: OpPutFile of file type %d", ErrInvalid, typ)
	}
	if typ == TypeFile {
		if err := validExtents(f); err != nil {
			return Result{}, err
		}
	}
	comps, name := split(a.cmd.Path)
	parent, err := a.walkDirs(bk.Ino, comps, true, f.UID, f.GID)
	if err != nil {
		return Result{}, err
	}
	ino, t, found, err := a.r.child(parent, name, false)
	if err != nil {
		return Result{}, err
	}
	if found && t == TypeDir {
		return Result{}, fmt.Errorf("put %q: %w", a.cmd.Path, ErrIsDir)
	}
	if found && a.cmd.IfNoneMatchAny {
		return Result{}, fmt.Errorf("put %q: exists (If-None-Match: *): %w", a.cmd.Path, ErrPrecondition)
	}
	var old *Inode
	if found {
		if old, err = a.r.Inode(ino); err != nil {
			return Result{}, err
		}
	}
	if a.cmd.IfMatch != "" && (old == nil || old.ETag != a.cmd.IfMatch) {
		return Result{}, fmt.Errorf("put %q: If-Match %q: %w", a.cmd.Path, a.cmd.IfMatch, ErrPrecondition)
	}
	if err := a.checkReaped(f.Extents); err != nil {
		return Result{}, err
	}
	n := &Inode{
		Type: typ, Mode: mode, UID: f.UID, GID: f.GID, Nlink: 1,
		Size: f.Size, MtimeNs: f.MtimeNs, CtimeNs: a.now, AtimeNs: f.AtimeNs,
		ContentType: f.ContentType, ETag: f.ETag, SHA256: f.SHA256, Target: f.Target,
		Extents: slices.Clone(f.Extents), Xattrs: cloneXattrs(f.Xattrs),
	}
	if n.MtimeNs == 0 {
		n.MtimeNs = a.now
	}
	delta := map[cas.Hash]int64{}
	for _, x := range n.Extents {
		delta[x.Hash]++
	}
	if old != nil {
		// Replace in place: the inode number stays (stable for the mount
		// and for other hard links, which see the new content, as POSIX).
		n.Ino, n.Nlink = old.Ino, old.Nlink
		if f.Xattrs == nil {
			// New content keeps the file's extended attributes (its ACLs
			// among them), as a write to a local file does.
			n.Xattrs = cloneXattrs(old.Xattrs)
		}
		for _, x := range old.Extents {
			delta[x.Hash]--
		}
		if err := a.addCounts(0, 0, n.Size-old.Size); err != nil {
			return Result{}, err
		}
	} else {
		if n.Ino, err = a.newIno(f.Ino); err != nil {
			return Result{}, err
		}
		a.t.set(dentryKey(parent, name), encodeDentry(n.Ino, typ))
		if err := a.touchDir(parent, 0); err != nil {
			return Result{}, err
		}
		if err := a.addCounts(1, 0, n.Size); err != nil {
			return Result{}, err
		}
	}
	if old != nil && old.Type != typ {
		a.t.set(dentryKey(parent, name), encodeDentry(n.Ino, typ))
	}
	a.putInode(n)
	if err := a.adjustRefs(delta); err != nil {
		return Result{}, err
	}
	for _, h := range a.cmd.Under {
		if !slices.ContainsFunc(n.Extents, func(x Extent) bool { return x.Hash == h }) {
			continue // not a blob of this file
		}
		if err := a.markUnder(h, bk.Replicas); err != nil {
			return Result{}, err
		}
	}
	// The other names of a hard-linked file see the change too.
	return Result{Created: old == nil, Inode: n, Changed: []string{a.changed(a.cmd.Path)}, ChangedAll: n.Nlink > 1}, nil
}

func cloneXattrs(m map[string][]byte) map[string][]byte {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = bytes.Clone(v)
	}
	return out
}

func (a *applier) mkdirP() (Result, error) {
	bk, err := a.bucket()
	if err != nil {
		return Result{}, err
	}
	if err := ValidatePath(a.cmd.Path); err != nil {
		return Result{}, err
	}
	var mode, uid, gid uint32
	if f := a.cmd.File; f != nil {
		mode, uid, gid = f.Mode, f.UID, f.GID
	}
	comps, name := split(a.cmd.Path)
	parent, err := a.walkDirs(bk.Ino, comps, true, uid, gid)
	if err != nil {
		return Result{}, err
	}
	ino, t, found, err := a.r.child(parent, name, true)
	if err != nil {
		return Result{}, err
	}
	if found {
		if t != TypeDir {
			return Result{}, fmt.Errorf("mkdir %q: a file is in the way: %w", a.cmd.Path, ErrExists)
		}
		n, err := a.r.Inode(ino)
		return Result{Inode: n}, err
	}
	var want Ino
	if f := a.cmd.File; f != nil {
		want = f.Ino
	}
	n, err := a.mkdirIno(parent, name, mode, uid, gid, want)
	if err != nil {
		return Result{}, err
	}
	return Result{Created: true, Inode: n, Changed: []string{a.changed(a.cmd.Path)}}, nil
}

func (a *applier) delete() (Result, error) {
	bk, err := a.bucket()
	if err != nil {
		return Result{}, err
	}
	if a.cmd.Path == "" {
		return Result{}, fmt.Errorf("%w: cannot delete a bucket's root directory (use OpDeleteBucket)", ErrInvalid)
	}
	if err := ValidatePath(a.cmd.Path); err != nil {
		return Result{}, err
	}
	parent, name, ino, t, err := a.existing(bk.Ino, a.cmd.Path, "delete")
	if err != nil {
		return Result{}, err
	}
	n, err := a.r.Inode(ino)
	if err != nil {
		return Result{}, err
	}
	if a.cmd.IfMatch != "" && n.ETag != a.cmd.IfMatch {
		return Result{}, fmt.Errorf("delete %q: If-Match %q: %w", a.cmd.Path, a.cmd.IfMatch, ErrPrecondition)
	}
	if t == TypeDir {
		empty, err := a.r.isEmptyDir(ino)
		if err != nil {
			return Result{}, err
		}
		if !empty {
			return Result{}, fmt.Errorf("delete %q: %w", a.cmd.Path, ErrNotEmpty)
		}
		if err := a.removeDir(parent, name, n); err != nil {
			return Result{}, err
		}
	}
	linked := t != TypeDir && n.Nlink > 1
	if t != TypeDir {
		a.t.del(dentryKey(parent, name))
		if err := a.touchDir(parent, 0); err != nil {
			return Result{}, err
		}
		if err := a.dropLink(n); err != nil {
			return Result{}, err
		}
	}
	// A hard-linked file's other names see its link count fall.
	return Result{Changed: []string{a.changed(a.cmd.Path)}, ChangedAll: linked}, nil
}

func (a *applier) rename() (Result, error) {
	bk, err := a.bucket()
	if err != nil {
		return Result{}, err
	}
	src, dst := a.cmd.Path, a.cmd.DstPath
	replacedLinked := false // the file replaced at dst has other names
	if src == "" || dst == "" {
		return Result{}, fmt.Errorf("%w: cannot rename a bucket's root directory", ErrInvalid)
	}
	if err := ValidatePath(src); err != nil {
		return Result{}, err
	}
	if err := ValidatePath(dst); err != nil {
		return Result{}, err
	}
	srcComps, srcName := split(src)
	srcParent, err := a.walkDirs(bk.Ino, srcComps, false, 0, 0)
	if err != nil {
		return Result{}, err
	}
	ino, t, found, err := a.r.child(srcParent, srcName, false)
	if err != nil {
		return Result{}, err
	}
	if !found {
		return Result{}, fmt.Errorf("rename %q: %w", src, ErrNotFound)
	}
	if src == dst {
		return Result{}, nil
	}
	isDir := t == TypeDir
	if isDir && strings.HasPrefix(dst, src+"/") {
		return Result{}, fmt.Errorf("%w: cannot move directory %q into itself (%q)", ErrInvalid, src, dst)
	}
	n, err := a.r.Inode(ino)
	if err != nil {
		return Result{}, err
	}
	dstComps, dstName := split(dst)
	dstParent, err := a.walkDirs(bk.Ino, dstComps, true, n.UID, n.GID)
	if err != nil {
		return Result{}, err
	}
	dIno, dt, dFound, err := a.r.child(dstParent, dstName, false)
	if err != nil {
		return Result{}, err
	}
	if dFound {
		dn, err := a.r.Inode(dIno)
		if err != nil {
			return Result{}, err
		}
		switch {
		case dt == TypeDir && !isDir:
			return Result{}, fmt.Errorf("rename %q over directory %q: %w", src, dst, ErrExists)
		case dt == TypeDir:
			empty, err := a.r.isEmptyDir(dIno)
			if err != nil {
				return Result{}, err
			}
			if !empty {
				return Result{}, fmt.Errorf("rename %q over non-empty directory %q: %w", src, dst, ErrExists)
			}
			if err := a.removeDir(dstParent, dstName, dn); err != nil {
				return Result{}, err
			}
		case isDir:
			return Result{}, fmt.Errorf("rename directory %q over file %q: %w", src, dst, ErrNotDir)
		default:
			replacedLinked = dn.Nlink > 1
			a.t.del(dentryKey(dstParent, dstName))
			if err := a.dropLink(dn); err != nil {
				return Result{}, err
			}
		}
	}
	srcKey, dstKey, link := srcName, dstName, 0
	if isDir {
		srcKey, dstKey, link = srcName+"/", dstName+"/", 1
	}
	a.t.del(dentryKey(srcParent, srcKey))
	a.t.set(dentryKey(dstParent, dstKey), encodeDentry(ino, t))
	if err := a.touchDir(srcParent, -link); err != nil {
		return Result{}, err
	}
	if err := a.touchDir(dstParent, +link); err != nil {
		return Result{}, err
	}
	// Re-read: n is never one of the parents touched above (dst is not
	// inside src), but a stale copy here would silently undo a write.
	if n, err = a.r.Inode(ino); err != nil {
		return Result{}, err
	}
	n.CtimeNs = a.now
	a.putInode(n)
	return Result{Changed: []string{a.changed(src), a.changed(dst)}, ChangedAll: isDir || replacedLinked}, nil
}

func (a *applier) setAttr() (Result, error) {
	f := a.cmd.File
	if f == nil {
		return Result{}, fmt.Errorf("%w: OpSetAttr without File", ErrInvalid)
	}
	n, err := a.r.Lookup(a.cmd.BucketName, a.cmd.Path)
	if err != nil {
		return Result{}, err
	}
	n.Mode, n.UID, n.GID, n.MtimeNs, n.AtimeNs = f.Mode, f.UID, f.GID, f.MtimeNs, f.AtimeNs
	n.Xattrs = cloneXattrs(f.Xattrs)
	n.CtimeNs = a.now
	a.putInode(n)
	return Result{Inode: n, Changed: []string{a.changed(a.cmd.Path)}, ChangedAll: n.Nlink > 1 && n.Type != TypeDir}, nil
}

// --- garbage ---

func (a *applier) reap() (Result, error) {
	var freed []cas.Hash
	for _, h := range a.cmd.Reap {
		if rc, err := a.r.RefCount(h); err != nil {
			return Result{}, err
		} else if rc != 0 {
			continue
		}
		v, ok, err := a.r.get(garbageHashKey(h))
		if err != nil {
			return Result{}, err
		}
		if !ok {
			continue // never garbage, or already reaped
		}
		if len(v) != 8 {
			return Result{}, errCorrupt("garbage time of %s: %d bytes", h, len(v))
		}
		if unsortableTime(binary.BigEndian.Uint64(v)) >= a.cmd.ReapBefore {
			continue
		}
		if err := a.dequeueGarbage(h); err != nil {
			return Result{}, err
		}
		a.t.del(refKey(h))
		if err := a.markReaped(h); err != nil {
			return Result{}, err
		}
		freed = append(freed, h)
	}
	if err := a.pruneMarkers(); err != nil {
		return Result{}, err
	}
	return Result{Freed: freed}, nil
}

// reapOrphans approves deleting every blob of the command that has no
// refcount entry: no file references it and it is not queued as garbage
// (OpReap decides those). Such a copy is left by an upload that never
// committed, or was spared by a replica put whose upload the log then
// refused. The marker written at this index makes the log refuse any
// upload that started before it and names the blob (checkReaped), so a
// copy deleted on this word cannot be one an accepted file relies on; an
// upload started after it put its copies through the reap guard, which
// spares them.
func (a *applier) reapOrphans() (Result, error) {
	var freed []cas.Hash
	for _, h := range a.cmd.Reap {
		if _, ok, err := a.r.get(refKey(h)); err != nil {
			return Result{}, err
		} else if ok {
			continue // referenced, or garbage that OpReap will decide
		}
		if at, ok, err := a.r.get(reapedKey(h)); err != nil {
			return Result{}, err
		} else if ok && len(at) == 8 && binary.BigEndian.Uint64(at) == a.index {
			continue // listed twice
		}
		if err := a.markReaped(h); err != nil {
			return Result{}, err
		}
		freed = append(freed, h)
	}
	if err := a.pruneMarkers(); err != nil {
		return Result{}, err
	}
	return Result{Freed: freed}, nil
}

// markReaped records that the entry being applied approved deleting h
// (its x marker, moved to this index, and y index key), and drops h's
// under-replicated record: no copy is wanted any more.
func (a *applier) markReaped(h cas.Hash) error {
	if prev, ok, err := a.r.get(reapedKey(h)); err != nil {
		return err
	} else if ok && len(prev) == 8 {
		a.t.del(reapedIndexKey(binary.BigEndian.Uint64(prev), h))
	}
	a.t.set(reapedKey(h), u64(a.index))
	a.t.set(reapedIndexKey(a.index, h), nil)
	return a.clearUnder(h)
}

// existing finds the entry at path (valid, not "") in the bucket whose
// root is root: its parent directory, name, inode and type; ErrNotFound
// (naming verb and path) when it does not exist.
func (a *applier) existing(root Ino, path, verb string) (parent Ino, name string, ino Ino, t FileType, err error) {
	comps, name := split(path)
	if parent, err = a.walkDirs(root, comps, false, 0, 0); err != nil {
		return 0, "", 0, 0, err
	}
	ino, t, found, err := a.r.child(parent, name, false)
	if err != nil {
		return 0, "", 0, 0, err
	}
	if !found {
		return 0, "", 0, 0, fmt.Errorf("%s %q: %w", verb, path, ErrNotFound)
	}
	return parent, name, ino, t, nil
}

// link adds DstPath as one more name of the file or symlink at Path (a
// hard link): the inode's link count goes up; its content, attributes and
// number are shared. DstPath's parent must exist and DstPath must not.
func (a *applier) link() (Result, error) {
	bk, err := a.bucket()
	if err != nil {
		return Result{}, err
	}
	if err := ValidatePath(a.cmd.Path); err != nil {
		return Result{}, err
	}
	if err := ValidatePath(a.cmd.DstPath); err != nil {
		return Result{}, err
	}
	_, _, ino, t, err := a.existing(bk.Ino, a.cmd.Path, "link")
	if err != nil {
		return Result{}, err
	}
	if t == TypeDir {
		return Result{}, fmt.Errorf("link %q: %w", a.cmd.Path, ErrIsDir)
	}
	dcomps, dname := split(a.cmd.DstPath)
	dparent, err := a.walkDirs(bk.Ino, dcomps, false, 0, 0)
	if err != nil {
		return Result{}, err
	}
	if _, _, exists, err := a.r.child(dparent, dname, false); err != nil {
		return Result{}, err
	} else if exists {
		return Result{}, fmt.Errorf("link %q: %w", a.cmd.DstPath, ErrExists)
	}
	n, err := a.r.Inode(ino)
	if err != nil {
		return Result{}, err
	}
	a.t.set(dentryKey(dparent, dname), encodeDentry(ino, t))
	if err := a.touchDir(dparent, 0); err != nil {
		return Result{}, err
	}
	n.Nlink++
	n.CtimeNs = a.now
	a.putInode(n)
	// Every name of the file sees its new link count.
	return Result{Inode: n, Changed: []string{a.changed(a.cmd.Path), a.changed(a.cmd.DstPath)}, ChangedAll: true}, nil
}

// --- under-replicated blobs ---

// markUnder records blob h as under-replicated, written to a bucket of R
// replicas (0: the default). A blob already recorded keeps its record.
func (a *applier) markUnder(h cas.Hash, replicas int32) error {
	if _, ok, err := a.r.get(underKey(h)); err != nil || ok {
		return err
	}
	e := encoder{}
	e.varint(a.now)
	e.varint(int64(replicas))
	a.t.set(underKey(h), e.b)
	return a.addUnder(1)
}

// clearUnder drops blob h's under-replicated record, if any.
func (a *applier) clearUnder(h cas.Hash) error {
	if _, ok, err := a.r.get(underKey(h)); err != nil || !ok {
		return err
	}
	a.t.del(underKey(h))
	return a.addUnder(-1)
}

func (a *applier) addUnder(d int64) error {
	n, err := a.r.getU64(keyUnder)
	if err != nil {
		return err
	}
	a.t.set(keyUnder, u64(uint64(int64(n)+d)))
	return nil
}

// replicated drops the under-replicated records of the blobs repair found
// fully copied.
func (a *applier) replicated() (Result, error) {
	for _, h := range a.cmd.Replicated {
		if err := a.clearUnder(h); err != nil {
			return Result{}, err
		}
	}
	return Result{}, nil
}

// pruneMarkers deletes reaped markers written more than ReapMarkerWindow
// indices before this one.
func (a *applier) pruneMarkers() error {
	if a.index <= ReapMarkerWindow {
		return nil
	}
	lower := []byte{pReapedI}
	upper := reapedIndexKey(a.index-ReapMarkerWindow, cas.Hash{})
	var old [][]byte
	if err := a.t.Scan(lower, upper, func(k, _ []byte) bool {
		old = append(old, bytes.Clone(k))
		return true
	}); err != nil {
		return err
	}
	for _, k := range old {
		if len(k) != 1+8+32 {
			return errCorrupt("reaped index key of %d bytes", len(k))
		}
		var h cas.Hash
		copy(h[:], k[9:])
		a.t.del(k)
		a.t.del(reapedKey(h))
	}
	return nil
}

// validReplication checks a bucket's R and W.
func validReplication(b *Bucket) error {
	switch {
	case b.Replicas < Mirror:
		return fmt.Errorf("%w: replicas %d: must be a positive count, 0 (default) or mirror", ErrInvalid, b.Replicas)
	case b.Replicas > 16:
		return fmt.Errorf("%w: replicas %d: at most 16", ErrInvalid, b.Replicas)
	case b.WriteQuorum < 0:
		return fmt.Errorf("%w: write quorum %d: must not be negative", ErrInvalid, b.WriteQuorum)
	case b.Replicas > 0 && b.WriteQuorum > b.Replicas:
		return fmt.Errorf("%w: write quorum %d exceeds replicas %d", ErrInvalid, b.WriteQuorum, b.Replicas)
	}
	return nil
}

// setNode adds a cluster member or replaces its record. JoinedNs is kept
// from the first addition.
func (a *applier) setNode() (Result, error) {
	n := a.cmd.Node
	switch {
	case n == nil:
		return Result{}, fmt.Errorf("%w: OpSetNode without Node", ErrInvalid)
	case n.ID == 0:
		return Result{}, fmt.Errorf("%w: node ID 0", ErrInvalid)
	case n.Weight < 0 || math.IsNaN(n.Weight) || math.IsInf(n.Weight, 0):
		return Result{}, fmt.Errorf("%w: node weight %v", ErrInvalid, n.Weight)
	case n.URL == "" && !n.Witness:
		return Result{}, fmt.Errorf("%w: node %d has no URL", ErrInvalid, n.ID)
	}
	rec := *n
	if rec.Weight == 0 {
		rec.Weight = 1
	}
	if rec.State == 0 {
		rec.State = NodeActive
	}
	if rec.State != NodeActive && rec.State != NodeDraining {
		return Result{}, fmt.Errorf("%w: node state %d", ErrInvalid, rec.State)
	}
	rec.JoinedNs = a.now
	if old, err := a.r.Node(rec.ID); err == nil {
		rec.JoinedNs = old.JoinedNs
	} else if !errors.Is(err, ErrNotFound) {
		return Result{}, err
	}
	a.t.set(nodeKey(rec.ID), encodeNode(&rec))
	return Result{}, nil
}

func (a *applier) removeNode() (Result, error) {
	if a.cmd.Node == nil {
		return Result{}, fmt.Errorf("%w: OpRemoveNode without Node", ErrInvalid)
	}
	if _, err := a.r.Node(a.cmd.Node.ID); err != nil {
		return Result{}, err
	}
	a.t.del(nodeKey(a.cmd.Node.ID))
	return Result{}, nil
}

// checkRecord validates the record of an OpPutRecord/OpDeleteRecord.
func (a *applier) checkRecord(put bool) (*Record, error) {
	rec := a.cmd.Record
	switch {
	case rec == nil:
		return nil, fmt.Errorf("%w: %v without Record", ErrInvalid, a.cmd.Op)
	case rec.Kind != RecordKey && rec.Kind != RecordRule && rec.Kind != RecordLock:
		return nil, fmt.Errorf("%w: record kind %q", ErrInvalid, rec.Kind)
	case len(rec.Name) > MaxRecordName:
		return nil, fmt.Errorf("%w: record name longer than %d bytes", ErrInvalid, MaxRecordName)
	case !put && rec.Name == "":
		return nil, fmt.Errorf("%w: record without a name", ErrInvalid)
	case put && len(rec.Value) > MaxRecordValue:
		return nil, fmt.Errorf("%w: record value of %d bytes, more than %d", ErrInvalid, len(rec.Value), MaxRecordValue)
	}
	return rec, nil
}

func (a *applier) putRecord() (Result, error) {
	rec, err := a.checkRecord(true)
	if err != nil {
		return Result{}, err
	}
	name := rec.Name
	if name == "" {
		seq, err := a.r.getU64(seqKey(rec.Kind))
		if err != nil {
			return Result{}, err
		}
		seq++
		a.t.set(seqKey(rec.Kind), u64(seq))
		name = strconv.FormatUint(seq, 10)
	}
	key := recordKey(rec.Kind, name)
	if a.cmd.IfNoneMatchAny {
		if _, ok, err := a.r.get(key); err != nil {
			return Result{}, err
		} else if ok {
			return Result{}, fmt.Errorf("record %q: %w", name, ErrExists)
		}
	}
	a.t.set(key, append([]byte{recordVersion}, rec.Value...))
	return Result{Name: name}, nil
}

func (a *applier) deleteRecord() (Result, error) {
	rec, err := a.checkRecord(false)
	if err != nil {
		return Result{}, err
	}
	key := recordKey(rec.Kind, rec.Name)
	if _, ok, err := a.r.get(key); err != nil {
		return Result{}, err
	} else if !ok {
		return Result{}, fmt.Errorf("record %q: %w", rec.Name, ErrNotFound)
	}
	a.t.del(key)
	return Result{Name: rec.Name}, nil
}
