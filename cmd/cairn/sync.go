package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cairn-fs/cairn/client"
	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

func newSyncCmd() *cobra.Command {
	var (
		opts       client.SyncOptions
		noProgress bool
		verbose    bool
	)
	cmd := &cobra.Command{
		Use:   "sync LOCAL_DIR BUCKET[/PREFIX]",
		Short: "Upload new and changed files of a local tree (rsync-like, one way)",
		Long: `Sync walks LOCAL_DIR, lists BUCKET/PREFIX recursively (one paginated
listing), and uploads the files that are new or changed, --jobs at a time.

A file is unchanged when its size equals the remote size and its
modification time falls in the same whole second as the remote one (which
sync itself set with X-Cairn-Mtime on upload); with --checksum, when its
SHA-256 equals the remote one instead. Files of up to 4 MiB are sent in
bulk uploads (tar archives, POST ?extract=tar), several files per request;
--no-batch sends one PUT per file. Symlinks below LOCAL_DIR are skipped
with a warning. --delete removes remote files absent locally, then the
remote directories this empties.`,
		Args: cobra.ExactArgs(2),
	}
	cf := addClientFlags(cmd)
	fl := cmd.Flags()
	fl.BoolVar(&opts.Delete, "delete", false, "delete remote files absent locally (and the directories this empties)")
	fl.IntVarP(&opts.Jobs, "jobs", "j", client.DefaultSyncJobs, "files uploaded in parallel")
	fl.BoolVarP(&opts.Checksum, "checksum", "c", false, "compare SHA-256 instead of modification times")
	fl.BoolVarP(&opts.DryRun, "dry-run", "n", false, "show what would change, change nothing")
	fl.BoolVar(&opts.NoBatch, "no-batch", false, "upload every file with its own PUT (by default files of up to 4 MiB go in bulk uploads: tar archives of up to 512 files / 8 MiB)")
	fl.BoolVar(&noProgress, "no-progress", false, "no progress bar (it is off anyway when stderr is not a terminal)")
	fl.BoolVarP(&verbose, "verbose", "v", false, "print every upload and deletion")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		bucket, prefix, err := parseRemote(args[1])
		if err != nil {
			return err
		}
		if opts.Jobs < 1 {
			return fmt.Errorf("--jobs must be at least 1")
		}
		opts.LocalDir, opts.Bucket, opts.Prefix = args[0], bucket, prefix
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()

		stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
		pr := &syncPrinter{out: stdout, errw: stderr, verbose: verbose || opts.DryRun,
			bar: !noProgress && writerIsTerminal(stderr)}
		opts.OnPlan, opts.OnEvent, opts.OnWarning = pr.plan, pr.event, pr.warning

		st, err := client.Sync(ctx, cf.client(), opts)
		pr.finish()
		sort.Slice(st.Failures, func(i, j int) bool { return st.Failures[i].Path < st.Failures[j].Path })
		for _, f := range st.Failures {
			fmt.Fprintf(stderr, "failed: %s %s: %v\n", f.Op, f.Path, f.Err)
		}
		fmt.Fprintln(stdout, syncSummary(st))
		switch {
		case errors.Is(err, client.ErrSyncFailed):
			return fmt.Errorf("sync incomplete: %d failed (listed above)", st.Failed)
		case err != nil:
			return err
		}
		return nil
	}
	return cmd
}

// syncSummary is the final line of a sync.
func syncSummary(st client.SyncStats) string {
	secs := st.Elapsed.Seconds()
	mb := float64(st.UploadedBytes) / 1e6
	var fps, mbps float64
	if secs > 0 {
		fps, mbps = float64(st.Uploaded)/secs, mb/secs
	}
	s := fmt.Sprintf("uploaded %d files (%.1f MB), skipped %d unchanged, deleted %d, failed %d in %.1f s (%.0f files/s, %.1f MB/s)",
		st.Uploaded, mb, st.Skipped, st.Deleted, st.Failed, secs, fps, mbps)
	if st.DryRun {
		s = "dry run, nothing changed: " + s
	}
	return s
}

// writerIsTerminal reports whether w is a character device (a terminal).
func writerIsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// syncPrinter shows a sync's progress: an mpb bar on a terminal, lines for
// dry runs and --verbose, warnings on stderr. Its callbacks are called
// concurrently by Sync's workers.
type syncPrinter struct {
	out, errw io.Writer
	verbose   bool
	bar       bool

	mu       sync.Mutex // serialises writes to out/errw
	progress *mpb.Progress
	b        *mpb.Bar
	bytes    atomic.Int64
	start    time.Time
}

func (p *syncPrinter) plan(pl client.SyncPlan) {
	if !p.bar || pl.Candidates == 0 {
		return
	}
	p.start = time.Now()
	p.progress = mpb.New(mpb.WithOutput(p.errw), mpb.WithWidth(40))
	p.b = p.progress.AddBar(int64(pl.Candidates),
		mpb.PrependDecorators(
			decor.Name("sync "),
			decor.CountersNoUnit("%d/%d files"),
		),
		mpb.AppendDecorators(
			decor.AverageSpeed(0, "%.0f files/s"),
			decor.Any(func(decor.Statistics) string {
				secs := time.Since(p.start).Seconds()
				if secs <= 0 {
					return ""
				}
				return fmt.Sprintf("  %.1f MB/s", float64(p.bytes.Load())/1e6/secs)
			}),
		),
	)
}

func (p *syncPrinter) event(ev client.SyncEvent) {
	if p.b != nil && (ev.Op == client.SyncUpload || ev.Op == client.SyncSkip) {
		if ev.Op == client.SyncUpload && ev.Err == nil {
			p.bytes.Add(ev.Size)
		}
		p.b.Increment()
	}
	if !p.verbose || ev.Err != nil || ev.Op == client.SyncSkip {
		return
	}
	line := fmt.Sprintf("%s %s", ev.Op, ev.Path)
	if ev.DryRun {
		line = "would " + line
	}
	p.println(p.out, line)
}

func (p *syncPrinter) warning(localPath, msg string) {
	p.println(p.errw, fmt.Sprintf("warning: %s: %s", localPath, msg))
}

// println writes a line, above the bar when one is shown on the same stream.
func (p *syncPrinter) println(w io.Writer, line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.progress != nil && (w == p.errw || writerIsTerminal(w)) {
		_, _ = fmt.Fprintln(p.progress, line)
		return
	}
	_, _ = fmt.Fprintln(w, line)
}

// finish stops the bar (aborting it if the sync ended early) and waits for
// its last render.
func (p *syncPrinter) finish() {
	if p.progress == nil {
		return
	}
	if !p.b.Completed() {
		p.b.Abort(false)
	}
	p.progress.Wait()
}
