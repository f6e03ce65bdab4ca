package meta

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
)

// S3 versioning over the trash (design 0007, "S3 versioning"). A bucket
// whose trash retention is TrashForever is versioned: every file body a
// write, a delete or a rename removes stays as a trash entry until it is
// deleted by version. The versions of a path are its live file and its
// trash entries:
//
//   - a file version is named by its modification time and ETag, which an
//     overwrite (the entry keeps the inode as it was), a restore and a
//     promotion (below) all keep; store/versions.go turns them into S3
//     version IDs;
//   - an entry of a deletion (Replaced false) is also the delete marker
//     that ended its version: it is named by the entry's key (deletion
//     time and inode number).
//
// OpTrashDrop drops one entry. OpVersionDelete is S3's DELETE of one
// version or delete marker; it is resolved here, in the state machine, so
// that it acts on exactly that version whatever writes run beside it.

// TrashForever as Bucket.TrashNs keeps the bucket's trash entries without
// expiry: the bucket is versioned (S3's PutBucketVersioning Enabled). It
// is the largest whole number of seconds an int64 of nanoseconds holds, so
// that it survives a conversion to seconds and back (store.BucketInfo).
const TrashForever int64 = (1<<63 - 1) / 1_000_000_000 * 1_000_000_000

// Versioned reports whether bucket b keeps every version (TrashForever).
func Versioned(b *Bucket) bool { return b.TrashNs == TrashForever }

// IsVersion reports whether n is the file version named by its
// modification time mtimeNs and etag.
func IsVersion(n *Inode, mtimeNs int64, etag string) bool {
	return n.Type != TypeDir && n.MtimeNs == mtimeNs && n.ETag == etag
}

// TrashEntryAt returns the entry of path deleted at t with inode ino, or
// ErrNotFound.
func (r *Reader) TrashEntryAt(bucket, path string, t int64, ino Ino) (*TrashEntry, error) {
	v, ok, err := r.get(trashKey(bucket, path, t, ino))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%q in the trash of %q at %d: %w", path, bucket, t, ErrNotFound)
	}
	return decodeTrashEntry(bucket, path, v)
}

// TrashPos is a position in a path's trash entries, which are ordered by
// deletion time and then inode number: the entry deleted at At with
// inode Ino.
type TrashPos struct {
	At  int64
	Ino Ino
}

// PathTrash returns up to limit (at least 1) entries of exactly path,
// newest first: those before the position before (exclusive), or the
// newest ones when before is nil. more reports older entries beyond them.
// It reads every entry of path before the position once and keeps limit
// of them: memory is bounded by limit, time by the path's entries.
func (r *Reader) PathTrash(bucket, path string, before *TrashPos, limit int) (entries []*TrashEntry, more bool, err error) {
	limit = max(limit, 1)
	pre := trashPathPrefix(bucket, path)
	upper := prefixEnd(pre)
	if before != nil {
		upper = trashKey(bucket, path, before.At, before.Ino)
	}
	type kvp struct{ k, v []byte }
	ring := make([]kvp, 0, min(limit, 64))
	next, seen := 0, 0
	err = r.r.Scan(pre, upper, func(k, v []byte) bool {
		e := kvp{bytes.Clone(k), bytes.Clone(v)}
		if len(ring) < limit {
			ring = append(ring, e)
		} else {
			ring[next] = e
			next = (next + 1) % limit
		}
		seen++
		return true
	})
	if err != nil {
		return nil, false, err
	}
	// Oldest kept first: ring[next:], then ring[:next]; newest first out.
	ordered := append(slices.Clone(ring[next:]), ring[:next]...)
	for i := len(ordered) - 1; i >= 0; i-- {
		if _, _, err := parseTrashKey(bucket, ordered[i].k); err != nil {
			return nil, false, err
		}
		e, err := decodeTrashEntry(bucket, path, ordered[i].v)
		if err != nil {
			return nil, false, err
		}
		entries = append(entries, e)
	}
	return entries, seen > len(ring), nil
}

