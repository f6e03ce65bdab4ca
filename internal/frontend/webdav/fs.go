package webdav

import (
	"context"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	xwebdav "golang.org/x/net/webdav"

	"github.com/cairn-fs/cairn/internal/store"
)

// fileSystem is x/net/webdav's FileSystem over one bucket of the store:
// names are "/path" inside the bucket. No second namespace: every call is
// a store call, so what WebDAV writes is what HTTP, S3 and the mount see.
type fileSystem struct {
	st     store.Store
	bucket string
}

var _ xwebdav.FileSystem = (*fileSystem)(nil)

// rel turns a WebDAV name into a store path ("" for the bucket root).
func rel(name string) string { return strings.TrimPrefix(slashClean(name), "/") }

// fsErr maps a store error to the os errors x/net/webdav understands.
func fsErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrNoBucket), errors.Is(err, store.ErrNotDir):
		return &fs.PathError{Op: "cairn", Err: os.ErrNotExist}
	case errors.Is(err, store.ErrExists):
		return &fs.PathError{Op: "cairn", Err: os.ErrExist}
	case errors.Is(err, store.ErrInvalidName):
		return &fs.PathError{Op: "cairn", Err: os.ErrInvalid}
	case errors.Is(err, store.ErrIsDir):
		return &fs.PathError{Op: "cairn", Err: errors.New("is a directory")}
	}
	return err
}

func (f *fileSystem) stat(ctx context.Context, p string) (store.ObjectInfo, error) {
	info, err := f.st.Stat(ctx, f.bucket, p)
	return info, fsErr(err)
}

// Mkdir implements webdav.FileSystem: the parent must exist (409 in
// MKCOL), the name must not.
func (f *fileSystem) Mkdir(ctx context.Context, name string, _ os.FileMode) error {
	p := rel(name)
	if p == "" {
		return os.ErrExist
	}
	if _, err := f.stat(ctx, p); err == nil {
		return os.ErrExist
	}
	if parent := path.Dir(p); parent != "." {
		if info, err := f.stat(ctx, parent); err != nil || !info.IsDir {
			return os.ErrNotExist
		}
	}
	// Exclusive: two MKCOLs of one name on two nodes, one wins (the
	// other gets 405), decided in the log.
	return fsErr(f.st.Mkdir(ctx, f.bucket, p, store.Attrs{Exclusive: true}))
}

// OpenFile implements webdav.FileSystem.
func (f *fileSystem) OpenFile(ctx context.Context, name string, flag int, _ os.FileMode) (xwebdav.File, error) {
	p := rel(name)
	// x/net/webdav opens O_RDWR alone to patch properties: that is a read
	// handle here; a write handle (PUT, COPY) creates or truncates.
	if flag&os.O_WRONLY != 0 || flag&(os.O_CREATE|os.O_TRUNC) != 0 {
		if p == "" {
			return nil, os.ErrPermission
		}
		// The target is not looked up (a new file's lookup misses every
		// cache): a directory there fails the store's Put (ErrIsDir).
		if flag&os.O_EXCL != 0 {
			if _, err := f.stat(ctx, p); err == nil {
				return nil, os.ErrExist
			}
		}
		if parent := path.Dir(p); parent != "." {
			if pi, err := f.stat(ctx, parent); err != nil || !pi.IsDir {
				return nil, os.ErrNotExist
			}
		}
		size := int64(-1)
		if n, ok := ctx.Value(bodySizeKey{}).(int64); ok {
			size = n
		}
		// O_EXCL, or a PUT with If-None-Match: * (exclusiveKey): the
		// store's Put refuses an existing file when it commits.
		excl, _ := ctx.Value(exclusiveKey{}).(*exclusivePut)
		return &writeFile{fs: f, ctx: context.WithoutCancel(ctx), path: p, size: size,
			excl: flag&os.O_EXCL != 0 || excl != nil, exclPut: excl}, nil
	}
	info, err := f.stat(ctx, p)
	if err != nil {
		return nil, err
	}
	if info.IsDir {
		return &dirFile{fs: f, ctx: ctx, path: p, info: info}, nil
	}
	obj, err := f.st.Open(ctx, f.bucket, p)
	if err != nil {
		return nil, fsErr(err)
	}
	return &readFile{fs: f, ctx: ctx, obj: obj, info: obj.Info()}, nil
}

