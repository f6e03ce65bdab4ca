package httpapi

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/store"
)

// Bulk upload: POST /BUCKET/[PREFIX/]?extract=tar (or tar.gz) stores every
// regular file of a tar archive under PREFIX (docs/http-api.md, "Bulk
// upload"). Small files are gathered into groups and stored with one
// store.BatchPutter call per group (their blobs go to each replica in one
// batch, their namespace changes share log entries), one group committing
// while the next is read; a file over store.MaxBlobSize is streamed with Put.

// PAXContentType is the PAX record of an archive entry that gives the
// file's Content-Type (as the header of a PUT would).
const PAXContentType = "CAIRN.content-type"

const (
	// extractGroupFiles and extractGroupBytes bound one group of small
	// files (the memory a request holds: two groups, one being read and
	// one being committed).
	extractGroupFiles = 256
	extractGroupBytes = 8 << 20
	// extractSlab is the unit of the buffers small files are read into.
	extractSlab = 1 << 20
	// extractMkdirs bounds the concurrent Mkdirs of empty directories.
	extractMkdirs = 16
	// extractMaxIssues caps the per-entry errors and skips listed in the
	// answer (the counts stay exact).
	extractMaxIssues = 1000
)

// ExtractIssue is one entry of an archive that was not stored.
type ExtractIssue struct {
	Path   string `json:"path"`
	Error  string `json:"error,omitempty"`
	Code   string `json:"code,omitempty"`
	Status int    `json:"status,omitempty"`
	Reason string `json:"reason,omitempty"` // skipped entries: "symlink", "hardlink", "device", ...
}

// ExtractResult is the JSON answer of a bulk upload.
type ExtractResult struct {
	Files        int64          `json:"files"`   // regular files stored
	Bytes        int64          `json:"bytes"`   // their bytes
	Dirs         int64          `json:"dirs"`    // empty directories created
	Failed       int64          `json:"failed"`  // entries that could not be stored
	Skipped      int64          `json:"skipped"` // entries of other types (symlinks...)
	Errors       []ExtractIssue `json:"errors,omitempty"`
	SkippedItems []ExtractIssue `json:"skipped_items,omitempty"`
	// Error and Code: the request as a whole failed (a malformed or cut
	// archive, a bucket that does not exist...). Files counted above are
	// stored even then.
	Error string `json:"error,omitempty"`
	Code  string `json:"code,omitempty"`
}

// extractJob is one group of small files on its way to the store.
type extractJob struct {
	files []store.FilePut
	bytes int64
	paths map[string]bool
	done  chan struct{}
}

type extractor struct {
	s      *Server
	ctx    context.Context
	bucket string
	mu     sync.Mutex
	res    ExtractResult
	// first: the status and code of the first failed entry.
	firstStatus int
	firstCode   string
	stored      map[string]bool // directories holding a stored file
	dirs        []string        // directory entries of the archive
}

// serveExtract serves POST ?extract=tar|tar.gz.
func (s *Server) serveExtract(rs *reqState, t target, kind string) {
	r := rs.req
	if err := s.authorize(rs, access.ActionWrite, access.Resource{Bucket: t.bucket, Path: t.path}); err != nil {
		s.writeError(rs, err)
		return
	}
	bs, batch := s.store.(store.BatchPutter)
	var body io.Reader = &rs.body
	switch kind {
	case "tar":
	case "tar.gz", "tgz":
		zr, err := gzip.NewReader(body)
		if err != nil {
			s.writeError(rs, fmt.Errorf("%w: not a gzip stream: %v", ErrBadRequest, err))
			return
		}
		defer zr.Close()
		body = zr
	default:
		s.writeError(rs, fmt.Errorf("%w: extract=%q: want tar or tar.gz", ErrBadRequest, kind))
		return
	}
	// The bucket must exist before anything is read.
	if _, err := s.store.Bucket(r.Context(), t.bucket); err != nil {
		s.writeError(rs, err)
		return
	}
	x := &extractor{s: s, ctx: s.changeCtx(rs), bucket: t.bucket, stored: map[string]bool{}}
	err := x.run(tar.NewReader(body), t.path, bs, batch)
	x.mkdirs()
	status := http.StatusOK
	if err != nil {
		if berr := rs.body.bodyError(); berr != nil {
			rs.w.Header()["Connection"] = []string{"close"}
			err = berr
		}
		st, code := classify(err)
		if errors.Is(err, tar.ErrHeader) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) {
			st, code = http.StatusBadRequest, "BadArchive"
		}
		status = st
		x.res.Code = code
		x.res.Error = s.errorMessage(r.Context(), r.Method, r.URL.Path, st, err)
	} else if x.res.Failed > 0 {
		status = x.firstStatus
		x.res.Code = x.firstCode
		x.res.Error = fmt.Sprintf("%d of the archive's entries could not be stored (listed in errors)", x.res.Failed)
	}
	s.writeJSON(rs, status, &x.res)
}