// TrashPathAfter returns the first path (in byte order) that starts with
// prefix, sorts after after, and has trash entries; ok is false when none
// does. One seek.
func (r *Reader) TrashPathAfter(bucket, prefix, after string) (path string, ok bool, err error) {
	lower := append(trashBucketPrefix(bucket), prefix...)
	upper := prefixEnd(lower)
	if after >= prefix {
		// Past every entry of after itself: a path that extends after
		// has a byte above 0 where after's key has its 0.
		lower = prefixEnd(trashPathPrefix(bucket, after))
	}
	if upper != nil && bytes.Compare(lower, upper) >= 0 {
		return "", false, nil
	}
	var perr error
	err = r.r.Scan(lower, upper, func(k, _ []byte) bool {
		path, _, perr = parseTrashKey(bucket, k)
		ok = perr == nil
		return false
	})
	if err == nil {
		err = perr
	}
	return path, ok, err
}

// newestVersionEntry returns the newest entry of path that holds the
// version (mtimeNs, etag), or nil.
func (r *Reader) newestVersionEntry(bucket, path string, mtimeNs int64, etag string) (*TrashEntry, error) {
	pre := trashPathPrefix(bucket, path)
	var last []byte
	var lastErr error
	err := r.r.Scan(pre, prefixEnd(pre), func(_, v []byte) bool {
		e, err := decodeTrashEntry(bucket, path, v)
		if err != nil {
			lastErr = err
			return false
		}
		if IsVersion(e.Inode, mtimeNs, etag) {
			last = bytes.Clone(v)
		}
		return true
	})
	if err == nil {
		err = lastErr
	}
	if err != nil || last == nil {
		return nil, err
	}
	return decodeTrashEntry(bucket, path, last)
}

// trashDrop applies OpTrashDrop: the entry of Path deleted at Trash.At
// with inode File.Ino goes, with its references. Result.Count is 1, or 0
// when there is no such entry (not an error: dropping is idempotent).
func (a *applier) trashDrop() (Result, error) {
	c := a.cmd
	if c.Trash == nil || c.File == nil {
		return Result{}, fmt.Errorf("%w: OpTrashDrop needs Trash.At and File.Ino", ErrInvalid)
	}
	if _, err := a.bucket(); err != nil {
		return Result{}, err
	}
	e, err := a.r.TrashEntryAt(c.BucketName, c.Path, c.Trash.At, c.File.Ino)
	if errors.Is(err, ErrNotFound) {
		return Result{}, nil
	}
	if err != nil {
		return Result{}, err
	}
	if err := a.dropTrashEntry(e, false); err != nil {
		return Result{}, err
	}
	return Result{Count: 1}, nil
}

// versionDelete applies OpVersionDelete, S3's DELETE of a version, in one
// of two forms:
//
//   - Trash.At 0: the file version of Path named by File.MtimeNs and
//     File.ETag goes for good. When it is the live file, the file is
//     removed without a trash entry, and if the path's newest entry is
//     the version it replaced (Replaced), that version becomes the file
//     again (promoted: a new inode with the entry's attributes, times and
//     references); when the newest entry is a deletion, that delete
//     marker is then the path's latest. Otherwise the newest entry
//     holding that version is dropped with its references (a deletion's
//     delete marker goes with it).
//   - Trash.At set: the delete marker of the entry of Path deleted at
//     Trash.At with inode File.Ino goes. When no file is at Path and the
//     entry is the path's newest, its version is promoted (the undelete);
//     otherwise the entry is kept as a replaced version (the deletion is
//     forgotten, the version stays).
//
// Result.Count is 1 when something changed and 0 when nothing matched
// (not an error: S3's DELETE of a version is idempotent); Result.Inode is
// the promoted file, if any. A promotion refuses (ErrExists) a directory
// at Path.
func (a *applier) versionDelete() (Result, error) {
	c := a.cmd
	if c.Trash == nil || c.File == nil {
		return Result{}, fmt.Errorf("%w: OpVersionDelete needs File and Trash", ErrInvalid)
	}
	bk, err := a.bucket()
	if err != nil {
		return Result{}, err
	}
	if err := ValidatePath(c.Path); err != nil {
		return Result{}, err
	}
	live, parent, name, err := a.liveFile(bk, c.Path)
	if err != nil {
		return Result{}, err
	}
	if c.Trash.At != 0 {
		return a.markerDelete(bk, live)
	}
	if live != nil && IsVersion(live, c.File.MtimeNs, c.File.ETag) {
		linked := live.Nlink > 1
		if _, err := a.nameChange(parent); err != nil { // owners.go
			return Result{}, err
		}
		a.t.del(dentryKey(parent, name))
		if err := a.touchDir(parent, 0); err != nil {
			return Result{}, err
		}
		if err := a.dropLink(live); err != nil {
			return Result{}, err
		}
		res := Result{Count: 1, Changed: []string{a.changed(c.Path)}, ChangedAll: linked}
		newest, err := a.r.newestTrash(bk.Name, c.Path, 0)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return Result{}, err
		}
		if newest != nil && newest.Replaced {
			if res.Inode, err = a.promote(bk, newest); err != nil {
				return Result{}, err
			}
		}
		return res, nil
	}
	e, err := a.r.newestVersionEntry(bk.Name, c.Path, c.File.MtimeNs, c.File.ETag)
	if err != nil || e == nil {
		return Result{}, err
	}
	if err := a.dropTrashEntry(e, false); err != nil {
		return Result{}, err
	}
	return Result{Count: 1}, nil
}

