package backup

import (
	"context"
	"fmt"
	"path"
	"sort"
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
	// Manifest describes the backup restored (its Files included).
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
	m, jr, _, err := readState(ctx, cfg.From)
	if err != nil {
		return st, fmt.Errorf("restore: %w", err)
	}
	if m == nil {
		return st, fmt.Errorf("restore: %w: %s is not a backup: it has no %s/%s (a first backup that did not finish leaves none)",
			ErrNoMeta, cfg.From, MetaDir, ManifestName)
	}
	st.Bucket, st.Snapshot, st.Files = m.Bucket, m.Snapshot, len(m.Files)
	if jr != nil {
		warn("a backup into %s did not finish (%d paths pending): restoring the last completed one, snapshot %s of %s; "+
			"a file the unfinished run changed fails its check", cfg.From, len(jr.Paths), m.Snapshot, m.Bucket)
	}
	target, err := NewCairn(cfg.To, cfg.Bucket, cfg.Prefix, "")
	if err != nil {
		return st, fmt.Errorf("restore: %w", err)
	}
	inv, err := target.Inventory(ctx)
	if err != nil {
		return st, fmt.Errorf("restore: %w", err)
	}

	// Sort the backup's files against the target.
	invDirs := map[string]bool{}
	for p := range inv {
		for d := path.Dir(p); d != "." && !invDirs[d]; d = path.Dir(d) {
			invDirs[d] = true
		}
	}
	var tasks []Task
	var differ, clash []string
	for p, e := range m.Files {
		f, present := inv[p]
		switch {
		case invDirs[p]:
			clash = append(clash, p+" (a directory at the target)")
			continue
		case fileAbove(p, inv) != "":
			clash = append(clash, p+" (under the file "+fileAbove(p, inv)+" at the target)")
			continue
		case !present:
		case f.SHA256 == e.SHA256 && f.Size == e.Size:
			st.Identical++
			continue
		default:
			differ = append(differ, p)
			if !cfg.Force {
				continue
			}
		}
		tasks = append(tasks, Task{Path: p, Entry: e})
	}
	sort.Strings(differ)
	sort.Strings(clash)
	tp := cfg.Bucket
	if pre := target.(*cairnLocation).prefix; pre != "" {
		tp += "/" + pre
	}
	if len(clash) > 0 || (len(differ) > 0 && !cfg.Force) {
		st.Conflicts = append(clash, differ...)
		msg := ""
		if len(differ) > 0 && !cfg.Force {
			msg = fmt.Sprintf("%d files at %s differ from the backup and would be overwritten (--force replaces them)", len(differ), tp)
		}
		if len(clash) > 0 {
			if msg != "" {
				msg += "; "
			}
			msg += fmt.Sprintf("%d files of the backup clash with a file or directory at %s (move those away, or restore under another prefix)", len(clash), tp)
		}
		if len(st.Conflicts) > 1000 {
			st.Conflicts = st.Conflicts[:1000]
		}
		return st, refused("restore refused, nothing written: %s: %s", msg, firstN(st.Conflicts, 5))
	}
	sort.Slice(tasks, func(i, j int) bool { return tasks[i].Path < tasks[j].Path })
	plan := RestorePlan{Manifest: m, Copy: len(tasks), Identical: st.Identical}
	if cfg.Force {
		plan.Replace = len(differ)
	}
	for _, t := range tasks {
		plan.CopyBytes += t.Entry.Size
	}
	prog.TotalFiles.Store(int64(len(tasks)))
	prog.TotalBytes.Store(plan.CopyBytes)
	if cfg.OnPlan != nil {
		cfg.OnPlan(plan)
	}

	cp := &copier{src: locSource{l: cfg.From}, dst: target, jobs: jobs, prog: prog}
	cp.run(ctx, tasks)
	st.Restored, st.RestoredBytes = len(cp.copied), cp.bytes
	st.Failures = cp.failures
	if err := ctx.Err(); err != nil {
		return st, fmt.Errorf("restore interrupted: %w (run it again: identical files are skipped)", err)
	}
	if len(cp.copied) > 0 {
		after, err := target.Inventory(ctx)
		if err != nil {
			return st, fmt.Errorf("restore: check the restored files: %w", err)
		}
		for _, p := range cp.copied {
			if f := after[p]; f.SHA256 != m.Files[p].SHA256 || f.Size != m.Files[p].Size {
				st.Failures = append(st.Failures, Failure{Path: p, Err: fmt.Errorf("%w: the target holds %s (%d bytes) after the copy, want %s",
					ErrDigest, short(f.SHA256), f.Size, short(m.Files[p].SHA256))})
			}
		}
	}
	if cfg.Force {
		replaced := map[string]bool{}
		for _, p := range differ {
			replaced[p] = true
		}
		for _, p := range cp.copied {
			if replaced[p] {
				st.Replaced++
			}
		}
	}
	if len(st.Failures) > 0 {
		sortFailures(st.Failures)
		return st, fmt.Errorf("%w: %d of %d files could not be restored", ErrIncomplete, len(st.Failures), len(tasks))
	}
	return st, nil
}

// fileAbove returns the first proper ancestor of p that is a file in
// inv ("" for none).
func fileAbove(p string, inv map[string]Found) string {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if _, ok := inv[d]; ok {
			return d
		}
	}
	return ""
}

// firstN lists the first n items, and how many more.
func firstN(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:n], ", ") + fmt.Sprintf(" and %d more", len(items)-n)
}
