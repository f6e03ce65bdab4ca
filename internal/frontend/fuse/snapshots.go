package fuse

import (
	"context"
	"path"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/cairn-fs/cairn/internal/store"
)

// The bucket's snapshots under the mount's root (design 0007):
//
//	.snapshots/           one directory per snapshot (hidden from the
//	                      root's listing, as ZFS hides .zfs)
//	.snapshots/NAME/PATH  the snapshot's files, read-only: every change
//	                      answers EROFS
//
// Each call opens a view of the snapshot (store.OpenSnapshot, one KV
// snapshot) for its lookup or listing; an open file keeps its object.
// Attributes (owner, mode) are the snapshot's, so the normal permission
// checks apply (the mount runs with default_permissions).

// SnapshotsDir is the name of the snapshots directory at a mount's root.
const SnapshotsDir = ".snapshots"

// snapIno maps a snapshot's inode number into a space of its own (high
// bit set, the snapshot's id in the next bits), so the kernel never
// confuses it with a live inode.
func snapIno(snapID, ino uint64) uint64 { return 1<<63 | (snapID&0x7ffff)<<44 | ino&(1<<44-1) }

// snapRoot is .snapshots: its entries are the bucket's snapshots.
type snapRoot struct {
	fs.Inode
	m *Mount
}

// snapNode is a directory or file inside a snapshot.
type snapNode struct {
	fs.Inode
	m    *Mount
	snap string // snapshot name
	id   uint64 // snapshot id
	path string // path in the bucket; "" for the snapshot's root
	info store.ObjectInfo
}

func (m *Mount) snapshots() (store.Snapshots, bool) {
	s, ok := m.cfg.Store.(store.Snapshots)
	return s, ok
}

// lookupSnapshots answers the root's lookup of SnapshotsDir.
func (n *node) lookupSnapshots(ctx context.Context, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if _, ok := n.m.snapshots(); !ok {
		return nil, syscall.ENOENT
	}
	r := &snapRoot{m: n.m}
	r.attr(&out.Attr)
	return n.NewInode(ctx, r, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: snapIno(0x7ffff, 1)}), 0
}

func (r *snapRoot) attr(a *gofuse.Attr) {
	a.Mode = syscall.S_IFDIR | 0o555
	a.Nlink = 2
	a.Ino = snapIno(0x7ffff, 1)
	now := time.Now()
	a.SetTimes(&now, &now, &now)
}

func (r *snapRoot) Getattr(ctx context.Context, f fs.FileHandle, out *gofuse.AttrOut) syscall.Errno {
	r.attr(&out.Attr)
	return 0
}

func (r *snapRoot) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	s, _ := r.m.snapshots()
	list, err := s.SnapshotList(ctx, r.m.cfg.Bucket)
	if err != nil {
		return nil, errno(err)
	}
	entries := make([]gofuse.DirEntry, 0, len(list))
	for _, sn := range list {
		entries = append(entries, gofuse.DirEntry{Name: sn.Name, Mode: syscall.S_IFDIR, Ino: snapIno(sn.ID, 1)})
	}
	return fs.NewListDirStream(entries), 0
}

func (r *snapRoot) Lookup(ctx context.Context, name string, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	s, _ := r.m.snapshots()
	v, err := s.OpenSnapshot(ctx, r.m.cfg.Bucket, name)
	if err != nil {
		return nil, errno(err)
	}
	defer v.Close()
	info, err := v.Stat(ctx, "")
	if err != nil {
		return nil, errno(err)
	}
	c := &snapNode{m: r.m, snap: name, id: v.Info.ID, info: info}
	c.attr(&out.Attr)
	return r.NewInode(ctx, c, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: snapIno(v.Info.ID, info.Ino)}), 0
}

