package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
)

// tmpDir is where a directory location writes files before renaming them
// into place (same file system, so the rename is atomic).
const tmpDir = MetaDir + "/tmp"

// dirLocation is a local directory. Every access goes through an os.Root,
// so no path (nor a symlink planted at the destination) reaches outside it.
type dirLocation struct {
	name string // as given, for messages
	abs  string
	root *os.Root
	lock *os.File // the directory, flocked by a writer (OpenDir with create)

	tmpOnce sync.Once
	tmpErr  error
	seq     atomic.Uint64
}

// OpenDir opens the local directory dir as a location. With create (a
// backup's destination) it makes the directory if needed and takes an
// exclusive flock on it, so two backups never write into one directory at
// once; without it the directory must exist.
func OpenDir(dir string, create bool) (Location, error) {
	if dir == "" {
		return nil, errors.New("empty directory name")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if create {
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return nil, fmt.Errorf("backup directory: %w", err)
		}
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("backup directory: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("backup directory: %s is not a directory", dir)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("backup directory: %w", err)
	}
	d := &dirLocation{name: dir, abs: abs, root: root}
	if create {
		// The lock is on the directory itself: nothing is written into a
		// directory that the backup then refuses.
		f, err := root.Open(".")
		if err != nil {
			root.Close()
			return nil, fmt.Errorf("backup directory: %w", err)
		}
		if err := lockFile(f); err != nil {
			f.Close()
			root.Close()
			return nil, refused("backup refused: another backup is writing into %s (%v)", dir, err)
		}
		d.lock = f
	}
	return d, nil
}

func (d *dirLocation) String() string { return d.name }
func (d *dirLocation) copiesLocally() {}

func (d *dirLocation) Close() error {
	if d.lock != nil {
		d.lock.Close() // releases the flock
	}
	return d.root.Close()
}

func (d *dirLocation) Inventory(ctx context.Context, fn func(p string, f Found) error) error {
	err := fs.WalkDir(d.root.FS(), ".", func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if p == MetaDir && de.IsDir() {
			return fs.SkipDir
		}
		if !de.Type().IsRegular() || CheckPath(p) != nil {
			return nil // directories, symlinks, odd names: not ours
		}
		info, err := de.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		return fn(p, Found{Size: info.Size()})
	})
	if err != nil {
		return fmt.Errorf("list %s: %w", d.name, err)
	}
	return nil
}

func (d *dirLocation) ReadMeta(ctx context.Context, name string) (io.ReadCloser, error) {
	f, err := d.root.Open(MetaDir + "/" + name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s/%s/%s: %w", d.name, MetaDir, name, ErrNoMeta)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s/%s/%s: %w", d.name, MetaDir, name, err)
	}
	return f, nil
}

// WriteMeta writes a temporary file, syncs it, renames it over the old
// one and syncs the directory: the rename is the commit.
func (d *dirLocation) WriteMeta(ctx context.Context, name string, _ Entry, r io.Reader) error {
	if err := d.root.MkdirAll(MetaDir, 0o755); err != nil {
		return fmt.Errorf("write %s/%s: %w", d.name, MetaDir, err)
	}
	tmp := fmt.Sprintf("%s/.%s.tmp-%d-%d", MetaDir, name, os.Getpid(), d.seq.Add(1))
	f, err := d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write %s/%s/%s: %w", d.name, MetaDir, name, err)
	}
	_, err = io.Copy(f, ctxReader{ctx, r})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.root.Rename(tmp, MetaDir+"/"+name)
	}
	if err == nil {
		err = d.syncDir(MetaDir)
	}
	if err != nil {
		_ = d.root.Remove(tmp)
		return fmt.Errorf("write %s/%s/%s: %w", d.name, MetaDir, name, err)
	}
	return nil
}

func (d *dirLocation) RemoveMeta(ctx context.Context, name string) error {
	err := d.root.Remove(MetaDir + "/" + name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s/%s/%s: %w", d.name, MetaDir, name, err)
	}
	return d.syncDir(MetaDir)
}

func (d *dirLocation) syncDir(dir string) error {
	f, err := d.root.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func (d *dirLocation) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	if err := CheckPath(p); err != nil {
		return nil, err
	}
	f, err := d.root.Open(p)
	if err != nil {
		return nil, fmt.Errorf("open %s in %s: %w", p, d.name, err)
	}
	return f, nil
}

