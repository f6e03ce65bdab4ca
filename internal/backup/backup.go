package backup

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cairn-fs/cairn/client"
	"github.com/cairn-fs/cairn/internal/workpool"
)

// DefaultJobs is the number of files a run copies at once when
// Config.Jobs is 0.
const DefaultJobs = 16

// listPage is the snapshot listing's page size (the server's cap).
const listPage = 10000

// Config configures Backup.
type Config struct {
	// Source talks to the cluster holding Bucket, with a key that may
	// take snapshots (the admin key).
	Source *client.Client
	// Bucket is the bucket to back up.
	Bucket string
	// Snapshot names an existing snapshot of Bucket to copy; "" takes one
	// (named backup-TIME), deleted at the end unless KeepSnapshot.
	Snapshot     string
	KeepSnapshot bool
	// Verify checks every file the destination should hold (Location.Holds:
	// a local directory reads and hashes it) instead of trusting the
	// manifest: a damaged or changed file there is copied again.
	Verify bool
	// Dest is where the backup goes (ParseLocation).
	Dest Location
	// Jobs is the number of files copied at once; 0 means DefaultJobs.
	Jobs int
	// Progress, if set, is updated as the run goes.
	Progress *Progress
	// OnPlan, if set, is called once, before the first change at Dest.
	OnPlan func(Summary)
	// OnWarning, if set, is called with passing conditions (files left
	// out, a snapshot that could not be deleted...).
	OnWarning func(string)
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Summary is a run's plan, for a progress display.
type Summary struct {
	// Snapshot is the snapshot copied.
	Snapshot string
	// Files and Bytes are the snapshot's (what the destination will hold).
	Files int
	Bytes int64
	// Copy files of CopyBytes will be copied; Same are held already;
	// Delete will be removed; Foreign are left alone.
	Copy      int
	CopyBytes int64
	Same      int
	Delete    int
	Foreign   int
}

// Stats sums up a Backup. It is valid whatever Backup returns.
type Stats struct {
	Bucket, Snapshot string
	// SnapshotTaken: the run took the snapshot. SnapshotKept: it is still
	// there (KeepSnapshot, or it could not be deleted: see the warnings).
	SnapshotTaken, SnapshotKept bool
	// Files and Bytes are the snapshot's files (those copied or held).
	Files int
	Bytes int64
	// Copied files of CopiedBytes were written to the destination;
	// LocalCopies of them were copied from a file it held at another path.
	Copied      int
	CopiedBytes int64
	LocalCopies int
	// Unchanged files were held already; Checked of them were read at the
	// destination to know it (paths of an unfinished run).
	Unchanged, Checked int
	// Deleted files were removed (gone from the snapshot).
	Deleted int
	// Foreign files at the destination are not the backup's: left alone.
	Foreign int
	// Skipped files of the bucket are not backed up: its MetaDir and
	// .cairn-uploads (S3 multipart parts in flight).
	Skipped int
	// Failures lists the files that could not be copied or removed.
	Failures []Failure
	// ManifestWritten: the run completed and its manifest is in place.
	ManifestWritten bool
	Elapsed         time.Duration
}

// Backup copies a snapshot of cfg.Bucket to cfg.Dest (package doc):
//
//  1. it reads the destination's manifest, journal and listing, and
//     refuses (ErrRefused) a destination that holds another bucket's
//     backup, or files but no backup;
//  2. it takes a snapshot (or finds cfg.Snapshot) and lists it;
//  3. it plans (MakePlan), checks the unknown files at the destination,
//     writes the journal, removes what the snapshot no longer has, copies
//     what the destination does not hold (each file checked against its
//     SHA-256 while it is read), and where the destination lists digests
//     checks every copied file there;
//  4. only then, with no failure, it makes the writes durable, writes the
//     new manifest and removes the journal;
//  5. it deletes the snapshot it took, unless KeepSnapshot.
//
// Failures of single files do not stop the others: Backup then returns
// an error matching ErrIncomplete and leaves the manifest as it was (run
// again to finish). A done ctx stops it the same way. It blocks until
// done.
func Backup(ctx context.Context, cfg Config) (st Stats, err error) {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	start := now()
	st.Bucket = cfg.Bucket
	defer func() { st.Elapsed = now().Sub(start) }()
	if cfg.Source == nil || cfg.Dest == nil || cfg.Bucket == "" || strings.Contains(cfg.Bucket, "/") {
		return st, fmt.Errorf("backup: %w: a source, a bucket name and a destination are needed", client.ErrInvalidArgument)
	}
	jobs := cfg.Jobs
	if jobs <= 0 {
		jobs = DefaultJobs
	}
	prog := cfg.Progress
	if prog == nil {
		prog = &Progress{}
	}
	warn := func(format string, args ...any) {
		if cfg.OnWarning != nil {
			cfg.OnWarning(fmt.Sprintf(format, args...))
		}
	}
	dest := cfg.Dest
	l := newLists(tempDir())
	defer l.close()

	// 1. What the destination holds.
	if cl, ok := dest.(*cairnLocation); ok && cl.bucket == cfg.Bucket && sameServer(cl.c.BaseURL(), cfg.Source.BaseURL()) {
		return st, refused("backup refused: %s is inside bucket %s, which it would copy into itself", dest, cfg.Bucket)
	}
	old, jr, manifestSum, err := readState(ctx, dest, l)
	if err != nil {
		return st, err
	}
	for _, b := range []string{bucketOf(old, nil), bucketOf(nil, jr)} {
		if b != "" && b != cfg.Bucket {
			return st, refused("backup refused: %s holds a backup of bucket %s, not %s: use another destination", dest, b, cfg.Bucket)
		}
	}
	invFiles := 0
	if err := dest.Inventory(ctx, func(p string, f Found) error {
		invFiles++
		return l.set(keyInv, p, encodeFound(f))
	}); err != nil {
		return st, err
	}
	if old == nil && jr == nil && invFiles > 0 {
		return st, refused("backup refused: %s holds %d files but no backup (%s/%s): give an empty or new destination, or one a backup wrote",
			dest, invFiles, MetaDir, ManifestName)
	}

	// 2. The snapshot.
	snapInfo, taken, err := snapshotFor(ctx, cfg, now)
	if err != nil {
		return st, err
	}
	st.Snapshot, st.SnapshotTaken, st.SnapshotKept = snapInfo.Name, taken, true
	if taken && !cfg.KeepSnapshot {
		defer func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if derr := cfg.Source.DeleteSnapshot(dctx, cfg.Bucket, snapInfo.Name); derr != nil {
				warn("the snapshot %s was not deleted (%v): delete it with cairn snapshot delete %s %s",
					snapInfo.Name, derr, cfg.Bucket, snapInfo.Name)
				return
			}
			st.SnapshotKept = false
		}()
	}
	ls, err := listSnapshot(ctx, cfg.Source, cfg.Bucket, snapInfo.Name, l)
	if err != nil {
		return st, err
	}
	if old != nil {
		// The destination's manifest in the snapshot: the destination is
		// inside the bucket (through another node's URL, say).
		for _, p := range ls.manifests {
			if e, _, _ := l.entry(keySnap, p); e.SHA256 == manifestSum {
				return st, refused("backup refused: %s is inside bucket %s (its manifest is %s there): it would copy into itself",
					dest, cfg.Bucket, p)
			}
		}
	}
	st.Skipped, st.Failures = ls.skipped, ls.bad
	if ls.skipped > 0 {
		warn("%d files under %s/ or .cairn-uploads/ of bucket %s are not backed up", ls.skipped, MetaDir, cfg.Bucket)
	}
	st.Files, st.Bytes = ls.files, ls.bytes

	// 3. The plan, the checks, the journal.
	pl, err := makePlan(l, old != nil, cfg.Verify)
	if err != nil {
		return st, err
	}
	var mu sync.Mutex
	var lerr error // a failure of the working lists
	keep := func(err error) {
		if err != nil {
			mu.Lock()
			lerr = cmp.Or(lerr, err)
			mu.Unlock()
		}
	}
	err = workpool.Run(ctx, jobs, func(work chan<- func()) error {
		return l.eachEntry(keyCheck, func(p string, e Entry, _ string) error {
			return workpool.Send(ctx, work, func() {
				ok, herr := dest.Holds(ctx, p, e)
				if herr != nil && ctx.Err() == nil {
					warn("%s: %v: copying it again", p, herr)
				}
				if ok && herr == nil {
					keep(l.set(keySame, p, encodeEntry(e, "")))
					keep(l.set(keyTouch, p, nil)) // an unfinished run may have left other metadata
					mu.Lock()
					st.Checked++
					pl.same++
					mu.Unlock()
				} else {
					keep(l.set(keyCopy, p, encodeEntry(e, "")))
					mu.Lock()
					pl.copy++
					mu.Unlock()
				}
			})
		})
	})
	if err == nil {
		err = lerr
	}
	if cerr := ctx.Err(); cerr != nil {
		return st, interrupted(cerr)
	}
	if err != nil {
		return st, err
	}
	// A local destination copies content it holds at another path (a
	// moved or duplicated file) instead of fetching it; a file about to be
	// deleted that serves so is deleted after the copies.
	if _, ok := dest.(localCopier); ok {
		if err := localSources(l, old != nil && !cfg.Verify); err != nil {
			return st, err
		}
	}
	sum := Summary{Snapshot: snapInfo.Name, Files: st.Files, Bytes: st.Bytes, Copy: pl.copy,
		Same: pl.same, Delete: pl.delete, Foreign: pl.foreign}
	added := 0
	err = l.eachEntry(keyCopy, func(p string, e Entry, _ string) error {
		sum.CopyBytes += e.Size
		return l.journal(p, &added)
	})
	if err == nil {
		err = l.each(keyDelete, func(p string, _ []byte) error { return l.journal(p, &added) })
	}
	if err != nil {
		return st, err
	}
	st.Unchanged, st.Foreign = pl.same, pl.foreign
	prog.TotalFiles.Store(int64(pl.copy))
	prog.TotalBytes.Store(sum.CopyBytes)
	if cfg.OnPlan != nil {
		cfg.OnPlan(sum)
	}
	if added > 0 {
		if err := l.each(keyPending, func(p string, _ []byte) error { return l.set(keyJournal, p, nil) }); err != nil {
			return st, err
		}
		j := &Journal{Bucket: cfg.Bucket, Snapshot: snapInfo.Name, Started: now().UTC()}
		if err := putMeta(ctx, dest, JournalName, func(w io.Writer) error { return writeJournal(w, j, l, keyJournal) }); err != nil {
			return st, fmt.Errorf("backup: write the journal at %s (nothing changed there yet): %w", dest, err)
		}
		jr = j
	}

	// 4. Removals (first, so that a file can take the place of a
	// directory that went), copies, late removals, metadata.
	remove := func(late bool, done byte) error {
		err := workpool.Run(ctx, jobs, func(work chan<- func()) error {
			return l.each(keyDelete, func(p string, _ []byte) error {
				if isLate, err := l.has(keyLate, p); err != nil || isLate != late {
					return err
				}
				return workpool.Send(ctx, work, func() {
					if rerr := dest.Remove(ctx, p); rerr != nil {
						mu.Lock()
						st.Failures = append(st.Failures, Failure{Path: p, Err: fmt.Errorf("remove: %w", rerr)})
						mu.Unlock()
						return
					}
					if ctx.Err() == nil {
						keep(l.set(done, p, nil))
						mu.Lock()
						st.Deleted++
						mu.Unlock()
					}
				})
			})
		})
		if err == nil {
			err = lerr
		}
		if err != nil || ctx.Err() != nil {
			return err
		}
		return pruneDirs(ctx, l, done, dest)
	}
	if err := remove(false, keyDeleted); err != nil {
		return st, err
	}
	cp := &copier{src: snapSource{c: cfg.Source, bucket: cfg.Bucket, name: snapInfo.Name}, dst: dest, jobs: jobs, prog: prog,
		lists: l, learnSpace: keySnap}
	if err := cp.run(ctx, keyCopy); err != nil {
		return st, err
	}
	if err := remove(true, keyDeletedLate); err != nil {
		return st, err
	}
	st.Copied, st.CopiedBytes, st.LocalCopies = cp.copied, cp.bytes, cp.local
	st.Failures = append(st.Failures, cp.failures...)
	err = workpool.Run(ctx, jobs, func(work chan<- func()) error {
		return l.each(keyTouch, func(p string, _ []byte) error {
			e, _, err := l.entry(keySnap, p)
			if err != nil {
				return err
			}
			return workpool.Send(ctx, work, func() {
				if _, terr := dest.SetMeta(ctx, p, e); terr != nil {
					mu.Lock()
					st.Failures = append(st.Failures, Failure{Path: p, Err: terr})
					mu.Unlock()
				}
			})
		})
	})
	if cerr := ctx.Err(); cerr != nil {
		return st, interrupted(cerr)
	}
	if err != nil {
		return st, err
	}

	// 5. Where the destination lists digests, every copied file is checked.
	if _, ok := dest.(interface{ listsDigests() }); ok && cp.copied > 0 {
		failures, err := checkCopies(ctx, dest, l, keySnap)
		if err != nil {
			return st, fmt.Errorf("backup: check the copies at %s: %w", dest, err)
		}
		st.Failures = append(st.Failures, failures...)
	}
	if len(st.Failures) > 0 {
		sortFailures(st.Failures)
		return st, fmt.Errorf("%w: %d of %d files failed: the manifest at %s is unchanged (run again to finish)",
			ErrIncomplete, len(st.Failures), pl.copy+pl.delete+len(ls.bad), dest)
	}

	// 6. Commit: durable writes, then the manifest, then no journal.
	if err := dest.Flush(ctx); err != nil {
		return st, fmt.Errorf("backup: %w", err)
	}
	m := &Manifest{Bucket: cfg.Bucket, Snapshot: snapInfo.Name, SnapshotCreated: snapInfo.Created,
		SnapshotIndex: snapInfo.Index, Source: cfg.Source.BaseURL(), Completed: now().UTC()}
	if err := l.summarize(m, keySnap); err != nil {
		return st, err
	}
	if err := putMeta(ctx, dest, ManifestName, func(w io.Writer) error { return writeManifest(w, m, l, keySnap) }); err != nil {
		return st, fmt.Errorf("backup: write the manifest at %s (the copies are done: run again to write it): %w", dest, err)
	}
	st.ManifestWritten = true
	if jr != nil {
		if err := dest.RemoveMeta(ctx, JournalName); err != nil {
			warn("the journal %s/%s at %s was not removed (%v): the next run checks its paths again", MetaDir, JournalName, dest, err)
		}
	}
	return st, nil
}

