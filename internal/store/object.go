package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync/atomic"

	"github.com/cairn-fs/cairn/internal/blob"

	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/vfs"
)

// sendfileMin is the smallest extent piece sent with sendfile instead of a
// pooled buffer: below it, dup+seek costs more than the copy it saves.
const sendfileMin = 64 << 10

// object is one version of a file: its inode's extents are immutable.
// The path cache holds one per cached path, and Open returns it to every
// reader: apart from memo, it never changes.
type object struct {
	s    *Local
	info ObjectInfo
	ino  *meta.Inode
	memo atomic.Value
}

// Memo returns a slot in which a front end may keep what it derives from
// this version of the file (its encoded response head, say), for as long
// as the store keeps the version cached: a cached file's Open returns the
// same object, with the same slot, until the path changes. Every value
// stored must have the same concrete type (atomic.Value).
// Local's objects give front ends their local bytes and a memo slot.
var (
	_ LocalAccess = (*object)(nil)
	_ Memoizer    = (*object)(nil)
)

func (o *object) Memo() *atomic.Value { return &o.memo }

func (o *object) Info() ObjectInfo { return o.info }
func (o *object) Close() error     { return nil }

// extentAt returns the index of the extent holding byte off.
func (o *object) extentAt(off int64) int {
	ex := o.ino.Extents
	return sort.Search(len(ex), func(i int) bool { return ex[i].Offset+ex[i].Length > off })
}

