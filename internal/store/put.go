package store

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/minindex"
	"github.com/cairn-fs/cairn/internal/placement"
)

// underTally collects the under-replicated blobs of one file's write.
type underTally struct {
	mu     sync.Mutex
	hashes []blob.Hash
	copies placement.Copies // the fewest copies among them
}

// add records one blob's outcome.
func (u *underTally) add(h blob.Hash, c placement.Copies) {
	if !c.Under() {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.hashes) == 0 || c.Made < u.copies.Made {
		u.copies = c
	}
	u.hashes = append(u.hashes, h)
}

// apply marks cmd's under-replicated blobs and info's copies.
func (u *underTally) apply(cmd *meta.Command) {
	u.mu.Lock()
	defer u.mu.Unlock()
	cmd.Under = u.hashes
}

// annotate sets info's copies when the write was under-replicated.
func (u *underTally) annotate(info *ObjectInfo) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.hashes) > 0 {
		info.Copies, info.CopiesWanted = u.copies.Made, u.copies.Wanted
	}
}

// Put implements Store. The body is cut into blobs of blob.MaxSize that are
// hashed and written while the next one is read, at most
// ParallelBlobWrites at a time; the namespace change is proposed only after
// every blob is durable. The body is read once and SHA-256 hashed once (a
// single-blob file's whole-file hash is its blob's name), and checked
// against opts.ContentSHA256 and opts.ContentMD5 before anything is proposed.
func (s *Local) Put(ctx context.Context, bucket, path string, r io.Reader, opts PutOptions) (ObjectInfo, bool, error) {
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
	pol := policy(binfo)
	owned(binfo, &opts.UID, &opts.GID, &opts.Mode, opts.Explicit, binfo.FileMode)
	var under underTally
	startIndex := s.log.AppliedIndex()
	// Replicas store the blobs only once they have applied startIndex
	// (GuardReplicaPut): a reap this upload saw cannot delete, under it, a
	// copy a replica deduplicated against.
	ctx = minindex.With(ctx, startIndex)
	held := make(map[blob.Hash]struct{})
	defer func() {
		for h := range held {
			s.pins.unpin(h)
		}
	}()

	md := md5.New()
	sh := sha256.New()
	// A body declared to fit one blob has the blob's name as its SHA-256:
	// skip hashing it twice (a longer body fails with ErrTooLarge anyway).
	single := opts.Size >= 0 && opts.Size <= blob.MaxSize
	// A blob handed over alone to replication gets its CRC32C with its
	// name, in the same pass: replicas check it instead of re-hashing.
	br, batching := s.cfg.Replication.(BatchReplication)
	var (
		extents []meta.Extent
		total   int64
		wg      sync.WaitGroup
		errMu   sync.Mutex
		werr    error
		sem     = make(chan struct{}, s.cfg.ParallelBlobWrites)
	)
	setErr := func(err error) {
		errMu.Lock()
		if werr == nil {
			werr = err
		}
		errMu.Unlock()
	}
	getErr := func() error { errMu.Lock(); defer errMu.Unlock(); return werr }
	for {
		if err := ctx.Err(); err != nil {
			setErr(err)
			break
		}
		if getErr() != nil {
			break
		}
		// Take a write slot before reading, so at most ParallelBlobWrites
		// blob buffers exist for this upload, the one being filled included.
		sem <- struct{}{}
		bp := s.bufs.Get().(*[]byte)
		buf := *bp
		release := func() { s.bufs.Put(bp); <-sem }
		n, eof, rerr := fill(r, buf)
		if n > 0 {
			data := buf[:n]
			handOver := batching && n > handOverBytes
			h, crc := hashChunk(md, sh, data, !single, handOver)
			extents = append(extents, meta.Extent{Hash: h, Offset: total, Length: int64(n)})
			total += int64(n)
			if opts.Size >= 0 && total > opts.Size {
				release()
				setErr(ErrTooLarge)
				break
			}
			if single && opts.ContentSHA256 != nil && !bytes.Equal(h[:], opts.ContentSHA256) {
				// Not the body the caller expected (its only blob is the
				// whole file): write nothing. The check after the loop
				// reports it, unless the body's length is wrong too.
				release()
			} else if _, dup := held[h]; !dup {
				held[h] = struct{}{}
				s.pins.pin(h)
				wg.Add(1)
				go func() {
					defer wg.Done()
					var (
						err    error
						copies placement.Copies
					)
					if handOver {
						// The buffer goes to the replication (its sends to
						// slow replicas outlive this call) instead of
						// being copied there; the pool makes a new one.
						cs, errs := br.WriteMany(ctx, []cas.Blob{{Hash: h, Data: data, CRC: crc}}, pol)
						copies, err = cs[0], errs[0]
						<-sem
					} else {
						copies, err = s.writeBlob(ctx, h, data, pol)
						release()
					}
					under.add(h, copies)
					if err != nil {
						setErr(fmt.Errorf("write blob: %w", err))
					}
				}()
			} else {
				release()
			}
		} else {
			release()
		}
		if rerr != nil {
			// The transport's error: a client gone mid-body, a body shorter
			// than its Content-Length (io.ErrUnexpectedEOF), a read timeout.
			setErr(fmt.Errorf("%w: read body: %v", ErrShortBody, rerr))
			break
		}
		if eof {
			break
		}
	}
	wg.Wait()
	if err := getErr(); err != nil {
		return ObjectInfo{}, false, mapErr(err)
	}
	if opts.Size >= 0 && total != opts.Size {
		if total < opts.Size {
			return ObjectInfo{}, false, ErrShortBody
		}
		return ObjectInfo{}, false, ErrTooLarge
	}
	sha := fileSHA256(single, sh, extents)
	if opts.ContentSHA256 != nil && sha != hex.EncodeToString(opts.ContentSHA256) {
		return ObjectInfo{}, false, fmt.Errorf("%w: the %d-byte body's SHA-256 is %s, expected %x", ErrSHA256Mismatch, total, sha, opts.ContentSHA256)
	}
	sum := md.Sum(nil)
	if opts.ContentMD5 != nil && !bytes.Equal(sum, opts.ContentMD5) {
		return ObjectInfo{}, false, fmt.Errorf("%w: the body's MD5 is %x, Content-MD5 said %x", ErrBadDigest, sum, opts.ContentMD5)
	}
	cmd := s.putFileCommand(bucket, path, opts, total, hex.EncodeToString(sum), sha, extents, startIndex)
	under.apply(&cmd)
	if s.beforePropose != nil {
		s.beforePropose()
	}
	info, created, err := s.commitFile(ctx, cmd)
	under.annotate(&info)
	return info, created, err
}