// journal adds p to the new journal's paths, counting it in added when
// no unfinished run named it.
func (l *lists) journal(p string, added *int) error {
	pending, err := l.has(keyPending, p)
	if err != nil || pending {
		return err
	}
	*added++
	return l.set(keyJournal, p, nil)
}

// summarize fills m's totals from the files of space.
func (l *lists) summarize(m *Manifest, space byte) error {
	m.FileCount, m.Bytes, m.Hashes = 0, 0, 0
	return l.eachEntry(space, func(_ string, e Entry, _ string) error {
		m.FileCount++
		m.Bytes += e.Size
		if seen, err := l.has(keyHashSeen, e.SHA256); err != nil || seen {
			return err
		}
		m.Hashes++
		return l.set(keyHashSeen, e.SHA256, nil)
	})
}

// putMeta writes a manifest or a journal at dest: write's output goes to
// a temporary file first (its size and SHA-256 known), then WriteMeta
// sends it.
func putMeta(ctx context.Context, dest Location, name string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(tempDir(), "cairn-backup-"+name+"-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(f, h)}
	if err := write(cw); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	return dest.WriteMeta(ctx, name, Entry{Size: cw.n, SHA256: hex.EncodeToString(h.Sum(nil)), ContentType: "application/json"}, f)
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// checkCopies lists dest again and checks every copied file against its
// entry in space: a failure for each that does not match.
func checkCopies(ctx context.Context, dest Location, l *lists, space byte) ([]Failure, error) {
	var failures []Failure
	check := func(p string, f Found) error {
		e, _, err := l.entry(space, p)
		if err != nil {
			return err
		}
		if f.SHA256 != e.SHA256 || f.Size != e.Size {
			failures = append(failures, Failure{Path: p, Err: fmt.Errorf("%w: %s holds %s (%d bytes) after the copy, want %s",
				ErrDigest, dest, short(f.SHA256), f.Size, short(e.SHA256))})
		}
		return nil
	}
	err := dest.Inventory(ctx, func(p string, f Found) error {
		if copied, err := l.has(keyCopied, p); err != nil || !copied {
			return err
		}
		if err := l.set(keyChecked, p, nil); err != nil {
			return err
		}
		return check(p, f)
	})
	if err != nil {
		return nil, err
	}
	err = l.each(keyCopied, func(p string, _ []byte) error {
		if ok, err := l.has(keyChecked, p); ok || err != nil {
			return err
		}
		return check(p, Found{}) // not listed at all
	})
	return failures, err
}

// interrupted wraps a done context's error for a run that stopped.
func interrupted(err error) error {
	return fmt.Errorf("backup interrupted: %w (the manifest is unchanged: run again to resume)", err)
}

// bucketOf is the bucket a manifest or journal is about ("" for none).
func bucketOf(m *Manifest, j *Journal) string {
	switch {
	case m != nil:
		return m.Bucket
	case j != nil:
		return j.Bucket
	}
	return ""
}

// readState reads a location's manifest and journal (nil when absent)
// into l (keyOld, keyPending), and the manifest's SHA-256.
func readState(ctx context.Context, loc Location, l *lists) (*Manifest, *Journal, string, error) {
	var m *Manifest
	var sum string
	rc, err := loc.ReadMeta(ctx, ManifestName)
	switch {
	case errors.Is(err, ErrNoMeta):
	case err != nil:
		return nil, nil, "", err
	default:
		h := sha256.New()
		m, err = readManifest(io.TeeReader(rc, h), func(p string, e Entry) error { return l.set(keyOld, p, encodeEntry(e, "")) })
		if err == nil {
			_, err = io.Copy(h, rc) // what follows the document, if anything, counts in its digest
		}
		rc.Close()
		if err != nil {
			return nil, nil, "", fmt.Errorf("%s/%s/%s: %w (move it away to start over)", loc, MetaDir, ManifestName, err)
		}
		sum = hex.EncodeToString(h.Sum(nil))
	}
	var j *Journal
	rc, err = loc.ReadMeta(ctx, JournalName)
	switch {
	case errors.Is(err, ErrNoMeta):
	case err != nil:
		return nil, nil, "", err
	default:
		j, err = readJournal(rc, func(p string) error { return l.set(keyPending, p, nil) })
		rc.Close()
		if err != nil {
			return nil, nil, "", fmt.Errorf("%s/%s/%s: %w (move it away to start over)", loc, MetaDir, JournalName, err)
		}
	}
	return m, j, sum, nil
}

// sameServer reports whether two base URLs name the same server (scheme,
// host and port, case-insensitively; a missing port is the scheme's).
func sameServer(a, b string) bool {
	norm := func(s string) string {
		u, err := url.Parse(s)
		if err != nil {
			return s
		}
		host, port := strings.ToLower(u.Hostname()), u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		if host == "localhost" {
			host = "127.0.0.1"
		}
		return u.Scheme + "://" + host + ":" + port
	}
	return norm(a) == norm(b)
}

// snapshotFor takes a snapshot of cfg.Bucket, or finds cfg.Snapshot.
func snapshotFor(ctx context.Context, cfg Config, now func() time.Time) (client.Snapshot, bool, error) {
	if cfg.Snapshot != "" {
		list, err := cfg.Source.Snapshots(ctx, cfg.Bucket)
		if err != nil {
			return client.Snapshot{}, false, fmt.Errorf("backup: %w", err)
		}
		for _, s := range list {
			if s.Name == cfg.Snapshot {
				return s, false, nil
			}
		}
		return client.Snapshot{}, false, fmt.Errorf("backup: %w: no snapshot %q of bucket %s (cairn snapshot list %s)",
			client.ErrNotFound, cfg.Snapshot, cfg.Bucket, cfg.Bucket)
	}
	base := "backup-" + now().UTC().Format("2006-01-02T15-04-05Z")
	name := base
	for i := 2; ; i++ {
		s, err := cfg.Source.CreateSnapshot(ctx, cfg.Bucket, name)
		if err == nil {
			return s, true, nil
		}
		if !errors.Is(err, client.ErrConflict) || i > 10 || strings.Contains(err.Error(), "NotUpgraded") {
			return client.Snapshot{}, false, fmt.Errorf("backup: %w", err)
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
}

// snapListing sums up listSnapshot.
type snapListing struct {
	files, skipped int
	bytes          int64
	bad            []Failure
	// manifests are the paths of backup manifests in the snapshot (a
	// destination inside the bucket).
	manifests []string
}

// listSnapshot lists every file of a snapshot into l (keySnap). Files
// under the bucket's MetaDir or .cairn-uploads are left out (skipped); a
// path no destination could take is a failure.
func listSnapshot(ctx context.Context, c *client.Client, bucket, name string, l *lists) (snapListing, error) {
	var ls snapListing
	err := c.SnapshotListPages(ctx, bucket, name, "", client.ListOptions{Recursive: true, Limit: listPage}, func(page client.ListResult) error {
		for _, o := range page.Entries {
			if o.IsDir {
				continue
			}
			p := strings.Trim(o.Path, "/")
			top, _, _ := strings.Cut(p, "/")
			if top == MetaDir || top == ".cairn-uploads" {
				ls.skipped++
				continue
			}
			if err := CheckPath(p); err != nil {
				ls.bad = append(ls.bad, Failure{Path: p, Err: err})
				continue
			}
			sha := strings.ToLower(o.SHA256)
			if !validHex(sha) {
				sha = "" // learned while copying
			}
			if strings.HasSuffix(p, "/"+MetaDir+"/"+ManifestName) {
				ls.manifests = append(ls.manifests, p)
			}
			ls.files++
			ls.bytes += o.Size
			if err := l.set(keySnap, p, encodeEntry(Entry{SHA256: sha, Size: o.Size, Mtime: o.ModTime, Mode: o.Mode, ContentType: o.ContentType}, "")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return ls, fmt.Errorf("backup: %w", err)
	}
	return ls, nil
}