// RemoveAll implements webdav.FileSystem: a file, or a directory and
// everything under it (deepest first).
func (f *fileSystem) RemoveAll(ctx context.Context, name string) error {
	p := rel(name)
	if p == "" {
		return os.ErrPermission
	}
	info, err := f.stat(ctx, p)
	if err != nil {
		return err
	}
	if info.IsDir {
		res, err := f.list(ctx, p)
		if err != nil {
			return err
		}
		for _, c := range res {
			if err := f.RemoveAll(ctx, "/"+c.Path); err != nil {
				return err
			}
		}
	}
	return fsErr(f.st.Delete(ctx, f.bucket, p, ""))
}

// Rename implements webdav.FileSystem (MOVE): the store's rename, no copy.
func (f *fileSystem) Rename(ctx context.Context, oldName, newName string) error {
	src, dst := rel(oldName), rel(newName)
	if src == "" || dst == "" {
		return os.ErrPermission
	}
	if parent := path.Dir(dst); parent != "." {
		if pi, err := f.stat(ctx, parent); err != nil || !pi.IsDir {
			return os.ErrNotExist
		}
	}
	return fsErr(f.st.Rename(ctx, f.bucket, src, dst))
}

// Stat implements webdav.FileSystem.
func (f *fileSystem) Stat(ctx context.Context, name string) (os.FileInfo, error) {
	p := rel(name)
	info, err := f.stat(ctx, p)
	if err != nil {
		return nil, err
	}
	return fileInfo{info}, nil
}

// list returns the entries of directory p (files and directories).
func (f *fileSystem) list(ctx context.Context, p string) ([]store.ObjectInfo, error) {
	prefix := ""
	if p != "" {
		prefix = p + "/"
	}
	var out []store.ObjectInfo
	opts := store.ListOptions{Prefix: prefix, Delimiter: "/", Limit: 1000}
	for {
		res, err := f.st.List(ctx, f.bucket, opts)
		if err != nil {
			return nil, fsErr(err)
		}
		out = append(out, res.Entries...)
		for _, cp := range res.CommonPrefixes {
			d, err := f.st.Stat(ctx, f.bucket, strings.TrimSuffix(cp, "/"))
			if err == nil {
				out = append(out, d)
			}
		}
		if !res.Truncated {
			return out, nil
		}
		opts.StartAfter = res.NextToken
	}
}

// fileInfo is an os.FileInfo of a store object, with its ETag and
// content type for PROPFIND.
type fileInfo struct{ store.ObjectInfo }

func (i fileInfo) Name() string {
	if i.Path == "" {
		return i.Bucket
	}
	return path.Base(i.Path)
}
func (i fileInfo) Size() int64 { return i.ObjectInfo.Size }
func (i fileInfo) Mode() os.FileMode {
	if i.ObjectInfo.IsDir {
		return os.ModeDir | 0o755
	}
	return os.FileMode(i.ObjectInfo.Mode & 0o777)
}
func (i fileInfo) ModTime() time.Time { return i.ObjectInfo.ModTime }
func (i fileInfo) IsDir() bool        { return i.ObjectInfo.IsDir }
func (i fileInfo) Sys() any           { return nil }

// ETag implements webdav.ETager: the content's MD5, as GET answers.
func (i fileInfo) ETag(context.Context) (string, error) {
	if i.ObjectInfo.IsDir || i.ObjectInfo.ETag == "" {
		return "", xwebdav.ErrNotImplemented
	}
	return `"` + i.ObjectInfo.ETag + `"`, nil
}

// ContentType implements webdav.ContentTyper.
func (i fileInfo) ContentType(context.Context) (string, error) {
	if i.ObjectInfo.ContentType != "" {
		return i.ObjectInfo.ContentType, nil
	}
	if t := mime.TypeByExtension(path.Ext(i.Path)); t != "" {
		return t, nil
	}
	return "application/octet-stream", nil
}

// Dead properties are extended attributes "user.cairn.dav.NS.LOCAL" (NS
// base64url) holding the property's inner XML: they are in the log, so a
// PROPPATCH through one node is seen through every node.
const xattrDAV = "user.cairn.dav."

func propKey(n xml.Name) string {
	return xattrDAV + base64.RawURLEncoding.EncodeToString([]byte(n.Space)) + "." + n.Local
}

func propName(k string) (xml.Name, bool) {
	rest, ok := strings.CutPrefix(k, xattrDAV)
	if !ok {
		return xml.Name{}, false
	}
	ns, local, ok := strings.Cut(rest, ".")
	if !ok {
		return xml.Name{}, false
	}
	space, err := base64.RawURLEncoding.DecodeString(ns)
	if err != nil {
		return xml.Name{}, false
	}
	return xml.Name{Space: string(space), Local: local}, true
}

