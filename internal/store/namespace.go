package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cairn-fs/cairn/internal/meta"
)

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
	return s.putNew(ctx, bucket, path, f)
}

// The kinds of special file (Store.Mknod, ObjectInfo.Special): mknod(2)'s
// S_IFMT bits, the same on every Linux architecture.
const (
	SpecialFIFO   uint32 = 0o010000
	SpecialChar   uint32 = 0o020000
	SpecialBlock  uint32 = 0o060000
	SpecialSocket uint32 = 0o140000
)

var specialTypes = map[uint32]meta.FileType{
	SpecialFIFO: meta.TypeFIFO, SpecialSocket: meta.TypeSocket, SpecialChar: meta.TypeCharDev, SpecialBlock: meta.TypeBlockDev,
}

// special is the ObjectInfo.Special of a file type (0 for no special file).
func special(t meta.FileType) uint32 {
	for k, v := range specialTypes {
		if v == t {
			return k
		}
	}
	return 0
}

// Mknod implements Store.
func (s *Local) Mknod(ctx context.Context, bucket, path string, kind, rdev uint32, attrs Attrs) (ObjectInfo, error) {
	if err := checkPath(bucket, path); err != nil {
		return ObjectInfo{}, err
	}
	typ, ok := specialTypes[kind]
	if path == "" || !ok {
		return ObjectInfo{}, fmt.Errorf("%w: mknod of kind %#o (want a FIFO, socket or device)", ErrInvalidName, kind)
	}
	if !typ.Device() {
		rdev = 0
	}
	now := s.cfg.Now().UnixNano()
	f := &meta.Inode{Type: typ, Mode: attrs.Mode&0o7777 | meta.ModeExplicit, UID: attrs.UID, GID: attrs.GID, Rdev: rdev, MtimeNs: now, CtimeNs: now}
	return s.putNew(ctx, bucket, path, f)
}

// putNew makes f at path, decided in the log: ErrExists if anything is
// there (a symlink, a special file).
func (s *Local) putNew(ctx context.Context, bucket, path string, f *meta.Inode) (ObjectInfo, error) {
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
	return meta.Command{Op: meta.OpMkdir, BucketName: bucket, Path: path, Exclusive: attrs.Exclusive,
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

// ExclusiveRenamer is implemented by a Store that renames without
// replacing (rename(2)'s RENAME_NOREPLACE): Local.
type ExclusiveRenamer interface {
	// RenameNoReplace is Rename, but fails with ErrExists when dst
	// exists, decided in the log (one winner across the cluster).
	RenameNoReplace(ctx context.Context, bucket, src, dst string) error
}

var _ ExclusiveRenamer = (*Local)(nil)

// RenameNoReplace implements ExclusiveRenamer.
func (s *Local) RenameNoReplace(ctx context.Context, bucket, src, dst string) error {
	return s.rename(ctx, bucket, src, dst, true)
}

// Rename implements Store.
func (s *Local) Rename(ctx context.Context, bucket, src, dst string) error {
	return s.rename(ctx, bucket, src, dst, false)
}

func (s *Local) rename(ctx context.Context, bucket, src, dst string, exclusive bool) error {
	if err := checkPath(bucket, src); err != nil {
		return err
	}
	if err := checkPath(bucket, dst); err != nil {
		return err
	}
	if src == "" || dst == "" {
		return ErrInvalidName
	}
	// As rename(2): a missing destination directory is ENOENT (two nodes
	// moving two directories into each other: the second finds its
	// destination moved away).
	_, err := s.propose(ctx, meta.Command{Op: meta.OpRename, BucketName: bucket, Path: src, DstPath: dst, Exclusive: exclusive, NoParents: true})
	return err
}
