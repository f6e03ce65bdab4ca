package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultSyncJobs is the number of parallel uploads Sync uses when
// SyncOptions.Jobs is 0.
const DefaultSyncJobs = 64

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

	// 1. The local tree.
	locals, localDirs, protected, walkOK, err := s.walk()
	if err != nil {
		return err
	}
	s.stats.LocalFiles = len(locals)

	// 2. The remote tree, in one paginated listing.
	remotes, remoteDirs, err := s.listRemote(ctx)
	if err != nil {
		return err
	}
	s.stats.RemoteFiles = len(remotes)

	// 3. The plan.
	var tasks []syncTask
	plan := SyncPlan{LocalFiles: len(locals), RemoteFiles: len(remotes)}
	for rel, lf := range locals {
		r, ok := remotes[rel]
		switch {
		case !ok || r.IsDir || r.Size != lf.size:
			tasks = append(tasks, syncTask{rel: rel, local: lf})
		case s.opts.Checksum:
			tasks = append(tasks, syncTask{rel: rel, local: lf, checksum: strings.ToLower(r.SHA256)})
		case MtimeEqual(lf.mtime, r.ModTime):
			plan.Unchanged++
		default:
			tasks = append(tasks, syncTask{rel: rel, local: lf})
		}
	}
	// Upload in path order: predictable, and a site's files arrive by directory.
	sort.Slice(tasks, func(i, j int) bool { return tasks[i].rel < tasks[j].rel })
	for _, t := range tasks {
		plan.CandidateBytes += t.local.size
	}
	plan.Candidates = len(tasks)
	s.stats.Skipped = plan.Unchanged

	var deletes, conflictFiles, conflictDirs []string
	if s.opts.Delete && !walkOK {
		s.warn(s.opts.LocalDir, "part of the local tree could not be read: not deleting anything")
	}
	if s.opts.Delete && walkOK {
		for rel := range remotes {
			if _, ok := locals[rel]; ok || isProtected(rel, protected) {
				continue
			}
			switch {
			case localDirs[rel]:
				// A remote file where a local directory is: remove it first.
				conflictFiles = append(conflictFiles, rel)
			case hasAncestorIn(rel, locals):
				// Under a remote directory where a local file is: removed
				// with the whole directory below.
			default:
				deletes = append(deletes, rel)
			}
		}
		for rel := range locals {
			if remoteDirs[rel] {
				conflictDirs = append(conflictDirs, rel)
			}
		}
		sort.Strings(deletes)
		sort.Strings(conflictFiles)
		sort.Strings(conflictDirs)
		plan.Deletes = len(deletes) + len(conflictFiles)
		for rel := range remotes {
			if !isProtected(rel, protected) && hasAncestorIn(rel, locals) {
				plan.Deletes++
			}
		}
	}
	if s.opts.OnPlan != nil {
		s.opts.OnPlan(plan)
	}

	// 4. Clear type clashes so that the uploads can land.
	for _, rel := range conflictFiles {
		s.deleteFile(ctx, rel, remotes[rel].Size)
	}
	for _, rel := range conflictDirs {
		s.removeDir(ctx, rel, remotes)
	}

	// 5. Uploads: small files in bulk, the rest one by one.
	var batches [][]syncTask
	if !s.opts.NoBatch && !s.opts.DryRun {
		batches, tasks = planBatches(tasks)
	}
	if len(batches) > 0 {
		runPool(ctx, max(1, jobs/8), len(batches), func(i int) { s.uploadBatch(ctx, batches[i]) })
	}
	runPool(ctx, jobs, len(tasks), func(i int) { s.upload(ctx, tasks[i]) })
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sync: %w", err)
	}

	// 6. Deletions, then the directories they emptied.
	if len(deletes) > 0 {
		runPool(ctx, jobs, len(deletes), func(i int) { s.deleteFile(ctx, deletes[i], remotes[deletes[i]].Size) })
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("sync: %w", err)
		}
		s.deleteEmptyDirs(ctx, deletes, locals, localDirs, remotes, remoteDirs, protected)
	}
	return ctx.Err()
}