// parallelHashBytes: a chunk at least this long has its MD5 computed on
// another core while this one computes its SHA-256s.
const parallelHashBytes = 256 << 10

// hashChunk adds data to the upload's MD5 md (and to its SHA-256 sh when
// file is set) and returns the blob's name, and with crc set its CRC32C,
// computed in the same pass (cas.Sums).
func hashChunk(md, sh hash.Hash, data []byte, file, crc bool) (blob.Hash, cas.CRC) {
	name := func() (blob.Hash, cas.CRC) {
		if crc {
			return cas.Sums(data)
		}
		return blob.Sum(data), cas.CRC{}
	}
	if len(data) < parallelHashBytes {
		md.Write(data)
		if file {
			sh.Write(data)
		}
		return name()
	}
	done := make(chan struct{})
	go func() {
		md.Write(data)
		close(done)
	}()
	if file {
		sh.Write(data)
	}
	h, c := name()
	<-done
	return h, c
}

// putFileCommand is the OpPutFile command of an upload whose blobs are
// written: opts' mode (default 0644), mtime (default now), content type
// and conditions, the file's size, ETag, SHA-256 and extents.
func (s *Local) putFileCommand(bucket, path string, opts PutOptions, size int64, etag, sha string,
	extents []meta.Extent, startIndex uint64) meta.Command {
	mode := opts.Mode & 0o7777
	switch {
	case opts.Explicit:
		mode |= meta.ModeExplicit // 0 included (a mount's file of mode 0)
	case mode == 0:
		mode = 0o644
	}
	now := s.cfg.Now()
	mtime := opts.ModTime
	if mtime.IsZero() {
		mtime = now
	}
	file := &meta.Inode{Ino: meta.Ino(opts.Ino), Type: meta.TypeFile, Mode: mode, UID: opts.UID, GID: opts.GID, Size: size, MtimeNs: mtime.UnixNano(),
		CtimeNs: now.UnixNano(), ContentType: opts.ContentType, ETag: etag, SHA256: sha, Extents: extents, Xattrs: opts.Xattrs}
	if !opts.AccessTime.IsZero() {
		file.AtimeNs = opts.AccessTime.UnixNano()
	}
	cmd := meta.Command{Op: meta.OpPutFile, BucketName: bucket, Path: path, File: file,
		TimeNs: now.UnixNano(), IfMatch: opts.IfMatch, IfNoneMatchAny: opts.IfNoneMatchAny,
		StartIndex: startIndex}
	if opts.Decided {
		cmd.Own = s.heldOwn(opts.Claims) // owners.go
	}
	if opts.LockedIno != 0 {
		cmd.Right = &meta.RightCmd{Ino: meta.Ino(opts.LockedIno)} // stamped at the proposal (lockrights.go)
	}
	return cmd
}

