package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cairn-fs/cairn/internal/backup"
	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// remoteFlags are the flags of the other side of a backup or restore: a
// cairn:// cluster's key, an S3 endpoint and region.
type remoteFlags struct {
	key, keyEnv string
	keyEnvAlt   string
	s3Endpoint  string
	s3Region    string
}

func addRemoteFlags(cmd *cobra.Command, keyFlag, keyEnv, keyEnvAlt, what string) *remoteFlags {
	f := &remoteFlags{keyEnv: keyEnv, keyEnvAlt: keyEnvAlt}
	def := "$" + keyEnv
	if keyEnvAlt != "" {
		def += ", else $" + keyEnvAlt
	}
	cmd.Flags().StringVar(&f.key, keyFlag, "", "admin key of the "+what+" cluster of a cairn:// URL (default "+def+")")
	cmd.Flags().StringVar(&f.s3Endpoint, "s3-endpoint", "", "S3 endpoint URL of an s3:// URL, addressed path-style (default $AWS_ENDPOINT_URL_S3, else $AWS_ENDPOINT_URL, else AWS); credentials from $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY")
	cmd.Flags().StringVar(&f.s3Region, "s3-region", "", "S3 region (default $AWS_REGION, else $AWS_DEFAULT_REGION, else us-east-1)")
	return f
}

func (f *remoteFlags) options(create bool) backup.LocationOptions {
	key := f.key
	if key == "" {
		key = os.Getenv(f.keyEnv)
	}
	if key == "" && f.keyEnvAlt != "" {
		key = os.Getenv(f.keyEnvAlt)
	}
	s3 := backup.S3OptionsFromEnv()
	if f.s3Endpoint != "" {
		s3.Endpoint = f.s3Endpoint
	}
	if f.s3Region != "" {
		s3.Region = f.s3Region
	}
	return backup.LocationOptions{CairnKey: key, S3: s3, UserAgent: "cairn-cli", Create: create}
}

// backupCmds are cairn backup and cairn restore.
func backupCmds() []*cobra.Command { return []*cobra.Command{newBackupCmd(), newRestoreCmd()} }

func newBackupCmd() *cobra.Command {
	var (
		snapshot     string
		keepSnapshot bool
		verify       bool
		jobs         int
		noProgress   bool
	)
	cmd := &cobra.Command{
		Use:   "backup BUCKET DEST",
		Short: "Copy a snapshot of a bucket off the cluster: to a directory, another Cairn cluster or S3 (incremental)",
		Long: `Backup takes a snapshot of BUCKET (or copies --snapshot NAME), copies its
files to DEST reading them through /_snapshots/ (writes go on meanwhile and
the copy is of one moment), then deletes the snapshot it took unless
--keep-snapshot. DEST is one of:

  /backups/web, file:///backups/web    a local directory (made if needed)
  cairn://HOST:PORT/BUCKET[/PREFIX]    another Cairn cluster (cairns:// for
                                       HTTPS), with its admin key: --dest-key
                                       or $CAIRN_DEST_KEY; the bucket must exist
  s3://BUCKET[/PREFIX]                 an S3 bucket: --s3-endpoint, and the
                                       credentials in $AWS_ACCESS_KEY_ID,
                                       $AWS_SECRET_ACCESS_KEY

Files are stored by path (a directory backup is a plain tree) with a
manifest, DEST/.cairn-backup/manifest.json (path -> SHA-256, size, mtime,
mode). A second run copies only the files whose content DEST does not hold
(by SHA-256) and removes the files the snapshot no longer has: DEST mirrors
the last snapshot copied. Files DEST held before the first backup are left
alone, and a DEST that holds files but no manifest is refused.

Every file is checked against its SHA-256 while it is copied. The manifest
is written last, atomically, once every file is copied: an interrupted
backup leaves the previous manifest and DEST/.cairn-backup/pending.json,
and the next run resumes (it checks the files the interrupted run touched).
A run trusts the manifest for the other files; --verify checks them all at
DEST (a directory's are read and hashed) and copies again what differs.
docs/operations.md, "Backups".`,
		Args: cobra.ExactArgs(2),
	}
	cf := addClientFlags(cmd)
	rf := addRemoteFlags(cmd, "dest-key", "CAIRN_DEST_KEY", "", "destination")
	fl := cmd.Flags()
	fl.StringVar(&snapshot, "snapshot", "", "copy this existing snapshot (kept) instead of taking one")
	fl.BoolVar(&keepSnapshot, "keep-snapshot", false, "keep the snapshot the backup takes")
	fl.BoolVar(&verify, "verify", false, "check every file at DEST (a directory's are read and hashed) instead of trusting the manifest; copy again what differs")
	fl.IntVarP(&jobs, "jobs", "j", backup.DefaultJobs, "files copied at once")
	fl.BoolVar(&noProgress, "no-progress", false, "no progress on stderr")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if jobs < 1 {
			return errors.New("--jobs must be at least 1")
		}
		bucket := strings.Trim(args[0], "/")
		if bucket == "" || strings.Contains(bucket, "/") {
			return fmt.Errorf("%q: expected a bucket name (a backup copies a whole bucket)", args[0])
		}
		dest, err := backup.ParseLocation(args[1], rf.options(true))
		if err != nil {
			return fmt.Errorf("destination: %w (expected %s)", err, backup.Syntax)
		}
		defer dest.Close()
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
		prog := &backup.Progress{}
		pr := newCopyProgress(stderr, "backup", prog, !noProgress)
		planned := false
		st, err := backup.Backup(ctx, backup.Config{
			Source: cf.client(), Bucket: bucket, Snapshot: snapshot, KeepSnapshot: keepSnapshot, Verify: verify,
			Dest: dest, Jobs: jobs, Progress: prog,
			OnPlan:    func(backup.Summary) { planned = true; pr.start() },
			OnWarning: pr.warning,
		})
		pr.stop()
		printFailures(stderr, st.Failures)
		if planned {
			fmt.Fprintln(stdout, backupSummary(st, dest.String()))
		}
		return err
	}
	return cmd
}

