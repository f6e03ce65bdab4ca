package store

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/consensus"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/minindex"
	"github.com/cairn-fs/cairn/internal/placement"
)

// FilePut is one file of a PutFiles call: its whole content in memory.
type FilePut struct {
	Path string
	// Data is the content, at most blob.MaxSize bytes (one blob). PutFiles
	// takes ownership: the slice must not be modified afterwards.
	Data []byte
	// Opts: ContentType, Mode, ModTime, IfMatch and IfNoneMatchAny as for
	// Put; Size is ignored (len(Data) is the size).
	Opts PutOptions
}

// PutResult is the outcome of one file of a PutFiles call.
type PutResult struct {
	Info    ObjectInfo
	Created bool
	Err     error
}

// BatchPutter is implemented by a Store that can store many small files in
// one call (Local does). Front ends check for it with a type assertion and
// fall back to one Put per file.
type BatchPutter interface {
	// PutFiles stores every file of files in bucket, as that many Puts
	// would, and returns one result per file. The files are independent:
	// each one is durable and visible once its result has a nil error, and
	// one file's failure does not undo the others. Two files with the same
	// path in one call: the later one wins.
	PutFiles(ctx context.Context, bucket string, files []FilePut) []PutResult
}

// BatchReplication is the optional bulk half of Replication
// (replica.Replicator implements it): every blob of a group written with
// one send per node instead of one per blob.
type BatchReplication interface {
	// WriteMany stores each blob on its replicas like WriteBlob and
	// returns one outcome and one error per blob. It takes ownership of
	// the data.
	WriteMany(ctx context.Context, blobs []cas.Blob, pol placement.Policy) ([]placement.Copies, []error)
}

var _ BatchPutter = (*Local)(nil)

// PutFiles implements BatchPutter. The blobs of all the files are written
// together (locally with one blob.Store.PutMany, in a cluster with one
// Replication.WriteMany: one batch per node) and the namespace commands
// are proposed concurrently, so the consensus log carries them in a few
// entries. A file whose path repeats later in files is skipped in favour
// of the later one (its result is the later one's).
func (s *Local) PutFiles(ctx context.Context, bucket string, files []FilePut) []PutResult {
	res := make([]PutResult, len(files))
	failAll := func(err error) []PutResult {
		for i := range res {
			res[i].Err = err
		}
		return res
	}
	if err := checkPath(bucket, ""); err != nil {
		return failAll(err)
	}
	binfo, err := s.Bucket(ctx, bucket)
	if err != nil {
		return failAll(err)
	}
	pol := policy(binfo)
	startIndex := s.log.AppliedIndex()
	ctx = minindex.With(ctx, startIndex) // as in Put: see GuardReplicaPut

	// The last occurrence of each path is the one stored.
	last := make(map[string]int, len(files))
	for i, f := range files {
		last[f.Path] = i
	}
	cmds := make([]*meta.Command, len(files))
	var blobs []cas.Blob
	blobOf := make(map[blob.Hash]int) // hash -> index in blobs
	for i, f := range files {
		if last[f.Path] != i {
			continue
		}
		if err := checkPath(bucket, f.Path); err != nil {
			res[i].Err = err
			continue
		}
		if f.Path == "" {
			res[i].Err = ErrInvalidName
			continue
		}
		if len(f.Data) > blob.MaxSize {
			res[i].Err = fmt.Errorf("%w: %d bytes in a batch (at most %d per file)", ErrTooLarge, len(f.Data), blob.MaxSize)
			continue
		}
		sum := md5.Sum(f.Data)
		var extents []meta.Extent
		sha := ""
		if len(f.Data) > 0 {
			h, crc := blob.Sum(f.Data), cas.CRC{}
			if len(f.Data) > handOverBytes {
				// Sent alone to each replica, which checks the CRC32C
				// computed here in the same pass instead of re-hashing
				// (smaller blobs travel in batches, checked by hash).
				h, crc = cas.Sums(f.Data)
			}
			extents = []meta.Extent{{Hash: h, Offset: 0, Length: int64(len(f.Data))}}
			sha = h.String()
			if _, dup := blobOf[h]; !dup {
				blobOf[h] = len(blobs)
				blobs = append(blobs, cas.Blob{Hash: h, Data: f.Data, CRC: crc})
				s.pins.pin(h)
			}
		} else {
			empty := sha256.Sum256(nil)
			sha = hex.EncodeToString(empty[:])
		}
		opts := f.Opts
		owned(binfo, &opts.UID, &opts.GID, &opts.Mode, opts.Explicit, binfo.FileMode)
		cmd := s.putFileCommand(bucket, f.Path, opts, int64(len(f.Data)), hex.EncodeToString(sum[:]), sha, extents, startIndex)
		cmds[i] = &cmd
	}
	defer func() {
		for _, b := range blobs {
			s.pins.unpin(b.Hash)
		}
	}()

	blobCopies, blobErrs := s.writeBlobs(ctx, blobs, pol)
	var (
		idx   []int
		tally []*underTally
	)
	for i, cmd := range cmds {
		if cmd == nil {
			continue
		}
		var under underTally
		if len(cmd.File.Extents) > 0 {
			h := cmd.File.Extents[0].Hash
			if err := blobErrs[blobOf[h]]; err != nil {
				res[i].Err = mapErr(fmt.Errorf("write blob: %w", err))
				continue
			}
			under.add(h, blobCopies[blobOf[h]])
			under.apply(cmd)
		}
		idx = append(idx, i)
		tally = append(tally, &under)
	}
	s.commitFiles(ctx, cmds, idx, func(k int, info ObjectInfo, created bool, err error) {
		tally[k].annotate(&info)
		res[idx[k]] = PutResult{Info: info, Created: created, Err: err}
	})
	for i, f := range files {
		if j := last[f.Path]; j != i {
			res[i] = res[j]
		}
	}
	return res
}