// run reads the archive and stores its entries under prefix.
func (x *extractor) run(tr *tar.Reader, prefix string, bs store.BatchPutter, batch bool) error {
	var (
		cur      *extractJob
		inflight *extractJob
		slab     []byte
	)
	wait := func() {
		if inflight != nil {
			<-inflight.done
			inflight = nil
		}
	}
	defer wait()
	flush := func() {
		if cur == nil || len(cur.files) == 0 {
			return
		}
		wait() // one group in flight at a time
		job := cur
		cur, inflight = nil, job
		go func() {
			defer close(job.done)
			x.commit(bs, job.files)
		}()
	}
	for {
		if err := x.ctx.Err(); err != nil {
			flush()
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			flush()
			return nil
		}
		if err != nil {
			flush()
			return fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
		name, ok := x.entryName(prefix, hdr.Name)
		if !ok {
			continue
		}
		switch hdr.Typeflag {
		case tar.TypeReg, tar.TypeRegA:
		case tar.TypeDir:
			if name != "" {
				x.dirs = append(x.dirs, name)
			}
			continue
		default:
			x.skip(name, entryKind(hdr.Typeflag))
			continue
		}
		if name == "" {
			x.fail(name, fmt.Errorf("%w: a file entry names the target directory itself", ErrBadPath))
			continue
		}
		opts := store.PutOptions{Mode: uint32(hdr.Mode) & 0o7777, ModTime: hdr.ModTime, Size: hdr.Size,
			ContentType: storedContentType(hdr.PAXRecords[PAXContentType])}
		if hdr.Size > store.MaxBlobSize || !batch {
			// Stream it (a store without PutFiles: every file); the
			// groups before it land first (a later entry of the same
			// path must win).
			flush()
			wait()
			info, _, err := x.s.store.Put(x.ctx, x.bucket, name, tr, opts)
			if err != nil {
				if x.ctx.Err() != nil || errors.Is(err, store.ErrShortBody) {
					return err // the archive or the connection broke
				}
				x.fail(name, err)
				continue
			}
			x.ok(name, info.Size)
			continue
		}
		if cur != nil && (len(cur.files) >= extractGroupFiles || cur.bytes+hdr.Size > extractGroupBytes) {
			flush()
		}
		if inflight != nil && inflight.paths[name] {
			wait() // the same path is being committed: keep archive order
		}
		if cur == nil {
			cur = &extractJob{paths: map[string]bool{}, done: make(chan struct{})}
		}
		var data []byte
		if hdr.Size > extractSlab/4 {
			data = make([]byte, hdr.Size)
		} else {
			if int64(len(slab)) < hdr.Size {
				slab = make([]byte, extractSlab)
			}
			data, slab = slab[:hdr.Size:hdr.Size], slab[hdr.Size:]
		}
		if _, err := io.ReadFull(tr, data); err != nil {
			flush()
			return fmt.Errorf("%w: %s: %w", ErrBadRequest, name, err)
		}
		cur.files = append(cur.files, store.FilePut{Path: name, Data: data, Opts: opts})
		cur.bytes += hdr.Size
		cur.paths[name] = true
	}
}

// commit stores one group.
func (x *extractor) commit(bs store.BatchPutter, files []store.FilePut) {
	for i, r := range bs.PutFiles(x.ctx, x.bucket, files) {
		if r.Err != nil {
			x.fail(files[i].Path, r.Err)
		} else {
			x.ok(files[i].Path, int64(len(files[i].Data)))
		}
	}
}

func (x *extractor) ok(name string, size int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.res.Files++
	x.res.Bytes += size
	for d := path.Dir(name); d != "." && !x.stored[d]; d = path.Dir(d) {
		x.stored[d] = true
	}
}

func (x *extractor) fail(name string, err error) {
	st, code := classify(err)
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.res.Failed == 0 {
		x.firstStatus, x.firstCode = st, code
	}
	x.res.Failed++
	if len(x.res.Errors) < extractMaxIssues {
		x.res.Errors = append(x.res.Errors, ExtractIssue{Path: name, Status: st, Code: code,
			Error: x.s.errorMessage(x.ctx, http.MethodPost, "/"+x.bucket+"/"+name, st, err)})
	}
}

func (x *extractor) skip(name, reason string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.res.Skipped++
	if len(x.res.SkippedItems) < extractMaxIssues {
		x.res.SkippedItems = append(x.res.SkippedItems, ExtractIssue{Path: name, Reason: reason})
	}
}

// mkdirs creates the archive's directories that hold no stored file (the
// others exist already: a file's parents are created with it).
func (x *extractor) mkdirs() {
	var todo []string
	seen := map[string]bool{}
	for _, d := range x.dirs {
		if !x.stored[d] && !seen[d] {
			seen[d] = true
			todo = append(todo, d)
		}
	}
	sort.Strings(todo)
	sem := make(chan struct{}, extractMkdirs)
	var wg sync.WaitGroup
	for _, d := range todo {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := x.s.store.Mkdir(x.ctx, x.bucket, d, store.Attrs{})
			if err != nil && !errors.Is(err, store.ErrExists) {
				x.fail(d, err)
				return
			}
			x.mu.Lock()
			x.res.Dirs++
			x.mu.Unlock()
		}()
	}
	wg.Wait()
}

// entryName maps an archive name to a path in the bucket under prefix. A
// leading "./" or "/" is dropped; "." itself is the prefix (ok with "");
// names with ".." or empty segments are reported and refused.
func (x *extractor) entryName(prefix, name string) (string, bool) {
	n := strings.TrimLeft(name, "/")
	for strings.HasPrefix(n, "./") {
		n = strings.TrimLeft(n[2:], "/")
	}
	n = strings.TrimSuffix(n, "/")
	if n == "." || n == "" {
		return prefix, prefix != "" // the target directory: nothing to do
	}
	full := n
	if prefix != "" {
		full = prefix + "/" + n
	}
	if err := checkPath(full, false); err != nil {
		x.fail(full, err)
		return "", false
	}
	if len(x.bucket)+len(full)+2 > MaxPathBytes {
		x.fail(full, ErrPathTooLong)
		return "", false
	}
	return full, true
}

func entryKind(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "symlink"
	case tar.TypeLink:
		return "hardlink"
	case tar.TypeChar, tar.TypeBlock:
		return "device"
	case tar.TypeFifo:
		return "fifo"
	default:
		return fmt.Sprintf("type %q", t)
	}
}
