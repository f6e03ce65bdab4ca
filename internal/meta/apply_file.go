package meta

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/cairn-fs/cairn/internal/cas"
)

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
	case TypeFIFO, TypeSocket, TypeCharDev, TypeBlockDev:
		if len(f.Extents) > 0 || f.Size != 0 || f.Target != "" || (f.Rdev != 0 && !typ.Device()) {
			return Result{}, fmt.Errorf("%w: a special file has no content, no target, and a device number only if it is a device", ErrInvalid)
		}
		mode = explicitMode(mode, defaultFileMode)
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
		ContentType: f.ContentType, ETag: f.ETag, SHA256: f.SHA256, Target: f.Target, Rdev: f.Rdev,
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
		if err := a.trashFile(bk, a.cmd.Path, old, n); err != nil { // apply_trash.go
			return Result{}, err
		}
		for _, x := range old.Extents {
			delta[x.Hash]--
		}
		if err := a.addCounts(0, 0, n.Size-old.Size); err != nil {
			return Result{}, err
		}
	} else {
		if _, err := a.nameChange(parent); err != nil { // owners.go
			return Result{}, err
		}
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
		if _, err := a.nameChange(parent); err != nil {
			return Result{}, err
		}
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
	if _, err := a.nameChange(dparent); err != nil {
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
