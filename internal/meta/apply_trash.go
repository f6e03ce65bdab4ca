package meta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cairn-fs/cairn/internal/cas"
)

// The trash (design 0007): a bucket with a retention (Bucket.TrashNs)
// keeps the body of every file name it loses — a delete, a replacing put
// or a replacing rename — as a trash entry that holds references to its
// blobs, until OpTrashRestore makes it a file again or OpTrashPurge drops
// it.
//
//	t bucket 0 path 0 time(8) ino(8) → entry (encodeTrashEntry)
//	T bucket 0 time(8) ino(8) path   → empty: the entries by deletion time
//	m "trash" bucket                 → entries i64, bytes i64

const (
	pTrash     = 't'
	pTrashTime = 'T'
	// MaxTrashPurge bounds the entries one OpTrashPurge drops.
	MaxTrashPurge = 10000
)

// TrashEntry is a deleted or replaced file kept by a bucket's trash.
type TrashEntry struct {
	Bucket    string
	Path      string
	DeletedNs int64
	Replaced  bool // overwritten, not deleted
	Origin    Origin
	Inode     *Inode // the file as it was: size, mode, owner, times, extents, xattrs
}

func trashBucketPrefix(bucket string) []byte {
	return append(append([]byte{pTrash}, bucket...), 0)
}

func trashPathPrefix(bucket, path string) []byte {
	return append(append(trashBucketPrefix(bucket), path...), 0)
}

func trashKey(bucket, path string, t int64, ino Ino) []byte {
	k := binary.BigEndian.AppendUint64(trashPathPrefix(bucket, path), sortableTime(t))
	return binary.BigEndian.AppendUint64(k, uint64(ino))
}

func trashTimePrefix(bucket string) []byte {
	return append(append([]byte{pTrashTime}, bucket...), 0)
}

func trashTimeKey(bucket string, t int64, ino Ino, path string) []byte {
	k := binary.BigEndian.AppendUint64(trashTimePrefix(bucket), sortableTime(t))
	k = binary.BigEndian.AppendUint64(k, uint64(ino))
	return append(k, path...)
}

func trashCountKey(bucket string) []byte { return append([]byte("mtrash"), bucket...) }

const trashEntryVersion = 1

func encodeTrashEntry(e *TrashEntry) []byte {
	enc := encoder{}
	enc.byte1(trashEntryVersion)
	enc.varint(e.DeletedNs)
	enc.bool1(e.Replaced)
	enc.uvarint(e.Origin.Node)
	enc.str(e.Origin.Frontend)
	enc.str(e.Origin.Key)
	enc.uvarint(uint64(e.Inode.Ino))
	appendInodeBody(&enc, e.Inode)
	return enc.b
}

func decodeTrashEntry(bucket, path string, v []byte) (*TrashEntry, error) {
	d := decoder{b: v}
	if ver := d.byte1(); d.err == nil && ver != trashEntryVersion {
		return nil, errCorrupt("trash entry version %d", ver)
	}
	e := &TrashEntry{Bucket: bucket, Path: path, DeletedNs: d.varint(), Replaced: d.bool1()}
	e.Origin = Origin{Node: d.uvarint(), Frontend: d.str(), Key: d.str()}
	e.Inode = &Inode{Ino: Ino(d.uvarint())}
	decodeInodeBody(&d, e.Inode, true)
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("decode trash entry: %w", err)
	}
	return e, nil
}

// parseTrashKey splits a t key of bucket into the path and time.
func parseTrashKey(bucket string, k []byte) (path string, t int64, err error) {
	rest := k[len(trashBucketPrefix(bucket)):]
	if len(rest) < 1+16 || rest[len(rest)-17] != 0 {
		return "", 0, errCorrupt("trash key of %d bytes", len(k))
	}
	return string(rest[:len(rest)-17]), unsortableTime(binary.BigEndian.Uint64(rest[len(rest)-16:])), nil
}

// trashFile keeps n, which loses its name path in bucket bk, in the
// bucket's trash. A replaced file that was empty, or whose content the
// new one repeats, leaves nothing worth keeping, but in a versioned
// bucket.
func (a *applier) trashFile(bk *Bucket, path string, n *Inode, replaced *Inode) error {
	if bk.TrashNs <= 0 || n.Type == TypeDir {
		return nil
	}
	// A versioned bucket keeps every version, an empty or a repeated one
	// too: each has its S3 version ID (apply_version.go).
	if replaced != nil && !Versioned(bk) && (n.Size == 0 || slices.Equal(n.Extents, replaced.Extents) && n.Target == replaced.Target) {
		return nil
	}
	e := &TrashEntry{Bucket: bk.Name, Path: path, DeletedNs: a.now, Replaced: replaced != nil, Inode: n}
	if o := a.cmd.Origin; o != nil {
		e.Origin = *o
	}
	// Two removals of the same inode at the same instant: the later one
	// takes the next free nanosecond, so that no entry is overwritten.
	for {
		if _, err := a.t.Get(trashKey(bk.Name, path, e.DeletedNs, n.Ino)); err != nil {
			break
		}
		e.DeletedNs++
	}
	a.t.set(trashKey(bk.Name, path, e.DeletedNs, n.Ino), encodeTrashEntry(e))
	a.t.set(trashTimeKey(bk.Name, e.DeletedNs, n.Ino, path), nil)
	delta := map[cas.Hash]int64{}
	for _, x := range n.Extents {
		delta[x.Hash]++
	}
	if err := a.adjustRefs(delta); err != nil {
		return err
	}
	return a.addTrashCounts(bk.Name, 1, n.Size)
}