// walk collects the regular files of the local tree by slash-separated path
// relative to the root. protected holds skipped entries (never deleted
// remotely); ok is false if some directory could not be read.
func (s *syncer) walk() (files map[string]localFile, dirs, protected map[string]bool, ok bool, err error) {
	root, err := filepath.EvalSymlinks(s.opts.LocalDir)
	if err != nil {
		return nil, nil, nil, false, fmt.Errorf("sync: %w", err)
	}
	st, err := os.Stat(root)
	if err != nil {
		return nil, nil, nil, false, fmt.Errorf("sync: %w", err)
	}
	if !st.IsDir() {
		return nil, nil, nil, false, fmt.Errorf("sync: %w: %s is not a directory", ErrInvalidArgument, s.opts.LocalDir)
	}
	files, dirs, protected, ok = map[string]localFile{}, map[string]bool{}, map[string]bool{}, true
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
			protected[rel] = true
			s.record(SyncEvent{Op: SyncUpload, Path: p, Err: fmt.Errorf("read local: %w", werr)})
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir():
			dirs[rel] = true
		case d.Type()&fs.ModeSymlink != 0:
			protected[rel] = true
			s.warn(p, "skipping symlink")
		case !d.Type().IsRegular():
			protected[rel] = true
			s.warn(p, "skipping non-regular file")
		default:
			info, ierr := d.Info()
			if ierr != nil {
				if errors.Is(ierr, fs.ErrNotExist) {
					return nil // vanished while walking
				}
				ok = false
				protected[rel] = true
				s.record(SyncEvent{Op: SyncUpload, Path: p, Err: fmt.Errorf("stat local: %w", ierr)})
				return nil
			}
			files[rel] = localFile{abs: p, size: info.Size(), mtime: info.ModTime()}
		}
		return nil
	})
	if err != nil {
		return nil, nil, nil, false, fmt.Errorf("sync: walk %s: %w", s.opts.LocalDir, err)
	}
	return files, dirs, protected, ok, nil
}

// listRemote lists every file under the prefix, keyed by path relative to it.
func (s *syncer) listRemote(ctx context.Context) (files map[string]ObjectInfo, dirs map[string]bool, err error) {
	files, dirs = map[string]ObjectInfo{}, map[string]bool{}
	limit := s.opts.PageSize
	if limit <= 0 {
		limit = defaultSyncPage
	}
	base := ""
	if s.prefix != "" {
		base = s.prefix + "/"
	}
	err = s.c.ListPages(ctx, s.opts.Bucket, s.prefix, ListOptions{Recursive: true, Limit: limit}, func(page ListResult) error {
		for _, e := range page.Entries {
			p := strings.Trim(e.Path, "/")
			rel, ok := strings.CutPrefix(p, base)
			if !ok || rel == "" {
				continue
			}
			if e.IsDir {
				dirs[rel] = true
				continue
			}
			files[rel] = e
			for d := path.Dir(rel); d != "."; d = path.Dir(d) {
				dirs[d] = true
			}
		}
		return nil
	})
	if errors.Is(err, ErrNotFound) && s.prefix != "" {
		// No such directory yet; fine if the bucket exists.
		if _, berr := s.c.Bucket(ctx, s.opts.Bucket); berr != nil {
			return nil, nil, fmt.Errorf("sync: %w", berr)
		}
		return files, dirs, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("sync: %w", err)
	}
	return files, dirs, nil
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
func (s *syncer) removeDir(ctx context.Context, rel string, remotes map[string]ObjectInfo) {
	remote := s.remote(rel)
	if s.opts.DryRun {
		for r, info := range remotes {
			if strings.HasPrefix(r, rel+"/") {
				s.record(SyncEvent{Op: SyncDelete, Path: s.remote(r), Size: info.Size})
			}
		}
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
func (s *syncer) deleteEmptyDirs(ctx context.Context, deleted []string, locals map[string]localFile,
	localDirs map[string]bool, remotes map[string]ObjectInfo, remoteDirs, protected map[string]bool) {
	gone := make(map[string]bool, len(deleted))
	for _, d := range deleted {
		gone[d] = true
	}
	needed := map[string]bool{}
	markParents := func(rel string) {
		for d := path.Dir(rel); d != "." && !needed[d]; d = path.Dir(d) {
			needed[d] = true
		}
	}
	for rel := range locals {
		markParents(rel)
	}
	for rel := range remotes {
		if !gone[rel] {
			markParents(rel)
		}
	}
	for rel := range protected {
		needed[rel] = true
		markParents(rel)
	}
	candidates := map[string]bool{}
	for _, rel := range deleted {
		for d := path.Dir(rel); d != "."; d = path.Dir(d) {
			candidates[d] = true
		}
	}
	for d := range remoteDirs {
		candidates[d] = true
	}
	var dirs []string
	for d := range candidates {
		if !needed[d] && !localDirs[d] {
			dirs = append(dirs, d)
		}
	}
	sort.Slice(dirs, func(i, j int) bool {
		ci, cj := strings.Count(dirs[i], "/"), strings.Count(dirs[j], "/")
		if ci != cj {
			return ci > cj
		}
		return dirs[i] < dirs[j]
	})
	for _, d := range dirs {
		if ctx.Err() != nil {
			return
		}
		remote := s.remote(d)
		if s.opts.DryRun {
			s.record(SyncEvent{Op: SyncDeleteDir, Path: remote})
			continue
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
	}
}

// isProtected reports whether rel is, or is below, a skipped local entry.
func isProtected(rel string, protected map[string]bool) bool {
	if len(protected) == 0 {
		return false
	}
	for p := rel; ; p = path.Dir(p) {
		if protected[p] {
			return true
		}
		if !strings.Contains(p, "/") {
			return false
		}
	}
}

// hasAncestorIn reports whether a proper ancestor of rel is a local file.
func hasAncestorIn(rel string, locals map[string]localFile) bool {
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		if _, ok := locals[d]; ok {
			return true
		}
	}
	return false
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
