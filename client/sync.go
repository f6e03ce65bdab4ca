package client

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-fs/cairn/internal/spill"
	"github.com/cairn-fs/cairn/internal/workpool"
)

// DefaultSyncJobs is the number of parallel uploads Sync uses when
// SyncOptions.Jobs is 0.
const DefaultSyncJobs = 64

// syncSpillAfter is how many entries Sync keeps in memory before its
// lists move to disk (0: spill.DefaultMemEntries). Tests lower it.
var syncSpillAfter int

// defaultSyncPage is the listing page size Sync asks for (the server's cap),
// so that a tree of 470k files is listed in 47 requests.
const defaultSyncPage = 10000

// SyncOptions configures Sync.
type SyncOptions struct {
	// LocalDir is the local directory to upload. If it is itself a symlink
	// it is resolved once; symlinks below it are never followed.
	LocalDir string
	// Bucket is the destination bucket; it must exist.
	Bucket string
	// Prefix is the destination directory inside the bucket ("" = root).
	Prefix string
	// Delete removes remote files under Prefix that are absent locally, and
	// then the remote directories this leaves empty. Skipped local entries
	// (symlinks, devices) protect their remote counterparts. No deletion
	// happens if part of the local tree could not be read.
	Delete bool
	// Checksum compares the local SHA-256 with the remote one instead of
	// the modification time (files of different sizes are always uploaded).
	Checksum bool
	// DryRun computes and reports everything (with --checksum it also hashes
	// local files) but changes nothing on the server.
	DryRun bool
	// Jobs is the number of files uploaded (or hashed, or deleted) at once;
	// 0 means DefaultSyncJobs.
	Jobs int
	// PageSize is the listing page size; 0 means 10000 (the server's cap).
	PageSize int
	// NoBatch uploads every file with its own PUT. By default files of up
	// to BatchFileBytes go in tar archives of up to BatchFiles files /
	// BatchBytes bytes, one bulk upload (Extract) each, Jobs/8 (at least
	// one) at once; a server without bulk upload gets single PUTs.
	NoBatch bool
	// TempDir is where Sync keeps its lists of a large tree (both
	// listings and the plan: about 150 bytes a file, past 100,000
	// entries; removed at the end). Default: os.TempDir().
	TempDir string

	// OnPlan, if set, is called once, before any upload, with the plan.
	OnPlan func(SyncPlan)
	// OnEvent, if set, is called once per file of the plan's Candidates
	// (SyncUpload or SyncSkip) and per deletion, from the worker
	// goroutines: it must be safe for concurrent use and should be quick.
	OnEvent func(SyncEvent)
	// OnWarning, if set, is called for each local entry that is skipped
	// (symlinks, devices, sockets) and for other passing conditions.
	OnWarning func(localPath string, msg string)
}

// SyncPlan is what Sync found out before changing anything.
type SyncPlan struct {
	// LocalFiles is the number of regular files in the local tree.
	LocalFiles int
	// RemoteFiles is the number of files under the remote prefix.
	RemoteFiles int
	// Candidates are the files that will be uploaded, or with Checksum
	// hashed and uploaded if their hash differs; CandidateBytes their size.
	Candidates     int
	CandidateBytes int64
	// Unchanged is the number of files skipped without reading them.
	Unchanged int
	// Deletes is the number of remote files to delete (Delete only).
	Deletes int
}

// SyncOp is the kind of a SyncEvent.
type SyncOp int

// The kinds of SyncEvent.
const (
	// SyncUpload: a file was (or, in a dry run, would be) uploaded.
	SyncUpload SyncOp = iota + 1
	// SyncSkip: a checksum candidate turned out to be unchanged.
	SyncSkip
	// SyncDelete: a remote file was (or would be) deleted.
	SyncDelete
	// SyncDeleteDir: a remote directory was (or would be) deleted.
	SyncDeleteDir
)

// String returns "upload", "skip", "delete" or "rmdir".
func (o SyncOp) String() string {
	switch o {
	case SyncUpload:
		return "upload"
	case SyncSkip:
		return "skip"
	case SyncDelete:
		return "delete"
	case SyncDeleteDir:
		return "rmdir"
	}
	return fmt.Sprintf("SyncOp(%d)", int(o))
}