func (a *applier) addTrashCounts(bucket string, entries, nbytes int64) error {
	c, b, err := a.r.TrashUsage(bucket)
	if err != nil {
		return err
	}
	c, b = c+entries, b+nbytes
	if c == 0 {
		a.t.del(trashCountKey(bucket))
		return nil
	}
	a.t.set(trashCountKey(bucket), binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(c)), uint64(b)))
	return nil
}

// dropTrashEntry removes entry e's keys and, unless the references move
// to a restored file, its references.
func (a *applier) dropTrashEntry(e *TrashEntry, keepRefs bool) error {
	a.t.del(trashKey(e.Bucket, e.Path, e.DeletedNs, e.Inode.Ino))
	a.t.del(trashTimeKey(e.Bucket, e.DeletedNs, e.Inode.Ino, e.Path))
	if !keepRefs {
		delta := map[cas.Hash]int64{}
		for _, x := range e.Inode.Extents {
			delta[x.Hash]--
		}
		if err := a.adjustRefs(delta); err != nil {
			return err
		}
	}
	return a.addTrashCounts(e.Bucket, -1, -e.Inode.Size)
}

// trashRestore applies OpTrashRestore: the newest entry of Path deleted
// at or before Trash.At becomes the file at DstPath (Path when empty),
// with a new inode number; missing parent directories are made. A file or
// directory at the destination refuses it (ErrExists): a restore never
// overwrites.
func (a *applier) trashRestore() (Result, error) {
	bk, err := a.bucket()
	if err != nil {
		return Result{}, err
	}
	if err := ValidatePath(a.cmd.Path); err != nil {
		return Result{}, err
	}
	dst := a.cmd.DstPath
	if dst == "" {
		dst = a.cmd.Path
	}
	if err := ValidatePath(dst); err != nil {
		return Result{}, err
	}
	var at int64
	if a.cmd.Trash != nil {
		at = a.cmd.Trash.At
	}
	e, err := a.r.newestTrash(bk.Name, a.cmd.Path, at)
	if err != nil {
		return Result{}, err
	}
	comps, name := split(dst)
	n := *e.Inode
	parent, err := a.walkDirs(bk.Ino, comps, true, n.UID, n.GID)
	if err != nil {
		return Result{}, err
	}
	if _, _, found, err := a.r.child(parent, name, false); err != nil {
		return Result{}, err
	} else if found {
		return Result{}, fmt.Errorf("restore %q from the trash: %w: %q (move it away or restore to another path)", a.cmd.Path, ErrExists, dst)
	}
	if n.Ino, err = a.newIno(0); err != nil {
		return Result{}, err
	}
	n.Nlink, n.CtimeNs = 1, a.now
	n.Extents, n.Xattrs = slices.Clone(n.Extents), cloneXattrs(n.Xattrs)
	if _, err := a.nameChange(parent); err != nil { // owners.go
		return Result{}, err
	}
	a.t.set(dentryKey(parent, name), encodeDentry(n.Ino, n.Type))
	if err := a.touchDir(parent, 0); err != nil {
		return Result{}, err
	}
	a.putInode(&n)
	if err := a.addCounts(1, 0, n.Size); err != nil {
		return Result{}, err
	}
	if err := a.dropTrashEntry(e, true); err != nil { // its references are the file's now
		return Result{}, err
	}
	return Result{Created: true, Inode: &n, Changed: []string{a.changed(dst)}}, nil
}

// trashPurge applies OpTrashPurge: up to Limit entries of the bucket
// deleted before Before go, with their references. Result.Count says how
// many.
func (a *applier) trashPurge() (Result, error) {
	c := a.cmd.Trash
	if c == nil || c.Limit < 1 || c.Limit > MaxTrashPurge {
		return Result{}, fmt.Errorf("%w: OpTrashPurge needs a limit of 1 to %d", ErrInvalid, MaxTrashPurge)
	}
	name := a.cmd.BucketName
	if _, err := a.bucket(); err != nil {
		return Result{}, err
	}
	pre := trashTimePrefix(name)
	var keys [][]byte
	err := a.t.Scan(pre, append(slices.Clone(pre), binary.BigEndian.AppendUint64(nil, sortableTime(c.Before))...), func(k, _ []byte) bool {
		keys = append(keys, bytes.Clone(k))
		return len(keys) < c.Limit
	})
	if err != nil {
		return Result{}, err
	}
	for _, k := range keys {
		rest := k[len(pre):]
		if len(rest) < 16 {
			return Result{}, errCorrupt("trash time key of %d bytes", len(k))
		}
		t := unsortableTime(binary.BigEndian.Uint64(rest))
		ino := Ino(binary.BigEndian.Uint64(rest[8:]))
		path := string(rest[16:])
		v, err := a.t.Get(trashKey(name, path, t, ino))
		if err != nil {
			return Result{}, errCorrupt("trash entry of %q at %d missing: %v", path, t, err)
		}
		e, err := decodeTrashEntry(name, path, v)
		if err != nil {
			return Result{}, err
		}
		if err := a.dropTrashEntry(e, false); err != nil {
			return Result{}, err
		}
	}
	return Result{Count: len(keys)}, nil
}

