package meta

import (
	"fmt"
)

func (a *applier) bucket() (*Bucket, error) { return a.r.Bucket(a.cmd.BucketName) }

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
		if b.TrashNs = o.TrashNs; b.TrashNs < 0 {
			return Result{}, fmt.Errorf("%w: trash retention %d", ErrInvalid, b.TrashNs)
		}
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
	if b.TrashNs = o.TrashNs; b.TrashNs < 0 {
		return Result{}, fmt.Errorf("%w: trash retention %d", ErrInvalid, b.TrashNs)
	}
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
	if snaps, err := a.r.Snapshots(b.Name); err != nil {
		return Result{}, err
	} else if len(snaps) > 0 {
		return Result{}, fmt.Errorf("bucket %q: %w: it has %d snapshots: delete them first (cairn snapshot delete)", b.Name, ErrBucketNotEmpty, len(snaps))
	}
	if empty, err := a.r.trashEmpty(b.Name); err != nil {
		return Result{}, err
	} else if !empty {
		return Result{}, fmt.Errorf("bucket %q: %w: %w", b.Name, ErrBucketNotEmpty, errTrashNotEmpty)
	}
	if err := a.dropOwner(b.Ino); err != nil { // owners.go
		return Result{}, err
	}
	a.t.del(bucketKey(b.Name))
	a.t.del(fenceKey(b.Name)) // fence.go: a bucket made again later is not fenced
	a.st.fenceKnown = false
	dir, err := a.r.Inode(b.Ino)
	if err != nil {
		return Result{}, err
	}
	if err := a.removeDir(RootIno, b.Name, dir); err != nil {
		return Result{}, err
	}
	return Result{ChangedAll: true}, nil
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