// markerDelete is versionDelete of a delete marker; live is the file at
// the command's path, or nil.
func (a *applier) markerDelete(bk *Bucket, live *Inode) (Result, error) {
	c := a.cmd
	e, err := a.r.TrashEntryAt(bk.Name, c.Path, c.Trash.At, c.File.Ino)
	if errors.Is(err, ErrNotFound) {
		return Result{}, nil
	}
	if err != nil {
		return Result{}, err
	}
	if e.Replaced {
		return Result{}, nil // a replaced version ends with no delete marker
	}
	newest, err := a.r.newestTrash(bk.Name, c.Path, 0)
	if err != nil {
		return Result{}, err
	}
	if live == nil && newest.DeletedNs == e.DeletedNs && newest.Inode.Ino == e.Inode.Ino {
		n, err := a.promote(bk, e)
		if err != nil {
			return Result{}, err
		}
		return Result{Count: 1, Inode: n, Changed: []string{a.changed(c.Path)}}, nil
	}
	e.Replaced = true
	a.t.set(trashKey(e.Bucket, e.Path, e.DeletedNs, e.Inode.Ino), encodeTrashEntry(e))
	return Result{Count: 1}, nil
}

// liveFile returns the file (not a directory) at path in bucket bk with
// its parent directory and name, or a nil inode when there is none.
func (a *applier) liveFile(bk *Bucket, path string) (*Inode, Ino, string, error) {
	parent, name, ino, t, err := a.existing(bk.Ino, path, "version of")
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrNotDir) {
		return nil, 0, "", nil
	}
	if err != nil || t == TypeDir {
		return nil, 0, "", err
	}
	n, err := a.r.Inode(ino)
	if err != nil {
		return nil, 0, "", err
	}
	return n, parent, name, nil
}

// promote makes trash entry e the file at its path again: a new inode with
// the entry's attributes and times (its version name is unchanged), its
// references moved from the entry; missing parents are made. Anything at
// the path refuses it (ErrExists).
func (a *applier) promote(bk *Bucket, e *TrashEntry) (*Inode, error) {
	comps, name := split(e.Path)
	n := *e.Inode
	parent, err := a.walkDirs(bk.Ino, comps, true, n.UID, n.GID)
	if err != nil {
		return nil, err
	}
	if _, _, found, err := a.r.child(parent, name, false); err != nil {
		return nil, err
	} else if found {
		return nil, fmt.Errorf("restore version of %q: %w: a directory or file is at its path", e.Path, ErrExists)
	}
	if n.Ino, err = a.newIno(0); err != nil {
		return nil, err
	}
	n.Nlink, n.CtimeNs = 1, a.now
	n.Extents, n.Xattrs = slices.Clone(n.Extents), cloneXattrs(n.Xattrs)
	if _, err := a.nameChange(parent); err != nil { // owners.go
		return nil, err
	}
	a.t.set(dentryKey(parent, name), encodeDentry(n.Ino, n.Type))
	if err := a.touchDir(parent, 0); err != nil {
		return nil, err
	}
	a.putInode(&n)
	if err := a.addCounts(1, 0, n.Size); err != nil {
		return nil, err
	}
	if err := a.dropTrashEntry(e, true); err != nil { // its references are the file's now
		return nil, err
	}
	return &n, nil
}

// Pos returns the position of entry e among its path's entries.
func (e *TrashEntry) Pos() TrashPos { return TrashPos{At: e.DeletedNs, Ino: e.Inode.Ino} }