// newestTrash returns the newest entry of path deleted at or before at
// (0: any time).
func (r *Reader) newestTrash(bucket, path string, at int64) (*TrashEntry, error) {
	pre := trashPathPrefix(bucket, path)
	upper := prefixEnd(pre)
	if at != 0 {
		upper = binary.BigEndian.AppendUint64(slices.Clone(pre), sortableTime(at)+1)
	}
	var last, lastV []byte
	if err := r.r.Scan(pre, upper, func(k, v []byte) bool {
		last, lastV = bytes.Clone(k), bytes.Clone(v)
		return true
	}); err != nil {
		return nil, err
	}
	if last == nil {
		return nil, fmt.Errorf("%q in the trash of %q: %w", path, bucket, ErrNotFound)
	}
	_, _, err := parseTrashKey(bucket, last)
	if err != nil {
		return nil, err
	}
	return decodeTrashEntry(bucket, path, lastV)
}

// Trash calls fn for the bucket's trash entries whose path starts with
// prefix, by path and then deletion time, until fn returns false.
func (r *Reader) Trash(bucket, prefix string, fn func(*TrashEntry) bool) error {
	return r.TrashFrom(bucket, prefix, nil, func(e *TrashEntry, _ []byte) bool { return fn(e) })
}

// TrashFrom is Trash from the entry after position after (nil: the
// first), a position fn was given: the entry's key inside the bucket's
// trash, which a listing continues from (a page's end).
func (r *Reader) TrashFrom(bucket, prefix string, after []byte, fn func(e *TrashEntry, pos []byte) bool) error {
	base := trashBucketPrefix(bucket)
	lower := append(slices.Clone(base), prefix...)
	upper := prefixEnd(lower)
	if after != nil {
		from := append(append(slices.Clone(base), after...), 0) // the key right after it
		if string(from) > string(lower) {
			lower = from
		}
	}
	var derr error
	err := r.r.Scan(lower, upper, func(k, v []byte) bool {
		path, _, err := parseTrashKey(bucket, k)
		if err != nil {
			derr = err
			return false
		}
		e, err := decodeTrashEntry(bucket, path, v)
		if err != nil {
			derr = err
			return false
		}
		return fn(e, k[len(base):])
	})
	if err != nil {
		return err
	}
	return derr
}

// TrashUsage returns how many entries the bucket's trash holds and their
// bytes.
func (r *Reader) TrashUsage(bucket string) (entries, nbytes int64, err error) {
	v, ok, err := r.get(trashCountKey(bucket))
	if err != nil || !ok {
		return 0, 0, err
	}
	if len(v) != 16 {
		return 0, 0, errCorrupt("trash counts of %d bytes", len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:])), nil
}

// trashEmpty reports whether the bucket's trash holds no entry.
func (r *Reader) trashEmpty(bucket string) (bool, error) {
	n, _, err := r.TrashUsage(bucket)
	return n == 0, err
}

func appendTrashFields(e *encoder, c *Command) {
	e.bool1(c.Origin != nil)
	if o := c.Origin; o != nil {
		e.uvarint(o.Node)
		e.str(o.Frontend)
		e.str(o.Key)
	}
	e.bool1(c.Trash != nil)
	if t := c.Trash; t != nil {
		e.varint(t.At)
		e.varint(t.Before)
		e.uvarint(uint64(t.Limit))
	}
	e.bool1(c.Snap != nil)
	if s := c.Snap; s != nil {
		e.str(s.Name)
		e.uvarint(s.ID)
		e.uvarint(uint64(s.Limit))
	}
}

func decodeTrashFields(d *decoder, c *Command) {
	if d.bool1() {
		c.Origin = &Origin{Node: d.uvarint(), Frontend: d.str(), Key: d.str()}
	}
	if d.bool1() {
		c.Trash = &TrashCmd{At: d.varint(), Before: d.varint(), Limit: int(d.uvarint())}
	}
	if d.bool1() {
		c.Snap = &SnapCmd{Name: d.str(), ID: d.uvarint(), Limit: int(d.uvarint())}
	}
}

var errTrashNotEmpty = errors.New("its trash holds files: empty it first (cairn trash empty)")