// SyncEvent reports one file handled by Sync.
type SyncEvent struct {
	// Op is what was done.
	Op SyncOp
	// Path is the remote path inside the bucket.
	Path string
	// Size is the file's size in bytes (0 for directories).
	Size int64
	// Err is non-nil if the operation failed.
	Err error
	// DryRun reports that nothing was changed.
	DryRun bool
}

// SyncFailure is one file Sync could not handle.
type SyncFailure struct {
	// Op is what was attempted.
	Op SyncOp
	// Path is the remote path inside the bucket (or, for local read
	// errors, the local path).
	Path string
	// Err says why.
	Err error
}

// SyncStats sums up a Sync.
type SyncStats struct {
	// LocalFiles and RemoteFiles count the files found on each side.
	LocalFiles, RemoteFiles int
	// Uploaded files and their bytes (would-be uploads in a dry run).
	Uploaded      int
	UploadedBytes int64
	// Skipped counts unchanged files.
	Skipped int
	// Deleted counts remote files deleted, DeletedDirs remote directories.
	Deleted, DeletedDirs int
	// Failed counts failures; Failures lists them in no particular order.
	Failed   int
	Failures []SyncFailure
	// Warnings counts skipped local entries and similar conditions.
	Warnings int
	// Elapsed is the wall time of the whole Sync.
	Elapsed time.Duration
	// DryRun reports that nothing was changed.
	DryRun bool
}

// MtimeEqual is Sync's change-detection rule for modification times: two
// times are the same if they fall in the same whole Unix second (rsync's
// rule; the server may keep less than nanosecond precision), or are less than
// a millisecond apart (a server parsing X-Cairn-Mtime as a float64 may round
// x.9999999 up into the next second).
func MtimeEqual(a, b time.Time) bool {
	if a.Unix() == b.Unix() {
		return true
	}
	d := a.Sub(b)
	return d > -time.Millisecond && d < time.Millisecond
}

type localFile struct {
	abs   string
	size  int64
	mtime time.Time
}

type syncTask struct {
	rel      string
	local    localFile
	checksum string // remote SHA-256 to compare with, "" = upload
}

type syncer struct {
	c      *Client
	opts   SyncOptions
	prefix string

	mu    sync.Mutex
	stats SyncStats
	// noBulk: the server has no bulk upload (Extract); single PUTs only.
	noBulk atomic.Bool

	// m holds both trees and the plan (run); root is the local tree's
	// resolved root; the counts are of m's local files, remote files and
	// skipped local entries.
	m                           *spill.Map
	root                        string
	nLocal, nRemote, nProtected int
	// underLocalFile's answer for the last directory asked.
	underDir       string
	under, underOK bool
}

// Sync makes bucket/prefix hold the same regular files as opts.LocalDir:
// it walks the local tree, lists the remote prefix recursively (paginated,
// one request per PageSize files), uploads new and changed files with up to
// Jobs in flight, skips unchanged ones, and with Delete removes remote files
// absent locally and then the directories this empties.
//
// A file is unchanged when its size equals the remote size and either, by
// default, MtimeEqual(local mtime, remote mtime), or with Checksum its
// SHA-256 equals the remote sha256. Uploads send the local mtime
// (X-Cairn-Mtime) and permission bits so the next Sync can skip the file.
//
// Failures of single files do not stop the others: they are counted in the
// stats, and Sync returns an error matching ErrSyncFailed. A failing listing,
// a missing local directory or a done ctx stop Sync with that error. Sync
// blocks until all work has finished; the stats are valid in every case.
func Sync(ctx context.Context, c *Client, opts SyncOptions) (SyncStats, error) {
	start := time.Now()
	s := &syncer{c: c, opts: opts, prefix: strings.Trim(opts.Prefix, "/")}
	s.stats.DryRun = opts.DryRun
	err := s.run(ctx)
	s.stats.Elapsed = time.Since(start)
	if err == nil && s.stats.Failed > 0 {
		err = fmt.Errorf("%w: %d of %d operations failed", ErrSyncFailed, s.stats.Failed,
			s.stats.Failed+s.stats.Uploaded+s.stats.Deleted)
	}
	return s.stats, err
}

