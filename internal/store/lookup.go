package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/internal/meta"
)

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
		Special: special(ino.Type), Rdev: ino.Rdev,
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
	case meta.TypeFIFO, meta.TypeSocket, meta.TypeCharDev, meta.TypeBlockDev:
		return nil, fmt.Errorf("%w: %s/%s is a special file", ErrNotFound, bucket, path)
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
	case meta.TypeFIFO, meta.TypeSocket, meta.TypeCharDev, meta.TypeBlockDev:
		return nil, fmt.Errorf("%w: %s/%s is a special file", ErrNotFound, bucket, path)
	}
	return s.newObject(bucket, path, n), nil
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