// commitFile proposes the OpPutFile cmd of an upload whose blobs are
// written (and pinned by the caller) and returns the file's description.
func (s *Local) commitFile(ctx context.Context, cmd meta.Command) (ObjectInfo, bool, error) {
	var (
		res meta.Result
		err error
	)
	s.withOrigin(ctx, &cmd) // trash.go
	decided := cmd.Own != nil
	defer s.stampRight(&cmd)() // lockrights.go
	for attempt := 0; ; attempt++ {
		if decided {
			res, err = s.log.Propose(ctx, cmd)
		} else {
			res, err = s.proposeOwned(ctx, cmd) // owners.go
		}
		if err == nil && errors.Is(res.Err, meta.ErrBlobReaped) && attempt < 3 {
			// A blob this upload deduplicated against was reclaimed while
			// the upload was in flight. Our pins kept the local copies, so
			// the bytes are still here: write them again (a no-op when
			// present) and retry from the current index.
			cmd.StartIndex = s.log.AppliedIndex()
			if rerr := s.rewriteMissing(cmd.File.Extents); rerr != nil {
				return ObjectInfo{}, false, mapErr(rerr)
			}
			continue
		}
		break
	}
	return committed(cmd, res, err)
}

// committed is the outcome of an OpPutFile cmd proposed with result res
// and error err.
func committed(cmd meta.Command, res meta.Result, err error) (ObjectInfo, bool, error) {
	if err != nil {
		return ObjectInfo{}, false, mapErr(err)
	}
	if res.Err != nil {
		return ObjectInfo{}, false, mapErr(res.Err)
	}
	ino := res.Inode
	if ino == nil {
		ino = cmd.File
	}
	return objectInfo(cmd.BucketName, cmd.Path, ino), res.Created, nil
}

// handOverBytes: an upload's blobs larger than this are handed to a
// BatchReplication with their buffer (no copy) rather than written with
// Replication.WriteBlob, which copies them but coalesces small blobs of
// concurrent uploads into batches (a blob this large travels alone anyway).
const handOverBytes = 256 << 10

// writeBlob stores one blob of an upload: on its replicas in a cluster,
// else in the local blob store (one copy, all that is wanted).
func (s *Local) writeBlob(ctx context.Context, h blob.Hash, data []byte, pol placement.Policy) (placement.Copies, error) {
	if s.cfg.Replication != nil {
		return s.cfg.Replication.WriteBlob(ctx, h, data, pol)
	}
	return placement.Copies{Made: 1, Wanted: 1}, s.blobs.Put(h, data)
}

// rewriteMissing verifies that every blob of extents is present locally
// before a retry. In a cluster it always fails: the copies that mattered
// were on the replicas.
func (s *Local) rewriteMissing(extents []meta.Extent) error {
	if s.cfg.Replication != nil {
		// The reap deleted every replica's copy (pins guard only this
		// node's), and the upload's buffers are gone: retrying would commit
		// a file whose blobs exist nowhere (found by internal/sim, seed
		// 1180). Fail; the client retries the whole upload.
		return fmt.Errorf("%w: a blob this upload deduplicated against was reclaimed on its replicas", ErrUnavailable)
	}
	for _, e := range extents {
		if !s.blobs.Has(e.Hash) {
			return fmt.Errorf("%w: blob %s vanished during upload", ErrUnavailable, e.Hash)
		}
	}
	return nil
}

// fill reads into buf until it is full or r ends. eof reports a clean end
// of r; err is any other error of r (io.ErrUnexpectedEOF included).
func fill(r io.Reader, buf []byte) (n int, eof bool, err error) {
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err == io.EOF {
			return n, true, nil
		}
		if err != nil {
			return n, false, err
		}
	}
	return n, false, nil
}

// fileSHA256 is the hex SHA-256 of the whole content: the hash of its only
// blob for a single-blob file, else the streaming hash.
func fileSHA256(single bool, sh hash.Hash, extents []meta.Extent) string {
	if !single {
		return hex.EncodeToString(sh.Sum(nil))
	}
	if len(extents) == 0 {
		return hex.EncodeToString(sh.Sum(nil)) // empty file
	}
	return extents[0].Hash.String()
}