func (d *dirLocation) Holds(ctx context.Context, p string, e Entry) (bool, error) {
	f, err := d.root.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() != e.Size {
		return false, err
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false, fmt.Errorf("read %s in %s: %w", p, d.name, err)
	}
	return hex.EncodeToString(h.Sum(nil)) == e.SHA256, nil
}

func (d *dirLocation) Batch() (int, int64) { return 1, 0 }

func (d *dirLocation) PutSmall(ctx context.Context, files []File) []error {
	errs := make([]error, len(files))
	for i, f := range files {
		errs[i] = d.write(ctx, f.Path, f.Entry, &sliceReader{b: f.Data})
	}
	return errs
}

func (d *dirLocation) PutStream(ctx context.Context, p string, e Entry, r io.Reader) error {
	return d.write(ctx, p, e, r)
}

// write stores r at p: into a new file under tmpDir, with e's mode and
// mtime, renamed into place only once r ended without an error (a
// verifier fails before its last byte on a wrong content).
func (d *dirLocation) write(ctx context.Context, p string, e Entry, r io.Reader) error {
	if err := CheckPath(p); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	d.tmpOnce.Do(func() {
		// Files of an interrupted run: never renamed, so never claimed.
		if err := d.root.RemoveAll(tmpDir); err != nil {
			d.tmpErr = err
			return
		}
		d.tmpErr = d.root.MkdirAll(tmpDir, 0o755)
	})
	if d.tmpErr != nil {
		return fmt.Errorf("write into %s: %w", d.name, d.tmpErr)
	}
	tmp := tmpDir + "/" + strconv.FormatUint(d.seq.Add(1), 10)
	f, err := d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write %s in %s: %w", p, d.name, err)
	}
	_, err = io.Copy(f, ctxReader{ctx: ctx, r: r})
	if err == nil {
		err = f.Chmod(fs.FileMode(e.Mode & 0o777))
	}
	if err == nil && syncEachFile {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && !e.Mtime.IsZero() {
		err = d.root.Chtimes(tmp, e.Mtime, e.Mtime)
	}
	if err == nil {
		if dir := path.Dir(p); dir != "." {
			err = d.root.MkdirAll(dir, 0o755)
		}
	}
	if err == nil {
		err = d.root.Rename(tmp, p)
	}
	if err != nil {
		_ = d.root.Remove(tmp)
		return fmt.Errorf("write %s in %s: %w", p, d.name, err)
	}
	return nil
}

func (d *dirLocation) Remove(ctx context.Context, p string) error {
	if err := CheckPath(p); err != nil {
		return err
	}
	err := d.root.Remove(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s in %s: %w", p, d.name, err)
	}
	return nil
}

func (d *dirLocation) RemoveDirs(ctx context.Context, dirs []string) {
	for _, dir := range dirs {
		if ctx.Err() != nil {
			return
		}
		if st, err := d.root.Lstat(dir); err == nil && st.IsDir() {
			_ = d.root.Remove(dir) // fails on a directory that is not empty
		}
	}
}

func (d *dirLocation) SetMeta(ctx context.Context, p string, e Entry) (bool, error) {
	if err := d.root.Chmod(p, fs.FileMode(e.Mode&0o777)); err != nil {
		return true, fmt.Errorf("chmod %s in %s: %w", p, d.name, err)
	}
	if !e.Mtime.IsZero() {
		if err := d.root.Chtimes(p, e.Mtime, e.Mtime); err != nil {
			return true, fmt.Errorf("set the mtime of %s in %s: %w", p, d.name, err)
		}
	}
	return true, nil
}

func (d *dirLocation) Flush(ctx context.Context) error {
	f, err := d.root.Open(".")
	if err != nil {
		return err
	}
	defer f.Close()
	if err := flushFS(f); err != nil {
		return fmt.Errorf("sync %s: %w", d.name, err)
	}
	return nil
}

// ctxReader stops reading once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// sliceReader reads a byte slice (bytes.Reader without WriteTo, so
// io.Copy cannot bypass a wrapper).
type sliceReader struct{ b []byte }

func (s *sliceReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.b)
	s.b = s.b[n:]
	return n, nil
}