// backupSummary is the last line of a backup.
func backupSummary(st backup.Stats, dest string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "backup of %s (snapshot %s) to %s: copied %d files (%s)", st.Bucket, st.Snapshot, dest,
		st.Copied, mbytes(st.CopiedBytes))
	if st.LocalCopies > 0 {
		fmt.Fprintf(&b, ", %d of them from identical files already there", st.LocalCopies)
	}
	fmt.Fprintf(&b, ", %d unchanged", st.Unchanged)
	if st.Checked > 0 {
		fmt.Fprintf(&b, " (%d checked at the destination)", st.Checked)
	}
	fmt.Fprintf(&b, ", deleted %d, failed %d", st.Deleted, len(st.Failures))
	if st.Foreign > 0 {
		fmt.Fprintf(&b, ", left alone %d files that are not the backup's", st.Foreign)
	}
	fmt.Fprintf(&b, "; %d files, %s in the backup; %s", st.Files, mbytes(st.Bytes), rate(st.CopiedBytes, st.Elapsed))
	switch {
	case st.SnapshotTaken && !st.SnapshotKept:
		b.WriteString("; snapshot deleted")
	case st.SnapshotTaken:
		b.WriteString("; snapshot kept")
	}
	if !st.ManifestWritten {
		b.WriteString("; NOT COMPLETE: the manifest is unchanged")
	}
	return b.String()
}

func newRestoreCmd() *cobra.Command {
	var (
		force      bool
		jobs       int
		noProgress bool
	)
	cmd := &cobra.Command{
		Use:   "restore SRC BUCKET[/PREFIX]",
		Short: "Copy a backup (cairn backup) back into a bucket, checking every file",
		Long: `Restore reads the backup at SRC (a directory, cairn://HOST:PORT/BUCKET[/PREFIX]
or s3://BUCKET[/PREFIX], as for cairn backup) and writes its files into
BUCKET/PREFIX of the cluster --server names, with their modes and mtimes
(small files in bulk tar uploads, as cairn sync does). Every file is
checked against the SHA-256 in the backup's manifest while it is copied,
and in the bucket's listing afterwards. The bucket must exist.

Files already in the bucket with the same content are skipped. A file
with different content is NEVER overwritten without --force: restore
then refuses before writing anything and lists those files. A file or
directory in the way of the tree (a file where the backup has a
directory, or the reverse) refuses it even with --force. Nothing in the
bucket is deleted. docs/operations.md, "Backups".`,
		Args: cobra.ExactArgs(2),
	}
	cf := addClientFlags(cmd)
	rf := addRemoteFlags(cmd, "src-key", "CAIRN_SRC_KEY", "CAIRN_DEST_KEY", "backup's")
	fl := cmd.Flags()
	fl.BoolVar(&force, "force", false, "overwrite files in the bucket whose content differs from the backup's")
	fl.IntVarP(&jobs, "jobs", "j", backup.DefaultJobs, "files copied at once")
	fl.BoolVar(&noProgress, "no-progress", false, "no progress on stderr")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if jobs < 1 {
			return errors.New("--jobs must be at least 1")
		}
		bucket, prefix, err := parseRemote(args[1])
		if err != nil {
			return err
		}
		src, err := backup.ParseLocation(args[0], rf.options(false))
		if err != nil {
			return fmt.Errorf("backup to restore: %w (expected %s)", err, backup.Syntax)
		}
		defer src.Close()
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
		prog := &backup.Progress{}
		pr := newCopyProgress(stderr, "restore", prog, !noProgress)
		planned := false
		st, err := backup.Restore(ctx, backup.RestoreConfig{
			From: src, To: cf.client(), Bucket: bucket, Prefix: prefix, Force: force, Jobs: jobs, Progress: prog,
			OnPlan:    func(backup.RestorePlan) { planned = true; pr.start() },
			OnWarning: pr.warning,
		})
		pr.stop()
		for _, c := range st.Conflicts {
			fmt.Fprintf(stderr, "in the way: %s\n", c)
		}
		printFailures(stderr, st.Failures)
		if planned {
			target := strings.TrimRight(bucket+"/"+strings.Trim(prefix, "/"), "/")
			line := fmt.Sprintf("restored %d files (%s) of the backup of %s (snapshot %s) into %s, %d identical skipped",
				st.Restored, mbytes(st.RestoredBytes), st.Bucket, st.Snapshot, target, st.Identical)
			if st.Replaced > 0 {
				line += fmt.Sprintf(", %d replaced (--force)", st.Replaced)
			}
			fmt.Fprintf(stdout, "%s, failed %d; %s\n", line, len(st.Failures), rate(st.RestoredBytes, st.Elapsed))
		}
		return err
	}
	return cmd
}