func (s *syncer) warn(p, msg string) {
	s.mu.Lock()
	s.stats.Warnings++
	s.mu.Unlock()
	if s.opts.OnWarning != nil {
		s.opts.OnWarning(p, msg)
	}
}

// record counts the outcome of one operation and reports it.
func (s *syncer) record(ev SyncEvent) {
	ev.DryRun = s.opts.DryRun
	s.mu.Lock()
	switch {
	case ev.Err != nil:
		s.stats.Failed++
		s.stats.Failures = append(s.stats.Failures, SyncFailure{Op: ev.Op, Path: ev.Path, Err: ev.Err})
	case ev.Op == SyncUpload:
		s.stats.Uploaded++
		s.stats.UploadedBytes += ev.Size
	case ev.Op == SyncSkip:
		s.stats.Skipped++
	case ev.Op == SyncDelete:
		s.stats.Deleted++
	case ev.Op == SyncDeleteDir:
		s.stats.DeletedDirs++
	}
	s.mu.Unlock()
	if s.opts.OnEvent != nil {
		s.opts.OnEvent(ev)
	}
}

func (s *syncer) remote(rel string) string { return joinPath(s.prefix, rel) }

func (s *syncer) run(ctx context.Context) error {
	if s.opts.Bucket == "" || strings.Contains(s.opts.Bucket, "/") {
		return fmt.Errorf("sync: %w: bad bucket name %q", ErrInvalidArgument, s.opts.Bucket)
	}
	jobs := s.opts.Jobs
	if jobs <= 0 {
		jobs = DefaultSyncJobs
	}
	// Both trees, the plan and what it removes are kept in a spill.Map:
	// in memory for a small tree, on disk under TempDir for a large one.
	s.m = spill.New(spill.Options{Dir: s.opts.TempDir, MemEntries: syncSpillAfter})
	defer s.m.Close()

	// 1. The local tree.
	walkOK, err := s.walk()
	if err != nil {
		return err
	}

	// 2. The remote tree, in one paginated listing.
	if err := s.listRemote(ctx); err != nil {
		return err
	}
	s.stats.LocalFiles, s.stats.RemoteFiles = s.nLocal, s.nRemote

	// 3. The plan: uploads in path order (a site's files arrive by
	// directory), deletions, type clashes.
	plan := SyncPlan{LocalFiles: s.nLocal, RemoteFiles: s.nRemote}
	err = s.scan(keyLocal, func(rel string, v []byte) error {
		lf := decodeFile(v)
		r, ok, err := s.get(keyRemote, rel)
		if err != nil {
			return err
		}
		var checksum string
		switch {
		case !ok || r.size != lf.size:
		case s.opts.Checksum:
			checksum = strings.ToLower(r.sha)
		case MtimeEqual(lf.mtime, r.mtime):
			plan.Unchanged++
			return nil
		}
		plan.Candidates++
		plan.CandidateBytes += lf.size
		lf.sha = checksum
		return s.set(keyUpload, rel, lf.encode())
	})
	if err != nil {
		return err
	}
	s.stats.Skipped = plan.Unchanged

	var conflictFiles, conflictDirs []string
	if s.opts.Delete && !walkOK {
		s.warn(s.opts.LocalDir, "part of the local tree could not be read: not deleting anything")
	}
	if s.opts.Delete && walkOK {
		err := s.scan(keyRemote, func(rel string, v []byte) error {
			if ok, err := s.has(keyLocal, rel); ok || err != nil {
				return err
			}
			if p, err := s.isProtected(rel); p || err != nil {
				return err
			}
			isDir, err := s.has(keyLocalDir, rel)
			if err != nil {
				return err
			}
			under, err := s.underLocalFile(rel)
			if err != nil {
				return err
			}
			switch {
			case isDir:
				// A remote file where a local directory is: remove it first.
				conflictFiles = append(conflictFiles, rel)
				plan.Deletes++
			case under:
				// Under a remote directory where a local file is: removed
				// with the whole directory below.
				plan.Deletes++
			default:
				plan.Deletes++
				return s.set(keyDelete, rel, v)
			}
			return nil
		})
		if err == nil {
			err = s.scan(keyLocal, func(rel string, _ []byte) error {
				if ok, err := s.has(keyRemoteDir, rel); ok || err != nil {
					if ok {
						conflictDirs = append(conflictDirs, rel)
					}
					return err
				}
				return nil
			})
		}
		if err != nil {
			return err
		}
	}
	if s.opts.OnPlan != nil {
		s.opts.OnPlan(plan)
	}

	// 4. Clear type clashes so that the uploads can land.
	for _, rel := range conflictFiles {
		r, _, _ := s.get(keyRemote, rel)
		s.deleteFile(ctx, rel, r.size)
	}
	for _, rel := range conflictDirs {
		s.removeDir(ctx, rel)
	}

	// 5. Uploads: small files in bulk, the rest one by one.
	if err := s.uploads(ctx, jobs); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sync: %w", err)
	}

	// 6. Deletions, then the directories they emptied.
	deleted := false
	err = workpool.Run(ctx, jobs, func(work chan<- func()) error {
		return s.scan(keyDelete, func(rel string, v []byte) error {
			deleted = true
			size := decodeFile(v).size
			return workpool.Send(ctx, work, func() { s.deleteFile(ctx, rel, size) })
		})
	})
	if err != nil {
		return err
	}
	if deleted {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("sync: %w", err)
		}
		if err := s.deleteEmptyDirs(ctx); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// The key spaces of a Sync's spill.Map: a byte, then a path relative to
