package backup

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/client"
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

	// 1. What the destination holds.
	if cl, ok := dest.(*cairnLocation); ok && cl.bucket == cfg.Bucket && sameServer(cl.c.BaseURL(), cfg.Source.BaseURL()) {
		return st, refused("backup refused: %s is inside bucket %s, which it would copy into itself", dest, cfg.Bucket)
	}
	old, jr, manifestSum, err := readState(ctx, dest)
	if err != nil {
		return st, err
	}
	for _, b := range []string{bucketOf(old, nil), bucketOf(nil, jr)} {
		if b != "" && b != cfg.Bucket {
			return st, refused("backup refused: %s holds a backup of bucket %s, not %s: use another destination", dest, b, cfg.Bucket)
		}
	}
	inv, err := dest.Inventory(ctx)
	if err != nil {
		return st, err
	}
	if old == nil && jr == nil && len(inv) > 0 {
		return st, refused("backup refused: %s holds %d files but no backup (%s/%s): give an empty or new destination, or one a backup wrote",
			dest, len(inv), MetaDir, ManifestName)
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
	snap, skipped, bad, err := listSnapshot(ctx, cfg.Source, cfg.Bucket, snapInfo.Name)
	if err != nil {
		return st, err
	}
	if old != nil {
		// The destination's manifest in the snapshot: the destination is
		// inside the bucket (through another node's URL, say).
		for p, e := range snap {
			if strings.HasSuffix(p, "/"+MetaDir+"/"+ManifestName) && e.SHA256 == manifestSum {
				return st, refused("backup refused: %s is inside bucket %s (its manifest is %s there): it would copy into itself",
					dest, cfg.Bucket, p)
			}
		}
	}
	st.Skipped, st.Failures = skipped, bad
	if skipped > 0 {
		warn("%d files under %s/ or .cairn-uploads/ of bucket %s are not backed up", skipped, MetaDir, cfg.Bucket)
	}
	st.Files = len(snap)
	for _, e := range snap {
		st.Bytes += e.Size
	}

	// 3. The plan, the checks, the journal.
	pending := map[string]bool{}
	if jr != nil {
		for _, p := range jr.Paths {
			pending[p] = true
		}
	}
	pl := MakePlan(snap, old, pending, inv)
	if cfg.Verify {
		// Without the manifest every present file of the right size is
		// checked; what the manifest named is still the backup's to delete.
		full := pl
		pl = MakePlan(snap, nil, pending, inv)
		pl.Delete, pl.Foreign = full.Delete, full.Foreign
	}
	held := make([]bool, len(pl.Check))
	runPool(ctx, jobs, len(pl.Check), func(i int) {
		ok, herr := dest.Holds(ctx, pl.Check[i].Path, pl.Check[i].Entry)
		if herr != nil && ctx.Err() == nil {
			warn("%s: %v: copying it again", pl.Check[i].Path, herr)
		}
		held[i] = ok && herr == nil
	})
	if err := ctx.Err(); err != nil {
		return st, interrupted(err)
	}
	for i, t := range pl.Check {
		if held[i] {
			pl.Same = append(pl.Same, t.Path)
			pl.Touch = append(pl.Touch, t.Path) // an unfinished run may have left other metadata
			st.Checked++
		} else {
			pl.Copy = append(pl.Copy, t)
		}
	}
	slices.SortFunc(pl.Copy, func(a, b Task) int { return strings.Compare(a.Path, b.Path) })
	// A local destination copies content it holds at another path (a
	// moved or duplicated file) instead of fetching it; a file about to be
	// deleted that serves so is deleted after the copies.
	var lateDelete map[string]bool
	if _, ok := dest.(localCopier); ok {
		held := make(map[string]string, len(pl.Same))
		for _, p := range pl.Same {
			held[p] = snap[p].SHA256
		}
		if old != nil && !cfg.Verify {
			for _, p := range pl.Delete {
				if e, ok := old.Files[p]; ok && !pending[p] && inv[p].Size == e.Size {
					held[p] = e.SHA256
				}
			}
		}
		LocalSources(pl.Copy, held)
		for _, t := range pl.Copy {
			if _, same := snap[t.From]; t.From != "" && !same {
				if lateDelete == nil {
					lateDelete = map[string]bool{}
				}
				lateDelete[t.From] = true
			}
		}
	}
	sum := Summary{Snapshot: snapInfo.Name, Files: st.Files, Bytes: st.Bytes, Copy: len(pl.Copy),
		Same: len(pl.Same), Delete: len(pl.Delete), Foreign: len(pl.Foreign)}
	for _, t := range pl.Copy {
		sum.CopyBytes += t.Entry.Size
	}
	st.Unchanged, st.Foreign = len(pl.Same), len(pl.Foreign)
	prog.TotalFiles.Store(int64(len(pl.Copy)))
	prog.TotalBytes.Store(sum.CopyBytes)
	if cfg.OnPlan != nil {
		cfg.OnPlan(sum)
	}
	var add []string
	for _, t := range pl.Copy {
		if !pending[t.Path] {
			add = append(add, t.Path)
		}
	}
	for _, p := range pl.Delete {
		if !pending[p] {
			add = append(add, p)
		}
	}
	if len(add) > 0 {
		j := &Journal{Bucket: cfg.Bucket, Snapshot: snapInfo.Name, Started: now().UTC(), Paths: add}
		if jr != nil {
			j.Paths = append(j.Paths, jr.Paths...)
		}
		data, err := EncodeJournal(j)
		if err == nil {
			err = dest.WriteMeta(ctx, JournalName, data)
		}
		if err != nil {
			return st, fmt.Errorf("backup: write the journal at %s (nothing changed there yet): %w", dest, err)
		}
		jr = j
	}

	// 4. Removals (first, so that a file can take the place of a
	// directory that went), copies, late removals, metadata.
	var early, late, deleted []string
	for _, p := range pl.Delete {
		if lateDelete[p] {
			late = append(late, p)
		} else {
			early = append(early, p)
		}
	}
	remove := func(paths []string) {
		errs := make([]error, len(paths))
		runPool(ctx, jobs, len(paths), func(i int) { errs[i] = dest.Remove(ctx, paths[i]) })
		var done []string
		for i, p := range paths {
			switch {
			case errs[i] != nil:
				st.Failures = append(st.Failures, Failure{Path: p, Err: fmt.Errorf("remove: %w", errs[i])})
			case ctx.Err() == nil:
				done = append(done, p)
			}
		}
		deleted = append(deleted, done...)
		if ctx.Err() == nil {
			dest.RemoveDirs(ctx, PruneDirs(done, snap, inv))
		}
	}
	remove(early)
	cp := &copier{src: snapSource{c: cfg.Source, bucket: cfg.Bucket, name: snapInfo.Name}, dst: dest, jobs: jobs, prog: prog}
	cp.run(ctx, pl.Copy)
	remove(late)
	st.Deleted = len(deleted)
	st.Copied, st.CopiedBytes, st.LocalCopies = len(cp.copied), cp.bytes, cp.local
	st.Failures = append(st.Failures, cp.failures...)
	for p, d := range cp.learned {
		e := snap[p]
		e.SHA256 = d
		snap[p] = e
	}
	touchErrs := make([]error, len(pl.Touch))
	runPool(ctx, jobs, len(pl.Touch), func(i int) {
		_, touchErrs[i] = dest.SetMeta(ctx, pl.Touch[i], snap[pl.Touch[i]])
	})
	for i, terr := range touchErrs {
		if terr != nil {
			st.Failures = append(st.Failures, Failure{Path: pl.Touch[i], Err: terr})
		}
	}
	if err := ctx.Err(); err != nil {
		return st, interrupted(err)
	}

	// 5. Where the destination lists digests, every copied file is checked.
	if _, ok := dest.(interface{ listsDigests() }); ok && len(cp.copied) > 0 {
		after, err := dest.Inventory(ctx)
		if err != nil {
			return st, fmt.Errorf("backup: check the copies at %s: %w", dest, err)
		}
		for _, p := range cp.copied {
			if f := after[p]; f.SHA256 != snap[p].SHA256 || f.Size != snap[p].Size {
				st.Failures = append(st.Failures, Failure{Path: p, Err: fmt.Errorf("%w: %s holds %s (%d bytes) after the copy, want %s",
					ErrDigest, dest, short(f.SHA256), f.Size, short(snap[p].SHA256))})
			}
		}
	}
	if len(st.Failures) > 0 {
		sortFailures(st.Failures)
		return st, fmt.Errorf("%w: %d of %d files failed: the manifest at %s is unchanged (run again to finish)",
			ErrIncomplete, len(st.Failures), len(pl.Copy)+len(pl.Delete)+len(bad), dest)
	}

	// 6. Commit: durable writes, then the manifest, then no journal.
	if err := dest.Flush(ctx); err != nil {
		return st, fmt.Errorf("backup: %w", err)
	}
	m := &Manifest{Bucket: cfg.Bucket, Snapshot: snapInfo.Name, SnapshotCreated: snapInfo.Created,
		SnapshotIndex: snapInfo.Index, Source: cfg.Source.BaseURL(), Completed: now().UTC(), Files: snap}
	data, err := EncodeManifest(m)
	if err != nil {
		return st, fmt.Errorf("backup: encode the manifest: %w", err)
	}
	if err := dest.WriteMeta(ctx, ManifestName, data); err != nil {
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

// readState reads a location's manifest and journal (nil when absent),
// and the manifest's SHA-256.
func readState(ctx context.Context, l Location) (*Manifest, *Journal, string, error) {
	var m *Manifest
	var sum string
	data, err := l.ReadMeta(ctx, ManifestName)
	switch {
	case errors.Is(err, ErrNoMeta):
	case err != nil:
		return nil, nil, "", err
	default:
		if m, err = DecodeManifest(data); err != nil {
			return nil, nil, "", fmt.Errorf("%s/%s/%s: %w (move it away to start over)", l, MetaDir, ManifestName, err)
		}
		sum = hex.EncodeToString(sha256Raw(data))
	}
	var j *Journal
	data, err = l.ReadMeta(ctx, JournalName)
	switch {
	case errors.Is(err, ErrNoMeta):
	case err != nil:
		return nil, nil, "", err
	default:
		if j, err = DecodeJournal(data); err != nil {
			return nil, nil, "", fmt.Errorf("%s/%s/%s: %w (move it away to start over)", l, MetaDir, JournalName, err)
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

// listSnapshot lists every file of a snapshot, by path. Files under the
// bucket's MetaDir or .cairn-uploads are left out (skipped); a path no
// destination could take is a failure.
func listSnapshot(ctx context.Context, c *client.Client, bucket, name string) (snap map[string]Entry, skipped int, bad []Failure, err error) {
	snap = map[string]Entry{}
	err = c.SnapshotListPages(ctx, bucket, name, "", client.ListOptions{Recursive: true, Limit: listPage}, func(page client.ListResult) error {
		for _, o := range page.Entries {
			if o.IsDir {
				continue
			}
			p := strings.Trim(o.Path, "/")
			top, _, _ := strings.Cut(p, "/")
			if top == MetaDir || top == ".cairn-uploads" {
				skipped++
				continue
			}
			if err := CheckPath(p); err != nil {
				bad = append(bad, Failure{Path: p, Err: err})
				continue
			}
			sha := strings.ToLower(o.SHA256)
			if !validHex(sha) {
				sha = "" // learned while copying
			}
			snap[p] = Entry{SHA256: sha, Size: o.Size, Mtime: o.ModTime, Mode: o.Mode, ContentType: o.ContentType}
		}
		return nil
	})
	if err != nil {
		return nil, 0, nil, fmt.Errorf("backup: %w", err)
	}
	return snap, skipped, bad, nil
}