// props is the dead-property half of a File.
type props struct {
	fs   *fileSystem
	ctx  context.Context
	path string
}

func (p props) DeadProps() (map[xml.Name]xwebdav.Property, error) {
	x, err := p.fs.st.Xattrs(p.ctx, p.fs.bucket, p.path)
	if err != nil {
		return nil, fsErr(err)
	}
	out := map[xml.Name]xwebdav.Property{}
	for k, v := range x {
		if n, ok := propName(k); ok {
			out[n] = xwebdav.Property{XMLName: n, InnerXML: v}
		}
	}
	return out, nil
}

func (p props) Patch(patches []xwebdav.Proppatch) ([]xwebdav.Propstat, error) {
	set := map[string][]byte{}
	pstat := xwebdav.Propstat{Status: http.StatusOK}
	for _, patch := range patches {
		for _, prop := range patch.Props {
			if patch.Remove {
				set[propKey(prop.XMLName)] = nil
			} else {
				set[propKey(prop.XMLName)] = append([]byte(nil), prop.InnerXML...)
			}
			pstat.Props = append(pstat.Props, xwebdav.Property{XMLName: prop.XMLName})
		}
	}
	if _, err := p.fs.st.SetAttrs(p.ctx, p.fs.bucket, p.path, store.SetAttrs{Xattrs: set}); err != nil {
		return nil, fsErr(err)
	}
	return []xwebdav.Propstat{pstat}, nil
}

// readFile is an open file for reading.
type readFile struct {
	fs   *fileSystem
	ctx  context.Context
	obj  store.Object
	info store.ObjectInfo
	off  int64
}

func (r *readFile) Read(p []byte) (int, error) {
	if r.off >= r.info.Size {
		return 0, io.EOF
	}
	n, err := r.obj.ReadAt(p[:min(int64(len(p)), r.info.Size-r.off)], r.off)
	r.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (r *readFile) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += r.info.Size
	}
	if offset < 0 {
		return 0, os.ErrInvalid
	}
	r.off = offset
	return offset, nil
}

func (r *readFile) Readdir(int) ([]fs.FileInfo, error) { return nil, os.ErrInvalid }
func (r *readFile) Stat() (fs.FileInfo, error)         { return fileInfo{r.info}, nil }
func (r *readFile) Write([]byte) (int, error)          { return 0, os.ErrPermission }
func (r *readFile) Close() error                       { return r.obj.Close() }
func (r *readFile) DeadProps() (map[xml.Name]xwebdav.Property, error) {
	return props{r.fs, r.ctx, r.info.Path}.DeadProps()
}
func (r *readFile) Patch(p []xwebdav.Proppatch) ([]xwebdav.Propstat, error) {
	return props{r.fs, r.ctx, r.info.Path}.Patch(p)
}

// dirFile is an open directory.
type dirFile struct {
	fs   *fileSystem
	ctx  context.Context
	path string
	info store.ObjectInfo
	ents []fs.FileInfo
	read bool
}

func (d *dirFile) Read([]byte) (int, error)       { return 0, os.ErrInvalid }
func (d *dirFile) Seek(int64, int) (int64, error) { return 0, nil }
func (d *dirFile) Write([]byte) (int, error)      { return 0, os.ErrPermission }
func (d *dirFile) Close() error                   { return nil }
func (d *dirFile) Stat() (fs.FileInfo, error)     { return fileInfo{d.info}, nil }
func (d *dirFile) Readdir(count int) ([]fs.FileInfo, error) {
	if !d.read {
		list, err := d.fs.list(d.ctx, d.path)
		if err != nil {
			return nil, err
		}
		for _, e := range list {
			d.ents = append(d.ents, fileInfo{e})
		}
		d.read = true
	}
	if count <= 0 {
		out := d.ents
		d.ents = nil
		return out, nil
	}
	if len(d.ents) == 0 {
		return nil, io.EOF
	}
	n := min(count, len(d.ents))
	out := d.ents[:n]
	d.ents = d.ents[n:]
	return out, nil
}
func (d *dirFile) DeadProps() (map[xml.Name]xwebdav.Property, error) {
	return props{d.fs, d.ctx, d.path}.DeadProps()
}
func (d *dirFile) Patch(p []xwebdav.Proppatch) ([]xwebdav.Propstat, error) {
	return props{d.fs, d.ctx, d.path}.Patch(p)
}

