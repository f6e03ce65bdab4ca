package backup

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/client"
)

// RestoreConfig configures Restore.
type RestoreConfig struct {
	// From is the backup (ParseLocation).
	From Location
	// To talks to the cluster to restore into, with its admin key; Bucket
	// must exist; the files go under Prefix ("": the bucket's root).
	To     *client.Client
	Bucket string
	Prefix string
	// Force replaces files at the target whose content differs from the
	// backup's. Without it such a file refuses the whole restore before
	// anything is written.
	Force bool
	// Jobs is the number of files copied at once; 0 means DefaultJobs.
	Jobs int
	// Progress, if set, is updated as the restore goes.
	Progress *Progress
	// OnPlan, if set, is called once, before the first write.
	OnPlan func(RestorePlan)
	// OnWarning, if set, is called with passing conditions.
	OnWarning func(string)
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// RestorePlan is what a restore will do.
type RestorePlan struct {
	// Manifest describes the backup restored.
	Manifest *Manifest
	// Copy files of CopyBytes will be written; Replace of them replace a
	// different file (Force); Identical are at the target already.
	Copy      int
	CopyBytes int64
	Replace   int
	Identical int
}

// RestoreStats sums up a Restore; valid whatever it returns.
type RestoreStats struct {
	// Bucket and Snapshot name the backup's origin.
	Bucket, Snapshot string
	// Files are the backup's files.
	Files int
	// Restored files of RestoredBytes were written; Replaced of them over
	// a different file (Force).
	Restored      int
	RestoredBytes int64
	Replaced      int
	// Identical files were at the target already.
	Identical int
	// Conflicts lists the target's paths in the way (different files
	// without Force; a file where the backup has a directory, or the
	// reverse), up to 1000.
	Conflicts []string
	// Failures lists the files that could not be restored.
	Failures []Failure
	Elapsed  time.Duration
}

// Restore copies the backup at cfg.From into cfg.Bucket/cfg.Prefix of
// the cluster cfg.To talks to. It reads the backup's manifest (no
// manifest: not a backup, ErrNoMeta), lists the target (with each file's
// SHA-256), and sorts the backup's files: absent at the target (copied),
// identical (skipped), different (a conflict: with Force, copied over;
// without, nothing at all is written and the error, matching ErrRefused,
// names them), or in the way of a directory or under a file (a conflict
// Force does not resolve). Every file read from the backup is checked
// against the manifest's SHA-256 before its last byte is written (a file
// an unfinished later backup changed fails), and every file written is
// checked in the target's listing afterwards. Restore never deletes
// anything at the target. Failures of single files do not stop the
// others (ErrIncomplete).
func Restore(ctx context.Context, cfg RestoreConfig) (st RestoreStats, err error) {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	start := now()
	defer func() { st.Elapsed = now().Sub(start) }()
	if cfg.From == nil || cfg.To == nil || cfg.Bucket == "" || strings.Contains(cfg.Bucket, "/") {
		return st, fmt.Errorf("restore: %w: a backup, a target and a bucket name are needed", client.ErrInvalidArgument)
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
	l := newLists(tempDir())
	defer l.close()
	m, jr, _, err := readState(ctx, cfg.From, l)
	if err != nil {
		return st, fmt.Errorf("restore: %w", err)
	}
	if m == nil {
		return st, fmt.Errorf("restore: %w: %s is not a backup: it has no %s/%s (a first backup that did not finish leaves none)",
			ErrNoMeta, cfg.From, MetaDir, ManifestName)
	}
	st.Bucket, st.Snapshot, st.Files = m.Bucket, m.Snapshot, m.FileCount
	if jr != nil {
		warn("a backup into %s did not finish (%d paths pending): restoring the last completed one, snapshot %s of %s; "+
			"a file the unfinished run changed fails its check", cfg.From, jr.Paths, m.Snapshot, m.Bucket)
	}
	target, err := NewCairn(cfg.To, cfg.Bucket, cfg.Prefix, "")
	if err != nil {
		return st, fmt.Errorf("restore: %w", err)
	}
	last := ""
	err = target.Inventory(ctx, func(p string, f Found) error {
		if err := l.set(keyInv, p, encodeFound(f)); err != nil {
			return err
		}
		return l.markParents(keyInvDir, p, &last)
	})
	if err != nil {
		return st, fmt.Errorf("restore: %w", err)
	}

	// Sort the backup's files against the target: conflicts are kept
	// (the first 1000 of each kind) and counted.
	var differ, clash []string
	nDiffer, nClash := 0, 0
	plan := RestorePlan{Manifest: m}
	note := func(list *[]string, n *int, s string) {
		if *n++; len(*list) < 1000 {
			*list = append(*list, s)
		}
	}
	err = l.eachEntry(keyOld, func(p string, e Entry, _ string) error {
		f, present, err := l.found(p)
		if err != nil {
			return err
		}
		if isDir, err := l.has(keyInvDir, p); err != nil {
			return err
		} else if isDir {
			note(&clash, &nClash, p+" (a directory at the target)")
			return nil
		}
		above, err := fileAbove(l, p)
		if err != nil {
			return err
		}
		switch {
		case above != "":
			note(&clash, &nClash, p+" (under the file "+above+" at the target)")
			return nil
		case !present:
		case f.SHA256 == e.SHA256 && f.Size == e.Size:
			st.Identical++
			return nil
		default:
			note(&differ, &nDiffer, p)
			if !cfg.Force {
				return nil
			}
			if err := l.set(keyDiffer, p, nil); err != nil {
				return err
			}
		}
		plan.Copy++
		plan.CopyBytes += e.Size
		return l.set(keyCopy, p, encodeEntry(e, ""))
	})
	if err != nil {
		return st, fmt.Errorf("restore: %w", err)
	}
	tp := cfg.Bucket
	if pre := target.(*cairnLocation).prefix; pre != "" {
		tp += "/" + pre
	}
	if nClash > 0 || (nDiffer > 0 && !cfg.Force) {
		st.Conflicts = append(clash, differ...)
		msg := ""
		if nDiffer > 0 && !cfg.Force {
			msg = fmt.Sprintf("%d files at %s differ from the backup and would be overwritten (--force replaces them)", nDiffer, tp)
		}
		if nClash > 0 {
			if msg != "" {
				msg += "; "
			}
			msg += fmt.Sprintf("%d files of the backup clash with a file or directory at %s (move those away, or restore under another prefix)", nClash, tp)
		}
		if len(st.Conflicts) > 1000 {
			st.Conflicts = st.Conflicts[:1000]
		}
		return st, refused("restore refused, nothing written: %s: %s", msg, firstN(st.Conflicts, 5, nClash+nDiffer))
	}
	plan.Identical = st.Identical
	if cfg.Force {
		plan.Replace = nDiffer
	}
	prog.TotalFiles.Store(int64(plan.Copy))
	prog.TotalBytes.Store(plan.CopyBytes)
	if cfg.OnPlan != nil {
		cfg.OnPlan(plan)
	}

	cp := &copier{src: locSource{l: cfg.From}, dst: target, jobs: jobs, prog: prog, lists: l, learnSpace: keyOld}
	err = cp.run(ctx, keyCopy)
	st.Restored, st.RestoredBytes = cp.copied, cp.bytes
	st.Failures = cp.failures
	if cerr := ctx.Err(); cerr != nil {
		return st, fmt.Errorf("restore interrupted: %w (run it again: identical files are skipped)", cerr)
	}
	if err != nil {
		return st, fmt.Errorf("restore: %w", err)
	}
	if cp.copied > 0 {
		failures, err := checkCopies(ctx, target, l, keyOld)
		if err != nil {
			return st, fmt.Errorf("restore: check the restored files: %w", err)
		}
		st.Failures = append(st.Failures, failures...)
	}
	if cfg.Force && nDiffer > 0 {
		err := l.each(keyDiffer, func(p string, _ []byte) error {
			if copied, err := l.has(keyCopied, p); err != nil || !copied {
				return err
			}
			st.Replaced++
			return nil
		})
		if err != nil {
			return st, fmt.Errorf("restore: %w", err)
		}
	}
	if len(st.Failures) > 0 {
		sortFailures(st.Failures)
		return st, fmt.Errorf("%w: %d of %d files could not be restored", ErrIncomplete, len(st.Failures), plan.Copy)
	}
	return st, nil
}

// fileAbove returns the first proper ancestor of p that is a file of
// the target's listing ("" for none).
func fileAbove(l *lists, p string) (string, error) {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if ok, err := l.has(keyInv, d); ok || err != nil {
			return d, err
		}
	}
	return "", nil
}

// firstN lists the first n items, and how many more of total.
func firstN(items []string, n, total int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:n], ", ") + fmt.Sprintf(" and %d more", total-n)
}