// commitFiles proposes cmds[idx...] (OpPutFile commands whose blobs are
// written) in that order, without waiting for one before the next when the
// log takes ordered proposals: the files of a batch appear in the order
// given. done receives each outcome (k indexes idx).
func (s *Local) commitFiles(ctx context.Context, cmds []*meta.Command, idx []int,
	done func(k int, info ObjectInfo, created bool, err error)) {
	op, ok := s.log.(consensus.OrderedProposer)
	if !ok || len(idx) < 2 {
		for k, i := range idx {
			info, created, err := s.commitFile(ctx, *cmds[i])
			done(k, info, created, err)
		}
		return
	}
	batch := make([]meta.Command, len(idx))
	stamps := map[meta.Ino]*meta.RightCmd{} // one hold of each right (lockrights.go)
	var unstamp []func()
	for k, i := range idx {
		batch[k] = *cmds[i]
		s.withOrigin(ctx, &batch[k]) // trash.go
		if rc := batch[k].Right; rc != nil {
			if st, ok := stamps[rc.Ino]; ok {
				batch[k].Right = st
				continue
			}
			unstamp = append(unstamp, s.stampRight(&batch[k]))
			stamps[rc.Ino] = batch[k].Right
		}
	}
	results, errs := op.ProposeMany(ctx, batch)
	for _, u := range unstamp {
		u() // before any retry below, which stamps again
	}
	for k, i := range idx {
		if errs[k] == nil && (errors.Is(results[k].Err, meta.ErrBlobReaped) ||
			(cmds[i].Own == nil && errors.Is(results[k].Err, meta.ErrOwned))) {
			// Rewrites its blobs and retries, or, decided in the log in a
			// directory a node owns, goes again with its claim or after a
			// recall (owners.go).
			info, created, err := s.commitFile(ctx, *cmds[i])
			done(k, info, created, err)
			continue
		}
		info, created, err := committed(*cmds[i], results[k], errs[k])
		done(k, info, created, err)
	}
}

// writeBlobs stores the blobs of a PutFiles call and returns one outcome
// and one error per blob: in a cluster through the replication (in bulk
// when it can), else with one local PutMany.
func (s *Local) writeBlobs(ctx context.Context, blobs []cas.Blob, pol placement.Policy) ([]placement.Copies, []error) {
	if len(blobs) == 0 {
		return nil, nil
	}
	copies := make([]placement.Copies, len(blobs))
	if s.cfg.Replication == nil {
		hs := make([]blob.Hash, len(blobs))
		data := make([][]byte, len(blobs))
		for i, b := range blobs {
			hs[i], data[i] = b.Hash, b.Data
			copies[i] = placement.Copies{Made: 1, Wanted: 1}
		}
		return copies, s.blobs.PutMany(hs, data)
	}
	if br, ok := s.cfg.Replication.(BatchReplication); ok {
		return br.WriteMany(ctx, blobs, pol)
	}
	errs := make([]error, len(blobs))
	var wg sync.WaitGroup
	for i, b := range blobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			copies[i], errs[i] = s.cfg.Replication.WriteBlob(ctx, b.Hash, b.Data, pol)
		}()
	}
	wg.Wait()
	return copies, errs
}
