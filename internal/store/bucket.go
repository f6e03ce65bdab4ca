package store

import (
	"context"
	"time"

	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/placement"
)

func bucketInfo(b *meta.Bucket) BucketInfo {
	return BucketInfo{Name: b.Name, Public: b.Public, ChecksumSidecars: b.ChecksumSidecars,
		CacheControl: b.CacheControl, Created: time.Unix(0, b.CreatedNs).UTC(),
		Replicas: int(b.Replicas), WriteQuorum: int(b.WriteQuorum), Strict: b.Strict,
		UID: b.UID, GID: b.GID, FileMode: b.FileMode, DirMode: b.DirMode, Owner: b.Owner, ACL: b.ACL,
		TrashSeconds: b.TrashNs / int64(time.Second)}
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

func metaBucket(b BucketInfo) *meta.Bucket {
	return &meta.Bucket{Name: b.Name, Public: b.Public, ChecksumSidecars: b.ChecksumSidecars,
		CacheControl: b.CacheControl, Replicas: clamp32(b.Replicas), WriteQuorum: clamp32(b.WriteQuorum), Strict: b.Strict,
		UID: b.UID, GID: b.GID, FileMode: b.FileMode, DirMode: b.DirMode, Owner: b.Owner, ACL: b.ACL,
		TrashNs: b.TrashSeconds * int64(time.Second)}
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
