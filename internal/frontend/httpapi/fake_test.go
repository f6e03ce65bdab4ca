package httpapi

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cairn-fs/cairn/internal/store"
)

// fakeStore is an in-memory store.Store for the handler tests: it honours
// the declared Size (ErrShortBody/ErrTooLarge), stores nothing on a body
// error, computes MD5 ETags and SHA-256, and lists in S3 order.
type fakeStore struct {
	mu      sync.Mutex
	buckets map[string]store.BucketInfo
	files   map[string]map[string]*fakeFile // bucket → path → file
	dirs    map[string]map[string]bool      // bucket → dir path
	putErr  error                           // returned by Put before reading, if set
	// afterRead, if set, runs after Put has read the body (a slow fsync).
	afterRead func()
	now       time.Time
}

type fakeFile struct {
	data []byte
	info store.ObjectInfo
	// readErr, if set, fails every read of the body (a blob with no
	// reachable replica).
	readErr error

	// file holds data for LocalSpan, written on first use (an unlinked
	// temporary file).
	fileOnce sync.Once
	file     *os.File
}

func newFakeStore() *fakeStore {
	return &fakeStore{
		buckets: map[string]store.BucketInfo{},
		files:   map[string]map[string]*fakeFile{},
		dirs:    map[string]map[string]bool{},
		now:     time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC),
	}
}

func (f *fakeStore) CreateBucket(_ context.Context, b store.BucketInfo) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !validBucketName(b.Name) {
		return store.ErrInvalidName
	}
	if _, ok := f.buckets[b.Name]; ok {
		return store.ErrBucketExists
	}
	if b.Created.IsZero() {
		b.Created = f.now
	}
	f.buckets[b.Name] = b
	f.files[b.Name] = map[string]*fakeFile{}
	f.dirs[b.Name] = map[string]bool{}
	return nil
}

func (f *fakeStore) UpdateBucket(_ context.Context, b store.BucketInfo) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	old, ok := f.buckets[b.Name]
	if !ok {
		return store.ErrNoBucket
	}
	b.Created = old.Created
	f.buckets[b.Name] = b
	return nil
}

func (f *fakeStore) DeleteBucket(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.buckets[name]; !ok {
		return store.ErrNoBucket
	}
	if len(f.files[name])+len(f.dirs[name]) > 0 {
		return store.ErrBucketNotEmpty
	}
	delete(f.buckets, name)
	return nil
}

func (f *fakeStore) Bucket(_ context.Context, name string) (store.BucketInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.buckets[name]
	if !ok {
		return store.BucketInfo{}, store.ErrNoBucket
	}
	return b, nil
}

