package meta

import (
	"fmt"
	"strings"
)

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
	po, err := a.nameChange(parent) // owners.go
	if err != nil {
		return nil, err
	}
	ino, err := a.newIno(want)
	if err != nil {
		return nil, err
	}
	mode = explicitMode(mode, defaultDirMode)
	n := &Inode{Ino: ino, Type: TypeDir, Mode: mode, UID: uid, GID: gid, Nlink: 2, MtimeNs: a.now, CtimeNs: a.now}
	a.putInode(n)
	a.t.set(dentryKey(parent, name+"/"), encodeDentry(ino, TypeDir))
	a.adopt(ino, po)
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

// removeDir removes empty directory n, entry name in parent.
func (a *applier) removeDir(parent Ino, name string, n *Inode) error {
	// Both the parent's names and the removed directory's (found empty)
	// are decided here.
	if _, err := a.nameChange(parent); err != nil {
		return err
	}
	if _, err := a.nameChange(n.Ino); err != nil {
		return err
	}
	if err := a.dropOwner(n.Ino); err != nil {
		return err
	}
	a.t.del(dentryKey(parent, name+"/"))
	a.t.del(inodeKey(n.Ino))
	if err := a.touchDir(parent, -1); err != nil {
		return err
	}
	return a.addCounts(0, -1, 0)
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
		if a.cmd.Exclusive {
			return Result{}, fmt.Errorf("mkdir %q: %w", a.cmd.Path, ErrExists)
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
		if err := a.trashFile(bk, a.cmd.Path, n, nil); err != nil { // apply_trash.go
			return Result{}, err
		}
		if _, err := a.nameChange(parent); err != nil {
			return Result{}, err
		}
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
	dstParent, err := a.walkDirs(bk.Ino, dstComps, !a.cmd.NoParents, n.UID, n.GID)
	if err != nil {
		return Result{}, err
	}
	dIno, dt, dFound, err := a.r.child(dstParent, dstName, false)
	if err != nil {
		return Result{}, err
	}
	if _, err := a.nameChange(srcParent); err != nil {
		return Result{}, err
	}
	if _, err := a.nameChange(dstParent); err != nil {
		return Result{}, err
	}
	if dFound && a.cmd.Exclusive {
		return Result{}, fmt.Errorf("rename %q: %q exists: %w", src, dst, ErrExists)
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
			if err := a.trashFile(bk, dst, dn, n); err != nil {
				return Result{}, err
			}
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