// The snapshots directory takes no change.
func (r *snapRoot) Mkdir(context.Context, string, uint32, *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (r *snapRoot) Rmdir(context.Context, string) syscall.Errno { return syscall.EROFS }
func (r *snapRoot) Create(context.Context, string, uint32, uint32, *gofuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}

func (n *snapNode) attr(a *gofuse.Attr) {
	info := n.info
	a.Ino = snapIno(n.id, info.Ino)
	a.Uid, a.Gid = info.UID, info.GID
	a.Blksize = 4096
	switch {
	case info.Symlink != "":
		a.Mode = syscall.S_IFLNK | 0o777
		a.Size = uint64(len(info.Symlink))
	case info.IsDir:
		a.Mode = syscall.S_IFDIR | info.Mode&0o7777
		a.Nlink = max(info.Nlink, 2)
	case info.Special != 0:
		a.Mode = info.Special | info.Mode&0o7777
		a.Nlink = max(info.Nlink, 1)
		a.Rdev = info.Rdev
	default:
		a.Mode = syscall.S_IFREG | info.Mode&0o7777
		a.Nlink = max(info.Nlink, 1)
		a.Size = uint64(info.Size)
	}
	a.Blocks = (a.Size + 511) / 512
	mtime, ctime, atime := info.ModTime, info.ChangeTime, info.AccessTime
	if ctime.IsZero() {
		ctime = mtime
	}
	if atime.IsZero() {
		atime = mtime
	}
	a.SetTimes(&atime, &mtime, &ctime)
}

func (n *snapNode) view(ctx context.Context) (*store.SnapshotView, syscall.Errno) {
	s, _ := n.m.snapshots()
	v, err := s.OpenSnapshot(ctx, n.m.cfg.Bucket, n.snap)
	if err != nil {
		return nil, errno(err)
	}
	return v, 0
}

func (n *snapNode) Getattr(ctx context.Context, f fs.FileHandle, out *gofuse.AttrOut) syscall.Errno {
	n.attr(&out.Attr)
	out.SetTimeout(time.Hour) // a snapshot does not change
	return 0
}

func (n *snapNode) Lookup(ctx context.Context, name string, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	v, e := n.view(ctx)
	if e != 0 {
		return nil, e
	}
	defer v.Close()
	p := path.Join(n.path, name)
	info, err := v.Stat(ctx, p)
	if err != nil {
		return nil, errno(err)
	}
	c := &snapNode{m: n.m, snap: n.snap, id: n.id, path: p, info: info}
	c.attr(&out.Attr)
	out.SetEntryTimeout(time.Hour)
	out.SetAttrTimeout(time.Hour)
	return n.NewInode(ctx, c, fs.StableAttr{Mode: fileType(info), Ino: snapIno(n.id, info.Ino)}), 0
}

func (n *snapNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	v, e := n.view(ctx)
	if e != 0 {
		return nil, e
	}
	defer v.Close()
	prefix := n.path
	if prefix != "" {
		prefix += "/"
	}
	var entries []gofuse.DirEntry
	opts := store.ListOptions{Prefix: prefix, Delimiter: "/", Limit: 1000}
	for {
		res, err := v.List(ctx, opts)
		if err != nil {
			return nil, errno(err)
		}
		for _, o := range res.Entries {
			entries = append(entries, gofuse.DirEntry{Name: path.Base(o.Path), Mode: fileType(o), Ino: snapIno(n.id, o.Ino)})
		}
		if !res.Truncated {
			break
		}
		opts.StartAfter = res.NextToken
	}
	return fs.NewListDirStream(entries), 0
}

func (n *snapNode) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	if n.info.Symlink == "" {
		return nil, syscall.EINVAL
	}
	return []byte(n.info.Symlink), 0
}

// snapHandle is an open file of a snapshot.
type snapHandle struct{ obj store.Object }

func (n *snapNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND) != 0 {
		return nil, 0, syscall.EROFS
	}
	v, e := n.view(ctx)
	if e != 0 {
		return nil, 0, e
	}
	defer v.Close()
	obj, err := v.Open(ctx, n.path)
	if err != nil {
		return nil, 0, errno(err)
	}
	return &snapHandle{obj: obj}, gofuse.FOPEN_KEEP_CACHE, 0
}

// Read serves a read with the open file's object, or (a mount that does
// not open files: noopen.go) with one opened for the call.
func (n *snapNode) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (gofuse.ReadResult, syscall.Errno) {
	if h, ok := f.(*snapHandle); ok {
		return h.Read(ctx, dest, off)
	}
	fh, _, e := n.Open(ctx, syscall.O_RDONLY)
	if e != 0 {
		return nil, e
	}
	h := fh.(*snapHandle)
	defer h.Release(ctx)
	res, e := h.Read(ctx, dest, off)
	if e == 0 {
		// The result must not point into the object once released.
		b, _ := res.Bytes(nil)
		res = gofuse.ReadResultData(append([]byte(nil), b...))
	}
	return res, e
}

func (h *snapHandle) Read(ctx context.Context, dest []byte, off int64) (gofuse.ReadResult, syscall.Errno) {
	size := h.obj.Info().Size
	if off >= size {
		return gofuse.ReadResultData(nil), 0
	}
	k, err := h.obj.ReadAt(dest[:min(int64(len(dest)), size-off)], off)
	if err != nil && k == 0 {
		return nil, errno(err)
	}
	return gofuse.ReadResultData(dest[:k]), 0
}

func (h *snapHandle) Release(ctx context.Context) syscall.Errno {
	_ = h.obj.Close()
	return 0
}

// Every change inside a snapshot answers EROFS.
func (n *snapNode) Setattr(context.Context, fs.FileHandle, *gofuse.SetAttrIn, *gofuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}
func (n *snapNode) Create(context.Context, string, uint32, uint32, *gofuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}
func (n *snapNode) Mkdir(context.Context, string, uint32, *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (n *snapNode) Mknod(context.Context, string, uint32, uint32, *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (n *snapNode) Symlink(context.Context, string, string, *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (n *snapNode) Link(context.Context, fs.InodeEmbedder, string, *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (n *snapNode) Unlink(context.Context, string) syscall.Errno { return syscall.EROFS }
func (n *snapNode) Rmdir(context.Context, string) syscall.Errno  { return syscall.EROFS }
func (n *snapNode) Rename(context.Context, string, fs.InodeEmbedder, string, uint32) syscall.Errno {
	return syscall.EROFS
}
func (n *snapNode) Setxattr(context.Context, string, []byte, uint32) syscall.Errno {
	return syscall.EROFS
}
func (n *snapNode) Removexattr(context.Context, string) syscall.Errno { return syscall.EROFS }

// isSnapshotsDir reports a name the root answers itself.
func isSnapshotsDir(n *node, name string) bool { return n.IsRoot() && name == SnapshotsDir }