// writeFile streams what is written into a store.Put, committed at Close.
// A copy from a file of the store (COPY: io.Copy calls ReadFrom with the
// source's readFile) copies no bytes: Close makes the new file name the
// source's blobs (store.Concat).
type writeFile struct {
	fs   *fileSystem
	ctx  context.Context
	path string

	size     int64 // the PUT's Content-Length, or -1
	once     sync.Once
	pw       *io.PipeWriter
	done     chan error
	n        int64
	copyFrom *readFile
	props    map[string][]byte // dead properties to set at Close
	excl     bool              // the file must not exist (IfNoneMatchAny)
	exclPut  *exclusivePut     // the PUT's, told when the file existed
}

func (w *writeFile) start() {
	w.once.Do(func() {
		pr, pw := io.Pipe()
		w.pw, w.done = pw, make(chan error, 1)
		ct := mime.TypeByExtension(path.Ext(w.path))
		go func() {
			_, _, err := w.fs.st.Put(w.ctx, w.fs.bucket, w.path, pr, store.PutOptions{Size: w.size, ContentType: ct, IfNoneMatchAny: w.excl})
			if errors.Is(err, store.ErrPrecondition) && w.exclPut != nil {
				w.exclPut.existed.Store(true)
			}
			pr.CloseWithError(err)
			w.done <- err
		}()
	})
}

func (w *writeFile) Write(p []byte) (int, error) {
	if w.copyFrom != nil {
		return 0, os.ErrInvalid
	}
	w.start()
	n, err := w.pw.Write(p)
	w.n += int64(n)
	return n, err
}

// ReadFrom implements io.ReaderFrom: a whole file of the store is copied
// by reference; anything else streams.
func (w *writeFile) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := r.(*readFile); ok && rf.off == 0 && w.pw == nil && w.copyFrom == nil {
		w.copyFrom = rf
		w.n = rf.info.Size
		return rf.info.Size, nil
	}
	w.start()
	n, err := io.Copy(w.pw, r)
	w.n += n
	return n, err
}

// Close commits the file; its error is the store's.
func (w *writeFile) Close() error {
	if src := w.copyFrom; src != nil {
		_, _, err := w.fs.st.Concat(w.ctx, w.fs.bucket, w.path,
			[]store.ObjectRef{{Bucket: src.fs.bucket, Path: src.info.Path}}, src.info.ETag,
			store.PutOptions{ContentType: src.info.ContentType, Xattrs: w.props})
		return fsErr(err)
	}
	w.start()
	w.pw.Close()
	if err := <-w.done; err != nil {
		return fsErr(err)
	}
	if len(w.props) > 0 {
		_, err := w.fs.st.SetAttrs(w.ctx, w.fs.bucket, w.path, store.SetAttrs{Xattrs: w.props})
		return fsErr(err)
	}
	return nil
}

func (w *writeFile) Read([]byte) (int, error)           { return 0, os.ErrPermission }
func (w *writeFile) Seek(int64, int) (int64, error)     { return 0, os.ErrPermission }
func (w *writeFile) Readdir(int) ([]fs.FileInfo, error) { return nil, os.ErrInvalid }
func (w *writeFile) Stat() (fs.FileInfo, error) {
	return fileInfo{store.ObjectInfo{Bucket: w.fs.bucket, Path: w.path, Size: w.n, ModTime: time.Now()}}, nil
}

// DeadProps and Patch hold the properties a COPY brings, set at Close.
func (w *writeFile) DeadProps() (map[xml.Name]xwebdav.Property, error) {
	return map[xml.Name]xwebdav.Property{}, nil
}

func (w *writeFile) Patch(patches []xwebdav.Proppatch) ([]xwebdav.Propstat, error) {
	if w.props == nil {
		w.props = map[string][]byte{}
	}
	pstat := xwebdav.Propstat{Status: http.StatusOK}
	for _, patch := range patches {
		for _, prop := range patch.Props {
			if !patch.Remove {
				w.props[propKey(prop.XMLName)] = append([]byte(nil), prop.InnerXML...)
			}
			pstat.Props = append(pstat.Props, xwebdav.Property{XMLName: prop.XMLName})
		}
	}
	return []xwebdav.Propstat{pstat}, nil
}

// bodySizeKey marks a context carrying a PUT's Content-Length: the only
// way through x/net/webdav's FileSystem interface to the store's Put,
// which takes a body of known size faster (one hash pass for one blob)
// and refuses one that ends early.
type bodySizeKey struct{}

// exclusiveKey marks a context carrying a PUT with If-None-Match: *
// (x/net/webdav ignores the header): the write refuses an existing file,
// decided in the log, and the handler answers 412 when it did.
type exclusiveKey struct{}

type exclusivePut struct{ existed atomic.Bool }
