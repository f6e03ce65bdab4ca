package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/cairn-fs/cairn/internal/meta"
)

// Concat implements Store. The new file's extents are the sources'
// extents shifted to their place (extents are whole blobs, so the result
// keeps the invariant); the SHA-256 of the whole is computed by reading
// the sources once. The reap guard of Put applies: a source blob reclaimed
// since the sources were read (they were deleted meanwhile) fails the
// command, reported as ErrNotFound.
func (s *Local) Concat(ctx context.Context, bucket, path string, srcs []ObjectRef, etag string, opts PutOptions) (ObjectInfo, bool, error) {
	if opts.ContentMD5 != nil || opts.ContentSHA256 != nil {
		// Concat reads no body to check them against; an expected digest
		// it passed over would be trusted blindly.
		return ObjectInfo{}, false, errors.New("store: Concat does not check ContentMD5 or ContentSHA256")
	}
	if err := checkPath(bucket, path); err != nil {
		return ObjectInfo{}, false, err
	}
	if path == "" {
		return ObjectInfo{}, false, ErrInvalidName
	}
	binfo, err := s.Bucket(ctx, bucket)
	if err != nil {
		return ObjectInfo{}, false, err
	}
	owned(binfo, &opts.UID, &opts.GID, &opts.Mode, opts.Explicit, binfo.FileMode)
	startIndex := s.log.AppliedIndex()
	var (
		extents []meta.Extent
		size    int64
	)
	sh := sha256.New()
	buf := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(buf)
	for _, src := range srcs {
		o, err := s.lookupObject(ctx, src.Bucket, src.Path, true)
		if err != nil {
			return ObjectInfo{}, false, fmt.Errorf("concat source %s/%s: %w", src.Bucket, src.Path, err)
		}
		if o.ino.Type != meta.TypeFile {
			return ObjectInfo{}, false, fmt.Errorf("concat source %s/%s: %w", src.Bucket, src.Path, ErrIsDir)
		}
		for _, x := range o.ino.Extents {
			x.Offset += size
			extents = append(extents, x)
		}
		if _, err := io.CopyBuffer(sh, io.NewSectionReader(o, 0, o.ino.Size), *buf); err != nil {
			return ObjectInfo{}, false, fmt.Errorf("concat source %s/%s: %w", src.Bucket, src.Path, err)
		}
		size += o.ino.Size
	}
	cmd := s.putFileCommand(bucket, path, opts, size, etag, hex.EncodeToString(sh.Sum(nil)), extents, startIndex)
	s.withOrigin(ctx, &cmd) // trash.go
	res, err := s.log.Propose(ctx, cmd)
	if err == nil && errors.Is(res.Err, meta.ErrBlobReaped) {
		return ObjectInfo{}, false, fmt.Errorf("concat %s/%s: a source was deleted meanwhile: %w", bucket, path, ErrNotFound)
	}
	return committed(cmd, res, err)
}