// the prefix.
const (
	keyLocal     = 'l' // a local regular file: its size and mtime
	keyLocalDir  = 'd' // a local directory
	keyProtected = 'p' // a skipped local entry (symlink, device, unreadable)
	keyRemote    = 'r' // a remote file: size, mtime, SHA-256
	keyRemoteDir = 'D' // a remote directory
	keyUpload    = 'u' // a file to upload (and the remote SHA-256 to compare with, if any)
	keyDelete    = 'x' // a remote file to delete
	keyNeeded    = 'n' // a remote directory that holds something that stays
	keyCandidate = 'c' // a remote directory that may be left empty
	keyRmdir     = 'z' // a directory to remove, deepest first: 'z', 4 digits, the path
)

// fileRec is a file as the spill map keeps it.
type fileRec struct {
	size  int64
	mtime time.Time
	sha   string
}

func (f fileRec) encode() []byte {
	b := binary.AppendVarint(nil, f.size)
	mt, _ := f.mtime.MarshalBinary()
	b = append(b, byte(len(mt)))
	b = append(b, mt...)
	return append(b, f.sha...)
}

func decodeFile(v []byte) fileRec {
	var f fileRec
	size, n := binary.Varint(v)
	if n <= 0 || n >= len(v) {
		return f
	}
	f.size, v = size, v[n:]
	l := int(v[0])
	if 1+l > len(v) {
		return f
	}
	_ = f.mtime.UnmarshalBinary(v[1 : 1+l])
	f.sha = string(v[1+l:])
	return f
}

func spillKey(space byte, rel string) []byte {
	k := make([]byte, 0, 1+len(rel))
	return append(append(k, space), rel...)
}

func (s *syncer) set(space byte, rel string, v []byte) error {
	return s.m.Set(spillKey(space, rel), v)
}

func (s *syncer) has(space byte, rel string) (bool, error) {
	return s.m.Has(spillKey(space, rel))
}

func (s *syncer) get(space byte, rel string) (fileRec, bool, error) {
	v, ok, err := s.m.Get(spillKey(space, rel))
	if !ok || err != nil {
		return fileRec{}, false, err
	}
	return decodeFile(v), true, nil
}

// scan calls fn for every path of a key space, in order, until it fails.
func (s *syncer) scan(space byte, fn func(rel string, v []byte) error) error {
	err := s.m.Each([]byte{space}, func(k, v []byte) error { return fn(string(k[1:]), v) })
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("sync: %w", err)
	}
	return err
}