func (f *fakeStore) Buckets(context.Context) ([]store.BucketInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []store.BucketInfo
	for _, b := range f.buckets {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func parentDirs(p string) []string {
	var out []string
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return out
}

// mkparents creates p's parent directories; f.mu is held.
func (f *fakeStore) mkparents(bucket, p string) error {
	for _, d := range parentDirs(p) {
		if _, isFile := f.files[bucket][d]; isFile {
			return store.ErrNotDir
		}
	}
	for _, d := range parentDirs(p) {
		f.dirs[bucket][d] = true
	}
	return nil
}

func (f *fakeStore) Put(ctx context.Context, bucket, p string, r io.Reader, opts store.PutOptions) (store.ObjectInfo, bool, error) {
	f.mu.Lock()
	_, ok := f.buckets[bucket]
	putErr := f.putErr
	f.mu.Unlock()
	if !ok {
		return store.ObjectInfo{}, false, store.ErrNoBucket
	}
	if putErr != nil {
		return store.ObjectInfo{}, false, putErr
	}
	src := r
	if opts.Size >= 0 {
		src = io.LimitReader(r, opts.Size+1)
	}
	data, err := io.ReadAll(src)
	if err != nil {
		return store.ObjectInfo{}, false, fmt.Errorf("fake: read body: %w", err)
	}
	if opts.Size >= 0 && int64(len(data)) < opts.Size {
		return store.ObjectInfo{}, false, store.ErrShortBody
	}
	if opts.Size >= 0 && int64(len(data)) > opts.Size {
		return store.ObjectInfo{}, false, store.ErrTooLarge
	}
	if f.afterRead != nil {
		f.afterRead()
	}
	if err := ctx.Err(); err != nil {
		return store.ObjectInfo{}, false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dirs[bucket][p] {
		return store.ObjectInfo{}, false, store.ErrIsDir
	}
	old, exists := f.files[bucket][p]
	if opts.IfNoneMatchAny && exists {
		return store.ObjectInfo{}, false, store.ErrPrecondition
	}
	if opts.IfMatch != "" && (!exists || old.info.ETag != opts.IfMatch) {
		return store.ObjectInfo{}, false, store.ErrPrecondition
	}
	if err := f.mkparents(bucket, p); err != nil {
		return store.ObjectInfo{}, false, err
	}
	m, s := md5.Sum(data), sha256.Sum256(data)
	mt := opts.ModTime
	if mt.IsZero() {
		mt = f.now
	}
	mode := opts.Mode
	if mode == 0 {
		mode = 0o644
	}
	info := store.ObjectInfo{Bucket: bucket, Path: p, Size: int64(len(data)), ModTime: mt,
		ETag: hex.EncodeToString(m[:]), SHA256: hex.EncodeToString(s[:]), ContentType: opts.ContentType, Mode: mode}
	f.files[bucket][p] = &fakeFile{data: data, info: info}
	return info, !exists, nil
}

func (f *fakeStore) stat(bucket, p string) (store.ObjectInfo, error) {
	if _, ok := f.buckets[bucket]; !ok {
		return store.ObjectInfo{}, store.ErrNoBucket
	}
	if p == "" || f.dirs[bucket][p] {
		return store.ObjectInfo{Bucket: bucket, Path: p, IsDir: true, ModTime: f.now, Mode: 0o755}, nil
	}
	if ff, ok := f.files[bucket][p]; ok {
		return ff.info, nil
	}
	return store.ObjectInfo{}, store.ErrNotFound
}

func (f *fakeStore) Open(_ context.Context, bucket, p string) (store.Object, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	info, err := f.stat(bucket, p)
	if err != nil {
		return nil, err
	}
	if info.IsDir {
		return nil, store.ErrIsDir
	}
	return &fakeObject{ff: f.files[bucket][p]}, nil
}

func (f *fakeStore) Stat(_ context.Context, bucket, p string) (store.ObjectInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stat(bucket, p)
}

func (f *fakeStore) List(_ context.Context, bucket string, o store.ListOptions) (store.ListResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.buckets[bucket]; !ok {
		return store.ListResult{}, store.ErrNoBucket
	}
	limit := o.Limit
	if limit == 0 {
		limit = 1000
	}
	// Keys in S3 order: files as themselves, directories as "dir/".
	type key struct {
		k    string
		info *store.ObjectInfo
	}
	var keys []key
	for p, ff := range f.files[bucket] {
		keys = append(keys, key{p, &ff.info})
	}
	for d := range f.dirs[bucket] {
		keys = append(keys, key{d + "/", nil})
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].k < keys[j].k })
	var res store.ListResult
	last := ""
	for _, k := range keys {
		if !strings.HasPrefix(k.k, o.Prefix) || k.k <= o.StartAfter {
			continue
		}
		rest := k.k[len(o.Prefix):]
		if rest == "" {
			continue
		}
		var item string
		var info *store.ObjectInfo
		if o.Delimiter == "/" {
			if i := strings.IndexByte(rest, '/'); i >= 0 {
				item = o.Prefix + rest[:i+1]
			} else {
				item, info = k.k, k.info
			}
		} else {
			if k.info == nil {
				continue
			}
			item, info = k.k, k.info
		}
		if item == last || (info == nil && item <= o.StartAfter) {
			continue
		}
		if len(res.Entries)+len(res.CommonPrefixes) == limit {
			res.Truncated = true
			res.NextToken = last
			break
		}
		last = item
		if info != nil {
			res.Entries = append(res.Entries, *info)
		} else {
			res.CommonPrefixes = append(res.CommonPrefixes, item)
		}
	}
	return res, nil
}

// SetAttrs, Xattrs and Symlink are not used by the HTTP API.
func (f *fakeStore) SetAttrs(context.Context, string, string, store.SetAttrs) (store.ObjectInfo, error) {
	return store.ObjectInfo{}, store.ErrInvalidName
}

func (f *fakeStore) Xattrs(context.Context, string, string) (map[string][]byte, error) {
	return nil, store.ErrInvalidName
}

func (f *fakeStore) StatIno(context.Context, string, string, uint64) (store.ObjectInfo, error) {
	return store.ObjectInfo{}, store.ErrInvalidName
}

func (f *fakeStore) OpenIno(context.Context, string, string, uint64) (store.Object, error) {
	return nil, store.ErrInvalidName
}

func (f *fakeStore) ReserveInos(context.Context, int) (uint64, error) {
	return 0, store.ErrInvalidName
}

func (f *fakeStore) Link(context.Context, string, string, string) (store.ObjectInfo, error) {
	return store.ObjectInfo{}, store.ErrInvalidName
}

func (f *fakeStore) Symlink(context.Context, string, string, string, store.Attrs) (store.ObjectInfo, error) {
	return store.ObjectInfo{}, store.ErrInvalidName
}

func (f *fakeStore) Mknod(context.Context, string, string, uint32, uint32, store.Attrs) (store.ObjectInfo, error) {
	return store.ObjectInfo{}, store.ErrInvalidName
}

func (f *fakeStore) Mkdir(_ context.Context, bucket, p string, _ store.Attrs) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.buckets[bucket]; !ok {
		return store.ErrNoBucket
	}
	if _, ok := f.files[bucket][p]; ok || f.dirs[bucket][p] {
		return store.ErrExists
	}
	if err := f.mkparents(bucket, p); err != nil {
		return err
	}
	f.dirs[bucket][p] = true
	return nil
}