// ReadAt implements io.ReaderAt over the file's blobs.
func (o *object) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("store: negative offset")
	}
	if off >= o.ino.Size {
		return 0, io.EOF
	}
	n := 0
	for i := o.extentAt(off); i < len(o.ino.Extents) && n < len(p); i++ {
		e := o.ino.Extents[i]
		inner := off - e.Offset
		want := e.Length - inner
		if want > int64(len(p)-n) {
			want = int64(len(p) - n)
		}
		m, err := o.s.readBlob(e.Hash, p[n:n+int(want)], inner)
		n += m
		off += int64(m)
		if err != nil && !(errors.Is(err, io.EOF) && int64(m) == want) {
			return n, mapErr(fmt.Errorf("read blob %s: %w", e.Hash, err))
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteRangeTo writes bytes [off, off+n) to w: small pieces through a
// pooled buffer (one pread each), large ones with sendfile when w accepts a
// file (io.ReaderFrom over a TCP connection).
func (o *object) WriteRangeTo(w io.Writer, off, n int64) (int64, error) {
	if off < 0 || n < 0 || off+n > o.ino.Size {
		return 0, errors.New("store: range outside the file")
	}
	var written int64
	_, canSendfile := w.(io.ReaderFrom)
	for i := o.extentAt(off); i < len(o.ino.Extents) && written < n; i++ {
		e := o.ino.Extents[i]
		inner := off - e.Offset
		want := e.Length - inner
		if want > n-written {
			want = n - written
		}
		var m int64
		var err error
		if canSendfile && want >= sendfileMin {
			m, err = o.sendfile(w, e, inner, want)
		} else {
			m, err = o.copyBuffered(w, e, inner, want)
		}
		written += m
		off += m
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

func (o *object) copyBuffered(w io.Writer, e meta.Extent, inner, want int64) (int64, error) {
	bp := o.s.bufs.Get().(*[]byte)
	defer o.s.bufs.Put(bp)
	buf := (*bp)[:want]
	m, err := o.s.readBlob(e.Hash, buf, inner)
	if err != nil && !(errors.Is(err, io.EOF) && int64(m) == want) {
		return 0, mapErr(fmt.Errorf("read blob %s: %w", e.Hash, err))
	}
	k, err := w.Write(buf[:m])
	return int64(k), err
}

func (o *object) sendfile(w io.Writer, e meta.Extent, inner, want int64) (int64, error) {
	f, base, size, release, err := o.s.blobs.Locate(e.Hash)
	if errors.Is(err, blob.ErrNotFound) && o.s.cfg.Replication != nil {
		return o.copyBuffered(w, e, inner, want) // a remote blob
	}
	if err != nil {
		return 0, mapErr(fmt.Errorf("locate blob %s: %w", e.Hash, err))
	}
	defer release()
	if inner+want > size {
		return 0, fmt.Errorf("%w: blob %s shorter than its extent", ErrCorrupt, e.Hash)
	}
	osf, ok := f.(vfs.OSFile)
	if !ok {
		return o.copyBuffered(w, e, inner, want)
	}
	// Each request needs its own descriptor: sendfile uses the file offset.
	dup, err := dupFile(osf.OSFile())
	if err != nil {
		return o.copyBuffered(w, e, inner, want)
	}
	defer dup.Close()
	if _, err := dup.Seek(base+inner, io.SeekStart); err != nil {
		return 0, err
	}
	return io.Copy(w, &io.LimitedReader{R: dup, N: want})
}

// LocalSpan reports where bytes [off, off+n) of the content lie when they
// are one contiguous piece of a volume file of this node (n > 0, inside
// one extent whose blob is local, on the OS file system): the file, the
// offset of the first byte in it, and release, which the caller must call
// exactly once when done with f (until then the volume stays open and
// compaction does not remove it). The caller may send the bytes with
// sendfile(2) at an explicit offset (never through f's own offset, which
// is shared) and must not close, write or seek f. The needle's header (its
// magic and full hash) is checked as ReadAt checks it.
//
// ok is false, and nothing is held, in every other case (the range spans
// extents, the blob is remote or missing, the header does not check, an
// in-memory file system): the caller then uses ReadAt or WriteRangeTo,
// which report any error.
func (o *object) LocalSpan(off, n int64) (f *os.File, fileOff int64, release func(), ok bool) {
	if off < 0 || n <= 0 || off+n > o.ino.Size {
		return nil, 0, nil, false
	}
	i := o.extentAt(off)
	if i >= len(o.ino.Extents) {
		return nil, 0, nil, false
	}
	e := o.ino.Extents[i]
	inner := off - e.Offset
	if inner+n > e.Length {
		return nil, 0, nil, false
	}
	vf, base, size, rel, err := o.s.blobs.Locate(e.Hash)
	if err != nil {
		return nil, 0, nil, false
	}
	osf, isOS := vf.(vfs.OSFile)
	if !isOS || inner+n > size {
		rel()
		return nil, 0, nil, false
	}
	return osf.OSFile(), base + inner, rel, true
}

// LocalBytes lends bytes [off, off+n) of the content (n > 0) when they
// are one contiguous piece of a local blob in a memory-mapped volume: a
// slice of the volume's read-only map (blob.Store.MappedData), valid until
// hold.Release, which the caller must call exactly once when done with b
// (until then the volume stays open and mapped). b must not be written; it
// is meant for a system call such as sendmsg (a page lost to a truncation
// since the check is an EFAULT there, but a fault in Go code). The
// needle's header is checked as ReadAt checks it. It allocates nothing.
//
// ok is false, and nothing is held, in every other case (the range spans
// extents, the blob is remote or missing, the volume is not mapped, the
// header does not check): the caller then uses ReadAt, which reports any
// error.
func (o *object) LocalBytes(off, n int64) (b []byte, hold Hold, ok bool) {
	if off < 0 || n <= 0 || off+n > o.ino.Size {
		return nil, nil, false
	}
	ex := o.ino.Extents
	i := 0
	if len(ex) != 1 {
		i = o.extentAt(off)
		if i >= len(ex) {
			return nil, nil, false
		}
	}
	e := &ex[i]
	inner := off - e.Offset
	if inner < 0 || inner+n > e.Length {
		return nil, nil, false
	}
	b, ref, ok := o.s.blobs.MappedData(e.Hash, inner, n)
	if !ok {
		return nil, nil, false
	}
	return b, ref, true // a blob.Ref is one pointer: no allocation
}

// Resident reports whether bytes [off, off+n) of the content are one
// piece of a local blob whose pages are all in the page cache
// (blob.Store.Resident): sending them from the volume file will not wait
// for the disk, barring an eviction in between. False when unknown.
func (o *object) Resident(off, n int64) bool {
	if off < 0 || n <= 0 || off+n > o.ino.Size {
		return false
	}
	i := o.extentAt(off)
	if i >= len(o.ino.Extents) {
		return false
	}
	e := &o.ino.Extents[i]
	inner := off - e.Offset
	if inner+n > e.Length {
		return false
	}
	return o.s.blobs.Resident(e.Hash, inner, n)
}

// readBlob reads from the local copy, or, in a cluster, from a replica when
// this node has none or cannot read its own (a disk I/O error: the
// simulator's disk faults found reads failing that a replica could serve).
func (s *Local) readBlob(h blob.Hash, p []byte, off int64) (int, error) {
	n, err := s.blobs.ReadAt(h, p, off)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(p)) && s.cfg.Replication != nil {
		// Remote reads are bounded by the replicator's own timeouts.
		return s.cfg.Replication.ReadAt(context.Background(), h, p, off)
	}
	return n, err
}