// uploads uploads the planned files: those of up to BatchFileBytes (and
// no checksum to compare) in bulk-upload batches, in path order, Jobs/8
// (at least one) at once; then the others, Jobs at once.
func (s *syncer) uploads(ctx context.Context, jobs int) error {
	bulk := !s.opts.NoBatch && !s.opts.DryRun
	batchable := func(t syncTask) bool { return bulk && t.checksum == "" && t.local.size <= BatchFileBytes }
	task := func(rel string, v []byte) syncTask {
		f := decodeFile(v)
		return syncTask{rel: rel, local: localFile{abs: s.abs(rel), size: f.size, mtime: f.mtime}, checksum: f.sha}
	}
	if bulk {
		err := workpool.Run(ctx, max(1, jobs/8), func(work chan<- func()) error {
			var cur []syncTask
			var size int64
			flush := func() error {
				if len(cur) == 0 {
					return nil
				}
				b := cur
				cur, size = nil, 0
				return workpool.Send(ctx, work, func() { s.uploadBatch(ctx, b) })
			}
			err := s.scan(keyUpload, func(rel string, v []byte) error {
				t := task(rel, v)
				if !batchable(t) {
					return nil
				}
				if len(cur) > 0 && (len(cur) >= BatchFiles || size+t.local.size > BatchBytes) {
					if err := flush(); err != nil {
						return err
					}
				}
				cur = append(cur, t)
				size += t.local.size
				return nil
			})
			if err == nil {
				err = flush()
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return workpool.Run(ctx, jobs, func(work chan<- func()) error {
		return s.scan(keyUpload, func(rel string, v []byte) error {
			if t := task(rel, v); !batchable(t) {
				return workpool.Send(ctx, work, func() { s.upload(ctx, t) })
			}
			return nil
		})
	})
}

// abs is the local path of rel.
func (s *syncer) abs(rel string) string { return filepath.Join(s.root, filepath.FromSlash(rel)) }

// walk records the regular files of the local tree by slash-separated path
// relative to the root, its directories, and its skipped entries (never
// deleted remotely); ok is false if some directory could not be read.
func (s *syncer) walk() (ok bool, err error) {
	root, err := filepath.EvalSymlinks(s.opts.LocalDir)
	if err != nil {
		return false, fmt.Errorf("sync: %w", err)
	}
	st, err := os.Stat(root)
	if err != nil {
		return false, fmt.Errorf("sync: %w", err)
	}
	if !st.IsDir() {
		return false, fmt.Errorf("sync: %w: %s is not a directory", ErrInvalidArgument, s.opts.LocalDir)
	}
	s.root, ok = root, true
	protect := func(rel string) error {
		s.nProtected++
		return s.set(keyProtected, rel, nil)
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, werr error) error {
		rel, rerr := filepath.Rel(root, p)
		if rerr != nil {
			return rerr
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			rel = ""
		}
		if werr != nil {
			ok = false
			s.record(SyncEvent{Op: SyncUpload, Path: p, Err: fmt.Errorf("read local: %w", werr)})
			if err := protect(rel); err != nil {
				return err
			}
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir():
			return s.set(keyLocalDir, rel, nil)
		case d.Type()&fs.ModeSymlink != 0:
			s.warn(p, "skipping symlink")
			return protect(rel)
		case !d.Type().IsRegular():
			s.warn(p, "skipping non-regular file")
			return protect(rel)
		default:
			info, ierr := d.Info()
			if ierr != nil {
				if errors.Is(ierr, fs.ErrNotExist) {
					return nil // vanished while walking
				}
				ok = false
				s.record(SyncEvent{Op: SyncUpload, Path: p, Err: fmt.Errorf("stat local: %w", ierr)})
				return protect(rel)
			}
			s.nLocal++
			return s.set(keyLocal, rel, fileRec{size: info.Size(), mtime: info.ModTime()}.encode())
		}
	})
	if err != nil {
		return false, fmt.Errorf("sync: walk %s: %w", s.opts.LocalDir, err)
	}
	return ok, nil
}

// listRemote records every file and directory under the prefix, by path
// relative to it.
func (s *syncer) listRemote(ctx context.Context) error {
	limit := s.opts.PageSize
	if limit <= 0 {
		limit = defaultSyncPage
	}
	base := ""
	if s.prefix != "" {
		base = s.prefix + "/"
	}
	lastDir := ""
	err := s.c.ListPages(ctx, s.opts.Bucket, s.prefix, ListOptions{Recursive: true, Limit: limit}, func(page ListResult) error {
		for _, e := range page.Entries {
			p := strings.Trim(e.Path, "/")
			rel, ok := strings.CutPrefix(p, base)
			if !ok || rel == "" {
				continue
			}
			if e.IsDir {
				if err := s.set(keyRemoteDir, rel, nil); err != nil {
					return err
				}
				continue
			}
			s.nRemote++
			if err := s.set(keyRemote, rel, fileRec{size: e.Size, mtime: e.ModTime, sha: e.SHA256}.encode()); err != nil {
				return err
			}
			// Its directories (those of the last file are set already).
			for d := path.Dir(rel); d != "." && d != lastDir && !strings.HasPrefix(lastDir, d+"/"); d = path.Dir(d) {
				if err := s.set(keyRemoteDir, d, nil); err != nil {
					return err
				}
			}
			lastDir = path.Dir(rel)
		}
		return nil
	})
	if errors.Is(err, ErrNotFound) && s.prefix != "" {
		// No such directory yet; fine if the bucket exists.
		if _, berr := s.c.Bucket(ctx, s.opts.Bucket); berr != nil {
			return fmt.Errorf("sync: %w", berr)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	return nil
}

func (s *syncer) upload(ctx context.Context, t syncTask) {
	remote := s.remote(t.rel)
	size, err := s.uploadFile(ctx, t, remote)
	if errors.Is(err, errUnchanged) {
		s.record(SyncEvent{Op: SyncSkip, Path: remote, Size: size})
		return
	}
	s.record(SyncEvent{Op: SyncUpload, Path: remote, Size: size, Err: err})
}

var errUnchanged = errors.New("unchanged")

func (s *syncer) uploadFile(ctx context.Context, t syncTask, remote string) (int64, error) {
	f, err := os.Open(t.local.abs)
	if err != nil {
		return t.local.size, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return t.local.size, err
	}
	if !st.Mode().IsRegular() {
		return t.local.size, fmt.Errorf("%s: %w: not a regular file", t.local.abs, ErrInvalidArgument)
	}
	size := st.Size()
	if t.checksum != "" {
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return size, fmt.Errorf("hash %s: %w", t.local.abs, err)
		}
		if hex.EncodeToString(h.Sum(nil)) == t.checksum {
			return size, errUnchanged
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return size, err
		}
	}
	if s.opts.DryRun {
		return size, nil
	}
	// LimitReader: a file that grows during the upload must not send more
	// than the declared length (the transport would fail the request).
	_, err = s.c.Put(ctx, s.opts.Bucket, remote, io.LimitReader(f, size), size, PutOptions{
		ContentType: mime.TypeByExtension(path.Ext(remote)),
		ModTime:     st.ModTime(),
		Mode:        uint32(st.Mode().Perm()),
	})
	return size, err
}

func (s *syncer) deleteFile(ctx context.Context, rel string, size int64) {
	remote := s.remote(rel)
	var err error
	if !s.opts.DryRun {
		if err = s.c.Delete(ctx, s.opts.Bucket, remote); errors.Is(err, ErrNotFound) {
			err = nil
		}
	}
	s.record(SyncEvent{Op: SyncDelete, Path: remote, Size: size, Err: err})
}

// removeDir removes the remote directory rel and everything below it, where
// a local file of that name is to be uploaded.
func (s *syncer) removeDir(ctx context.Context, rel string) {
	remote := s.remote(rel)
	if s.opts.DryRun {
		_ = s.m.Scan(spillKey(keyRemote, rel+"/"), func(k, v []byte) bool {
			s.record(SyncEvent{Op: SyncDelete, Path: s.remote(string(k[1:])), Size: decodeFile(v).size})
			return true
		})
		s.record(SyncEvent{Op: SyncDeleteDir, Path: remote})
		return
	}
	files, dirs, err := s.c.RemoveAll(ctx, s.opts.Bucket, remote)
	s.mu.Lock()
	s.stats.Deleted += files
	s.stats.DeletedDirs += dirs
	s.mu.Unlock()
	if err != nil {
		s.record(SyncEvent{Op: SyncDeleteDir, Path: remote, Err: err})
	}
}

// deleteEmptyDirs removes, deepest first, the remote directories that held
// deleted files, are absent locally and hold nothing that stays. A directory
// that turns out not to be empty is left alone.
func (s *syncer) deleteEmptyDirs(ctx context.Context) error {
	// needed: the directories of every local file, of every remote file
	// that stays, and of every skipped local entry (and that entry).
	last := ""
	markParents := func(rel string) error {
		d := path.Dir(rel)
		if d == last {
			return nil
		}
		last = d
		for ; d != "."; d = path.Dir(d) {
			if ok, err := s.has(keyNeeded, d); ok || err != nil {
				return err
			}
			if err := s.set(keyNeeded, d, nil); err != nil {
				return err
			}
		}
		return nil
	}
	err := s.scan(keyLocal, func(rel string, _ []byte) error { return markParents(rel) })
	if err == nil {
		last = ""
		err = s.scan(keyRemote, func(rel string, _ []byte) error {
			if gone, err := s.has(keyDelete, rel); gone || err != nil {
				return err
			}
			return markParents(rel)
		})
	}
	if err == nil {
		last = ""
		err = s.scan(keyProtected, func(rel string, _ []byte) error {
			if err := s.set(keyNeeded, rel, nil); err != nil {
				return err
			}
			return markParents(rel)
		})
	}
	// candidates: the directories of deleted files, and every remote one.
	if err == nil {
		last = ""
		err = s.scan(keyDelete, func(rel string, _ []byte) error {
			d := path.Dir(rel)
			if d == last {
				return nil
			}
			last = d
			for ; d != "."; d = path.Dir(d) {
				if err := s.set(keyCandidate, d, nil); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err == nil {
		err = s.scan(keyRemoteDir, func(rel string, _ []byte) error { return s.set(keyCandidate, rel, nil) })
	}
	if err == nil {
		err = s.scan(keyCandidate, func(d string, _ []byte) error {
			for _, space := range []byte{keyNeeded, keyLocalDir} {
				if ok, err := s.has(space, d); ok || err != nil {
					return err
				}
			}
			return s.set(keyRmdir, fmt.Sprintf("%04d%s", 9999-strings.Count(d, "/"), d), nil)
		})
	}
	if err != nil {
		return err
	}
	return s.scan(keyRmdir, func(k string, _ []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		remote := s.remote(k[4:])
		if s.opts.DryRun {
			s.record(SyncEvent{Op: SyncDeleteDir, Path: remote})
			return nil
		}
		err := s.c.Delete(ctx, s.opts.Bucket, remote)
		switch {
		case err == nil:
			s.record(SyncEvent{Op: SyncDeleteDir, Path: remote})
		case errors.Is(err, ErrConflict), errors.Is(err, ErrNotFound):
			// Not empty after all (an empty subdirectory the recursive
			// listing does not show), or already gone: leave it.
		default:
			s.record(SyncEvent{Op: SyncDeleteDir, Path: remote, Err: err})
		}
		return nil
	})
}

// isProtected reports whether rel is, or is below, a skipped local entry.
func (s *syncer) isProtected(rel string) (bool, error) {
	if s.nProtected == 0 {
		return false, nil
	}
	for p := rel; ; p = path.Dir(p) {
		if ok, err := s.has(keyProtected, p); ok || err != nil {
			return ok, err
		}
		if !strings.Contains(p, "/") {
			return false, nil
		}
	}
}

// underLocalFile reports whether a proper ancestor of rel is a local
// file. Paths come in order: the answer for the last directory is kept.
func (s *syncer) underLocalFile(rel string) (bool, error) {
	dir := path.Dir(rel)
	if s.underDir == dir && s.underOK {
		return s.under, nil
	}
	s.underDir, s.underOK, s.under = dir, false, false
	for d := dir; d != "."; d = path.Dir(d) {
		ok, err := s.has(keyLocal, d)
		if err != nil {
			return false, err
		}
		if ok {
			s.under = true
			break
		}
	}
	s.underOK = true
	return s.under, nil
}

// runPool calls fn(i) for i in [0, n) with at most jobs calls at a time and
// returns when all started calls have returned. It stops starting calls when
// ctx is done.
func runPool(ctx context.Context, jobs, n int, fn func(i int)) {
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(jobs, n) {
		wg.Go(func() {
			for i := range work {
				fn(i)
			}
		})
	}
	defer func() {
		close(work)
		wg.Wait()
	}()
	for i := range n {
		select {
		case work <- i:
		case <-ctx.Done():
			return
		}
	}
}
