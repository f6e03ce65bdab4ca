package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/cairn-fs/cairn/client"
	"github.com/cairn-fs/cairn/internal/workpool"
)

// Progress counts a run's work as it goes. Its fields are atomic: read
// them from another goroutine (a progress bar) while the run goes on.
type Progress struct {
	// TotalFiles and TotalBytes are the work planned (set once the plan
	// is known; 0 before).
	TotalFiles, TotalBytes atomic.Int64
	// Files and Bytes are the work done: files copied (or failed), bytes
	// read from the source so far.
	Files, Bytes atomic.Int64
}

func (p *Progress) addBytes(n int) { p.Bytes.Add(int64(n)) }

// Failure is one file a run could not copy (or remove).
type Failure struct {
	Path string
	Err  error
}

// source is what files are copied from: a snapshot, or a backup being
// restored.
type source interface {
	// open reads the file at p; digest is its SHA-256 when the answer
	// says it ("" otherwise).
	open(ctx context.Context, p string) (rc io.ReadCloser, digest string, err error)
}

// snapSource reads a snapshot over HTTP (/_snapshots/BUCKET/NAME/PATH).
type snapSource struct {
	c            *client.Client
	bucket, name string
}

func (s snapSource) open(ctx context.Context, p string) (io.ReadCloser, string, error) {
	rc, info, err := s.c.SnapshotGet(ctx, s.bucket, s.name, p)
	if err != nil {
		return nil, "", err
	}
	return rc, info.SHA256, nil
}

// locSource reads a location (a backup, for a restore).
type locSource struct{ l Location }

func (s locSource) open(ctx context.Context, p string) (io.ReadCloser, string, error) {
	rc, err := s.l.Open(ctx, p)
	return rc, "", err
}

// copier copies tasks from src to dst, jobs files at a time, checking
// each file's SHA-256 while it is read (verifier). Files of up to
// client.BatchFileBytes are read whole and handed to dst.PutSmall in
// batches of dst.Batch() (gathered by one goroutine, stored by a few);
// larger ones are streamed to dst.PutStream.
type copier struct {
	src  source
	dst  Location
	jobs int
	prog *Progress

	// lists: each file stored goes into keyCopied; the digest learned of
	// a file whose entry had none goes into its entry in learnSpace.
	lists      *lists
	learnSpace byte

	mu       sync.Mutex
	failures []Failure
	copied   int // files stored
	bytes    int64
	local    int   // of copied, copied from the destination itself
	err      error // a failure of the lists
}

func (c *copier) record(p string, size int64, local bool, err error) {
	c.prog.Files.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.failures = append(c.failures, Failure{Path: p, Err: err})
		return
	}
	c.copied++
	c.bytes += size
	if local {
		c.local++
	}
	if err := c.lists.set(keyCopied, p, nil); err != nil && c.err == nil {
		c.err = err
	}
}

func (c *copier) learn(p, digest string) {
	e, ok, err := c.lists.entry(c.learnSpace, p)
	if err == nil && ok {
		e.SHA256 = digest
		err = c.lists.set(c.learnSpace, p, encodeEntry(e, ""))
	}
	if err != nil {
		c.mu.Lock()
		if c.err == nil {
			c.err = err
		}
		c.mu.Unlock()
	}
}

// run copies the files of space (Entries, with the path to copy from)
// and returns when every started copy has an outcome; it starts none
// once ctx is done. Its error is one of the lists'.
func (c *copier) run(ctx context.Context, space byte) error {
	bfiles, bbytes := c.dst.Batch()
	var batchCh chan File
	var batcherDone chan struct{}
	if bfiles > 1 {
		batchCh = make(chan File)
		upCh := make(chan []File)
		batcherDone = make(chan struct{})
		var up sync.WaitGroup
		for range max(1, min(4, c.jobs/4)) {
			up.Go(func() {
				for b := range upCh {
					errs := c.dst.PutSmall(ctx, b)
					for i, f := range b {
						c.record(f.Path, f.Entry.Size, false, errs[i])
					}
				}
			})
		}
		go func() {
			defer close(batcherDone)
			var cur []File
			var size int64
			for f := range batchCh {
				if len(cur) > 0 && (len(cur) >= bfiles || size+int64(len(f.Data)) > bbytes) {
					upCh <- cur
					cur, size = nil, 0
				}
				cur = append(cur, f)
				size += int64(len(f.Data))
			}
			if len(cur) > 0 {
				upCh <- cur
			}
			close(upCh)
			up.Wait()
		}()
	}
	err := workpool.Run(ctx, c.jobs, func(work chan<- func()) error {
		return c.lists.eachEntry(space, func(p string, e Entry, from string) error {
			t := Task{Path: p, Entry: e, From: from}
			return workpool.Send(ctx, work, func() { c.one(ctx, t, batchCh) })
		})
	})
	if batchCh != nil {
		close(batchCh)
		<-batcherDone
	}
	if err == nil {
		err = c.err
	}
	return err
}

// one copies one task: from the destination itself when t.From is set
// (falling back to the source if that fails), else from the source.
func (c *copier) one(ctx context.Context, t Task, batchCh chan<- File) {
	if ctx.Err() != nil {
		return
	}
	if t.From != "" {
		rc, err := c.dst.Open(ctx, t.From)
		if err == nil {
			v := newVerifier(rc, t.Entry.SHA256, t.Entry.Size)
			err = c.dst.PutStream(ctx, t.Path, t.Entry, v)
			rc.Close()
			if err == nil && !v.done {
				err = errors.New("the destination did not read the whole content")
			}
			if err == nil {
				c.record(t.Path, t.Entry.Size, true, nil)
				return
			}
		}
		if ctx.Err() != nil {
			c.record(t.Path, t.Entry.Size, false, ctx.Err())
			return
		}
		// The copy at the destination is not what it should be: fetch.
	}
	e := t.Entry
	rc, digest, err := c.src.open(ctx, t.Path)
	if err != nil {
		c.record(t.Path, e.Size, false, err)
		return
	}
	defer rc.Close()
	want := e.SHA256
	if want == "" {
		want = digest
	}
	if e.Size <= client.BatchFileBytes {
		data, sum, err := readVerified(rc, want, e.Size, c.prog.addBytes)
		rc.Close() // before waiting for a batch: the connection goes back to the pool
		if err != nil {
			c.record(t.Path, e.Size, false, fmt.Errorf("read %s: %w", t.Path, err))
			return
		}
		if e.SHA256 == "" {
			e.SHA256 = sum
			c.learn(t.Path, sum)
		}
		f := File{Path: t.Path, Entry: e, Data: data}
		if batchCh != nil {
			batchCh <- f
			return
		}
		c.record(t.Path, e.Size, false, c.dst.PutSmall(ctx, []File{f})[0])
		return
	}
	e.SHA256 = want
	v := newVerifier(rc, want, e.Size)
	v.onRead = c.prog.addBytes
	err = c.dst.PutStream(ctx, t.Path, e, v)
	if err == nil && !v.done {
		err = errors.New("the destination did not read the whole content")
	}
	if err == nil && t.Entry.SHA256 == "" {
		c.learn(t.Path, v.Sum())
	}
	c.record(t.Path, e.Size, false, err)
}

// sortFailures orders failures by path.
func sortFailures(f []Failure) {
	sort.Slice(f, func(i, j int) bool { return f[i].Path < f[j].Path })
}