func (f *fakeStore) hasChildren(bucket, p string) bool {
	for q := range f.files[bucket] {
		if strings.HasPrefix(q, p+"/") {
			return true
		}
	}
	for q := range f.dirs[bucket] {
		if strings.HasPrefix(q, p+"/") {
			return true
		}
	}
	return false
}

func (f *fakeStore) Delete(_ context.Context, bucket, p, ifMatch string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	info, err := f.stat(bucket, p)
	if err != nil {
		return err
	}
	if ifMatch != "" && info.ETag != ifMatch {
		return store.ErrPrecondition
	}
	if info.IsDir {
		if f.hasChildren(bucket, p) {
			return store.ErrNotEmpty
		}
		delete(f.dirs[bucket], p)
		return nil
	}
	delete(f.files[bucket], p)
	return nil
}

func (f *fakeStore) Rename(_ context.Context, bucket, src, dst string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	info, err := f.stat(bucket, src)
	if err != nil {
		return err
	}
	if info.IsDir {
		return fmt.Errorf("fake: directory rename unsupported")
	}
	if f.dirs[bucket][dst] {
		return store.ErrIsDir
	}
	if err := f.mkparents(bucket, dst); err != nil {
		return err
	}
	ff := f.files[bucket][src]
	delete(f.files[bucket], src)
	ff.info.Path = dst
	f.files[bucket][dst] = ff
	return nil
}

type fakeObject struct{ ff *fakeFile }

func (o *fakeObject) Info() store.ObjectInfo { return o.ff.info }

func (o *fakeObject) ReadAt(p []byte, off int64) (int, error) {
	if o.ff.readErr != nil {
		return 0, o.ff.readErr
	}
	if off >= int64(len(o.ff.data)) {
		return 0, io.EOF
	}
	n := copy(p, o.ff.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (o *fakeObject) WriteRangeTo(w io.Writer, off, n int64) (int64, error) {
	if o.ff.readErr != nil {
		return 0, o.ff.readErr
	}
	if off < 0 || n < 0 || off+n > int64(len(o.ff.data)) {
		return 0, fmt.Errorf("fake: range [%d,+%d) outside %d bytes", off, n, len(o.ff.data))
	}
	m, err := w.Write(o.ff.data[off : off+n])
	return int64(m), err
}

func (o *fakeObject) Close() error { return nil }

// LocalBytes lends nothing (no memory map) and Resident knows nothing:
// with LocalSpan, the fake is a store.LocalAccess.
func (o *fakeObject) LocalBytes(off, n int64) ([]byte, store.Hold, bool) { return nil, nil, false }

func (o *fakeObject) Resident(off, n int64) bool { return false }

// LocalSpan implements the store's zero-copy span (store's
// object.LocalSpan) from a temporary file holding the data, so that the
// fast path's sendfile route is tested against the fake too; none for a
// file whose reads fail, which must get an error answer.
func (o *fakeObject) LocalSpan(off, n int64) (*os.File, int64, func(), bool) {
	ff := o.ff
	if ff.readErr != nil || off < 0 || n <= 0 || off+n > int64(len(ff.data)) {
		return nil, 0, nil, false
	}
	ff.fileOnce.Do(func() {
		f, err := os.CreateTemp("", "cairn-fake-*")
		if err != nil {
			return
		}
		_ = os.Remove(f.Name())
		if _, err := f.WriteAt(ff.data, 0); err != nil {
			f.Close()
			return
		}
		ff.file = f
	})
	if ff.file == nil {
		return nil, 0, nil, false
	}
	return ff.file, off, func() {}, true
}

var _ store.Store = (*fakeStore)(nil)

func (f *fakeStore) Concat(context.Context, string, string, []store.ObjectRef, string, store.PutOptions) (store.ObjectInfo, bool, error) {
	return store.ObjectInfo{}, false, store.ErrInvalidName
}