func printFailures(w io.Writer, fs []backup.Failure) {
	const most = 50
	for i, f := range fs {
		if i == most {
			fmt.Fprintf(w, "... and %d more failures\n", len(fs)-most)
			break
		}
		fmt.Fprintf(w, "failed: %s: %v\n", f.Path, f.Err)
	}
}

func mbytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

func rate(n int64, d time.Duration) string {
	s := d.Seconds()
	if s <= 0 {
		return "in 0.0 s"
	}
	return fmt.Sprintf("in %.1f s (%.1f MB/s)", s, float64(n)/1e6/s)
}

// copyProgress shows a backup's or restore's progress on stderr from its
// backup.Progress: a bar on a terminal, else a line every 10 s (a log
// or cron mail stays short). Warnings go above the bar.
type copyProgress struct {
	w     io.Writer
	what  string
	p     *backup.Progress
	show  bool
	mu    sync.Mutex
	bar   *mpb.Bar
	mp    *mpb.Progress
	done  chan struct{}
	ended chan struct{}
	t0    time.Time
}

func newCopyProgress(w io.Writer, what string, p *backup.Progress, show bool) *copyProgress {
	return &copyProgress{w: w, what: what, p: p, show: show}
}

// status is the progress as text: files, bytes, rates and an estimate of
// the time left (from the share of files and bytes done).
func (c *copyProgress) status() string {
	files, total := c.p.Files.Load(), c.p.TotalFiles.Load()
	b, tb := c.p.Bytes.Load(), c.p.TotalBytes.Load()
	el := time.Since(c.t0).Seconds()
	s := fmt.Sprintf("%d/%d files, %s/%s", files, total, human(b), human(tb))
	if el < 0.5 || (files == 0 && b == 0) {
		return s
	}
	s += fmt.Sprintf(", %.0f files/s, %s/s", float64(files)/el, human(int64(float64(b)/el)))
	frac := float64(files) / float64(max(total, 1))
	if tb > 0 {
		frac = (frac + float64(b)/float64(tb)) / 2
	}
	if frac > 0 && frac < 1 {
		left := time.Duration(el * (1/frac - 1) * float64(time.Second))
		s += fmt.Sprintf(", about %s left", left.Round(time.Second))
	}
	return s
}

// human formats a byte count with a decimal unit.
func human(n int64) string {
	switch {
	case n < 1e3:
		return fmt.Sprintf("%d B", n)
	case n < 1e6:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	case n < 1e9:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.2f GB", float64(n)/1e9)
}

// start begins showing progress (once the plan is known).
func (c *copyProgress) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.show || c.done != nil || c.p.TotalFiles.Load() == 0 {
		return
	}
	c.t0 = time.Now()
	c.done, c.ended = make(chan struct{}), make(chan struct{})
	every := 10 * time.Second
	if writerIsTerminal(c.w) {
		every = 200 * time.Millisecond
		c.mp = mpb.New(mpb.WithOutput(c.w), mpb.WithWidth(30))
		c.bar = c.mp.AddBar(max(c.p.TotalBytes.Load(), 1),
			mpb.PrependDecorators(decor.Name(c.what+" ")),
			mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { return "  " + c.status() })),
		)
	}
	go func() {
		defer close(c.ended)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-c.done:
				return
			case <-tick.C:
				if c.bar != nil {
					c.bar.SetCurrent(min(c.p.Bytes.Load(), c.p.TotalBytes.Load()))
				} else {
					c.mu.Lock()
					fmt.Fprintf(c.w, "%s: %s\n", c.what, c.status())
					c.mu.Unlock()
				}
			}
		}
	}()
}

// stop ends the display and waits for its last render.
func (c *copyProgress) stop() {
	c.mu.Lock()
	done := c.done
	c.mu.Unlock()
	if done == nil {
		return
	}
	close(done)
	<-c.ended
	if c.bar != nil {
		if c.p.Bytes.Load() >= c.p.TotalBytes.Load() {
			c.bar.SetCurrent(max(c.p.TotalBytes.Load(), 1))
		} else {
			c.bar.Abort(false)
		}
		c.mp.Wait()
	}
}

func (c *copyProgress) warning(msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mp != nil {
		fmt.Fprintln(c.mp, "warning: "+msg)
		return
	}
	fmt.Fprintln(c.w, "warning: "+msg)
}
