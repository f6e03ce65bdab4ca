package clienttest

import (
	"archive/tar"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-fs/cairn/client"
)

// Server is a running fake Cairn node. Its methods are safe for concurrent use.
type Server struct {
	// URL is the base URL of the fake, e.g. "http://127.0.0.1:41234".
	URL string
	// AdminKey is the key writes and admin calls need ("" = none needed).
	AdminKey string

	ts *httptest.Server

	mu       sync.Mutex
	buckets  map[string]*bucket
	counts   map[string]int // "METHOD kind" -> number of requests
	failPut  func(bucket, path string) int
	nowClock func() time.Time
	// noExtract: answer bulk uploads as a server without them does.
	noExtract bool
	extracts  int
}

type bucket struct {
	info  client.BucketInfo
	files map[string]*file
	dirs  map[string]bool // every directory, explicit or implied, without slashes at the ends
}

type file struct {
	data []byte
	info client.ObjectInfo
}

// NewServer starts a fake node that requires adminKey for writes ("" = no
// auth at all). Close it when done.
func NewServer(adminKey string) *Server {
	s := &Server{
		AdminKey: adminKey,
		buckets:  map[string]*bucket{},
		counts:   map[string]int{},
		nowClock: time.Now,
	}
	s.ts = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.ts.URL
	return s
}

// Close shuts the server down and waits for its requests to finish.
func (s *Server) Close() { s.ts.Close() }

// FailPut installs a hook called for every file PUT: a non-zero status it
// returns fails the request with that status (500, 507, ...) and stores
// nothing. nil removes the hook.
func (s *Server) FailPut(fn func(bucket, path string) int) {
	s.mu.Lock()
	s.failPut = fn
	s.mu.Unlock()
}

// Extracts returns how many bulk uploads were asked for, served or not.
func (s *Server) Extracts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.extracts
}

// NoExtract makes the fake answer bulk uploads (POST ?extract=tar) as a
// server without them does (405), or serve them again (false).
func (s *Server) NoExtract(off bool) {
	s.mu.Lock()
	s.noExtract = off
	s.mu.Unlock()
}

// Count returns how many requests of a kind were served. Kinds: "PUT",
// "PUT dir", "GET", "HEAD", "DELETE", "POST" (rename), "EXTRACT" (a bulk
// upload), "LIST" (a directory listing page), "ADMIN" (bucket calls).
func (s *Server) Count(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[kind]
}

// ResetCounts sets every request count back to zero.
func (s *Server) ResetCounts() {
	s.mu.Lock()
	s.counts = map[string]int{}
	s.mu.Unlock()
}

// File returns the content and info of bucket/path, and whether it exists.
func (s *Server) File(bucketName, path string) ([]byte, client.ObjectInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buckets[bucketName]
	if b == nil {
		return nil, client.ObjectInfo{}, false
	}
	f := b.files[path]
	if f == nil {
		return nil, client.ObjectInfo{}, false
	}
	return append([]byte(nil), f.data...), f.info, true
}

// Paths returns the sorted paths of every file in a bucket.
func (s *Server) Paths(bucketName string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buckets[bucketName]
	if b == nil {
		return nil
	}
	var out []string
	for p := range b.files {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Dirs returns the sorted paths of every directory in a bucket.
func (s *Server) Dirs(bucketName string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buckets[bucketName]
	if b == nil {
		return nil
	}
	var out []string
	for p := range b.dirs {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg, "code": code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// authOK checks the admin key; it writes the error answer when it fails.
func (s *Server) authOK(w http.ResponseWriter, r *http.Request) bool {
	if s.AdminKey == "" {
		return true
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		writeErr(w, http.StatusUnauthorized, "Unauthorized", "missing key")
		return false
	}
	if h != "Bearer "+s.AdminKey {
		writeErr(w, http.StatusForbidden, "AccessDenied", "wrong key")
		return false
	}
	return true
}

func (s *Server) count(kind string) {
	s.mu.Lock()
	s.counts[kind]++
	s.mu.Unlock()
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/_cairn/health" {
		_, _ = io.WriteString(w, "ok")
		return
	}
	if r.URL.Path == "/_cairn/buckets" || strings.HasPrefix(r.URL.Path, "/_cairn/buckets/") {
		s.count("ADMIN")
		if s.authOK(w, r) {
			s.serveBuckets(w, r, strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/_cairn/buckets"), "/"))
		}
		return
	}
	name, rest, hasSlash := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if !hasSlash {
		http.Redirect(w, r, "/"+name+"/", http.StatusMovedPermanently)
		return
	}
	dirForm := rest == "" || strings.HasSuffix(rest, "/")
	p := strings.Trim(rest, "/")
	if strings.Contains(p, "//") || strings.HasPrefix(p, "../") || p == ".." || strings.Contains(p, "/../") {
		writeErr(w, http.StatusBadRequest, "InvalidPath", "bad path")
		return
	}
	read := r.Method == http.MethodGet || r.Method == http.MethodHead
	s.mu.Lock()
	b := s.buckets[name]
	public := b != nil && b.info.Public
	noExtract := s.noExtract
	if r.Method == http.MethodPost && r.URL.Query().Has("extract") {
		s.extracts++
	}
	s.mu.Unlock()
	if !(read && public) && !s.authOK(w, r) {
		return
	}
	if b == nil {
		writeErr(w, http.StatusNotFound, "NoSuchBucket", "no such bucket")
		return
	}
	switch {
	case r.Method == http.MethodPut && dirForm:
		s.count("PUT dir")
		s.mkdir(w, b, p)
	case r.Method == http.MethodPut:
		s.count("PUT")
		s.put(w, r, name, b, p)
	case read && dirForm:
		s.count("LIST")
		s.list(w, r, b, p)
	case read:
		s.count(r.Method)
		s.get(w, r, b, p)
	case r.Method == http.MethodDelete:
		s.count("DELETE")
		s.delete(w, b, p)
	case r.Method == http.MethodPost && r.URL.Query().Has("extract") && !noExtract:
		s.count("EXTRACT")
		s.extract(w, r, name, b, p)
	case r.Method == http.MethodPost && r.URL.Query().Has("rename-to"):
		s.count("POST")
		s.rename(w, b, p, strings.Trim(r.URL.Query().Get("rename-to"), "/"))
	default:
		writeErr(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "method not allowed")
	}
}

func (s *Server) serveBuckets(w http.ResponseWriter, r *http.Request, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case name == "" && r.Method == http.MethodPost:
		var in client.BucketInfo
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || !validBucket(in.Name) {
			writeErr(w, http.StatusBadRequest, "InvalidBucketName", "bad bucket")
			return
		}
		if s.buckets[in.Name] != nil {
			writeErr(w, http.StatusConflict, "BucketAlreadyExists", "bucket exists")
			return
		}
		in.Created = s.nowClock().UTC()
		s.buckets[in.Name] = &bucket{info: in, files: map[string]*file{}, dirs: map[string]bool{}}
		writeJSON(w, http.StatusCreated, in)
	case name == "" && r.Method == http.MethodGet:
		out := []client.BucketInfo{}
		for _, b := range s.buckets {
			out = append(out, b.info)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		writeJSON(w, http.StatusOK, out)
	case name == "":
		writeErr(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "method not allowed")
	default:
		b := s.buckets[name]
		if b == nil {
			writeErr(w, http.StatusNotFound, "NoSuchBucket", "no such bucket")
			return
		}
		switch r.Method {
		case http.MethodGet:
			writeJSON(w, http.StatusOK, b.info)
		case http.MethodPatch:
			var in map[string]json.RawMessage
			if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
				writeErr(w, http.StatusBadRequest, "MalformedJSON", err.Error())
				return
			}
			nb := b.info
			for k, v := range in {
				var err error
				switch k {
				case "public":
					err = json.Unmarshal(v, &nb.Public)
				case "checksum_sidecars":
					err = json.Unmarshal(v, &nb.ChecksumSidecars)
				case "cache_control":
					err = json.Unmarshal(v, &nb.CacheControl)
				case "trash_seconds":
					err = json.Unmarshal(v, &nb.TrashSeconds)
				default:
					err = fmt.Errorf("unknown field %q", k)
				}
				if err != nil {
					writeErr(w, http.StatusBadRequest, "InvalidArgument", err.Error())
					return
				}
			}
			b.info = nb
			writeJSON(w, http.StatusOK, b.info)
		case http.MethodDelete:
			if len(b.files) > 0 || len(b.dirs) > 0 {
				writeErr(w, http.StatusConflict, "BucketNotEmpty", "bucket not empty")
				return
			}
			delete(s.buckets, name)
			w.WriteHeader(http.StatusNoContent)
		default:
			writeErr(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "method not allowed")
		}
	}
}

func validBucket(name string) bool {
	if len(name) < 1 || len(name) > 63 {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// addParents records every ancestor directory of p; the caller holds s.mu.
// It fails if an ancestor is a file.
func addParents(b *bucket, p string) bool {
	var parents []string
	for d := parentOf(p); d != ""; d = parentOf(d) {
		if b.files[d] != nil {
			return false
		}
		parents = append(parents, d)
	}
	for _, d := range parents {
		b.dirs[d] = true
	}
	return true
}

func parentOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return ""
	}
	return p[:i]
}

func (s *Server) mkdir(w http.ResponseWriter, b *bucket, p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p == "" {
		w.WriteHeader(http.StatusOK)
		return
	}
	if b.files[p] != nil || !addParents(b, p) {
		writeErr(w, http.StatusConflict, "NotADirectory", "a file is in the way")
		return
	}
	b.dirs[p] = true
	w.WriteHeader(http.StatusCreated)
}

func (s *Server) put(w http.ResponseWriter, r *http.Request, name string, b *bucket, p string) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		writeErr(w, http.StatusBadRequest, "IncompleteBody", err.Error())
		return
	}
	if r.ContentLength >= 0 && int64(len(data)) != r.ContentLength {
		writeErr(w, http.StatusBadRequest, "IncompleteBody", "short body")
		return
	}
	mtime := s.nowClock()
	if v := r.Header.Get("X-Cairn-Mtime"); v != "" {
		t, err := client.ParseMtime(v)
		if err != nil {
			writeErr(w, http.StatusBadRequest, "InvalidArgument", "bad X-Cairn-Mtime")
			return
		}
		mtime = t
	}
	mode := uint32(0o644)
	if v := r.Header.Get("X-Cairn-Mode"); v != "" {
		m, err := strconv.ParseUint(v, 8, 32)
		if err != nil {
			writeErr(w, http.StatusBadRequest, "InvalidArgument", "bad X-Cairn-Mode")
			return
		}
		mode = uint32(m)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	info, old, status, code, msg := s.storeLocked(name, b, p, data, mtime, mode, r.Header.Get("Content-Type"),
		r.Header.Get("If-Match"), r.Header.Get("If-None-Match") == "*")
	if status != 0 {
		writeErr(w, status, code, msg)
		return
	}
	sh := sha256.Sum256(data)
	w.Header().Set("ETag", `"`+info.ETag+`"`)
	w.Header().Set("Repr-Digest", "sha-256=:"+base64.StdEncoding.EncodeToString(sh[:])+":")
	status = http.StatusOK
	if old == nil {
		status = http.StatusCreated
	}
	writeJSON(w, status, info)
}

// storeLocked stores one file (PUT or an archive entry); a non-zero status
// is a failure with its code and message. old is the file replaced.
func (s *Server) storeLocked(name string, b *bucket, p string, data []byte, mtime time.Time, mode uint32, ctype, ifMatch string, ifNoneMatchAny bool) (info client.ObjectInfo, old *file, status int, code, msg string) {
	md := md5.Sum(data)
	sh := sha256.Sum256(data)
	info = client.ObjectInfo{
		Bucket: name, Path: p, Size: int64(len(data)), ModTime: mtime.UTC(),
		ETag: hex.EncodeToString(md[:]), SHA256: hex.EncodeToString(sh[:]),
		ContentType: ctype, Mode: mode,
	}
	if s.failPut != nil {
		if st := s.failPut(name, p); st != 0 {
			return info, nil, st, "InjectedFailure", "injected failure"
		}
	}
	old = b.files[p]
	if ifMatch != "" && (old == nil || strings.Trim(ifMatch, `"`) != old.info.ETag) {
		return info, old, http.StatusPreconditionFailed, "PreconditionFailed", "If-Match failed"
	}
	if ifNoneMatchAny && old != nil {
		return info, old, http.StatusPreconditionFailed, "PreconditionFailed", "file exists"
	}
	if b.dirs[p] {
		return info, old, http.StatusConflict, "IsADirectory", "is a directory"
	}
	if !addParents(b, p) {
		return info, old, http.StatusConflict, "NotADirectory", "a parent is a file"
	}
	b.files[p] = &file{data: data, info: info}
	return info, old, 0, "", ""
}

// extract serves a bulk upload (POST ?extract=tar): regular files only,
// per-file results as the real server gives them.
func (s *Server) extract(w http.ResponseWriter, r *http.Request, name string, b *bucket, prefix string) {
	if r.URL.Query().Get("extract") != "tar" {
		writeErr(w, http.StatusBadRequest, "BadRequest", "extract: tar only in the fake")
		return
	}
	var res client.ExtractResult
	status := http.StatusOK
	tr := tar.NewReader(r.Body)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			res.Error, res.Code = err.Error(), "BadArchive"
			writeJSON(w, http.StatusBadRequest, res)
			return
		}
		p := strings.Trim(strings.TrimPrefix(hdr.Name, "./"), "/")
		if prefix != "" {
			p = prefix + "/" + p
		}
		if hdr.Typeflag != tar.TypeReg {
			res.Skipped++
			res.SkippedItems = append(res.SkippedItems, client.ExtractIssue{Path: p, Reason: "not a file"})
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			res.Error, res.Code = err.Error(), "BadArchive"
			writeJSON(w, http.StatusBadRequest, res)
			return
		}
		s.mu.Lock()
		_, _, st, code, msg := s.storeLocked(name, b, p, data, hdr.ModTime, uint32(hdr.Mode)&0o7777, hdr.PAXRecords[client.PAXContentType], "", false)
		s.mu.Unlock()
		if st != 0 {
			if res.Failed == 0 {
				status = st
				res.Code = code
			}
			res.Failed++
			res.Errors = append(res.Errors, client.ExtractIssue{Path: p, Status: st, Code: code, Error: msg})
			continue
		}
		res.Files++
		res.Bytes += int64(len(data))
	}
	if res.Failed > 0 {
		res.Error = fmt.Sprintf("%d entries failed", res.Failed)
	}
	writeJSON(w, status, res)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, b *bucket, p string) {
	s.mu.Lock()
	f := b.files[p]
	isDir := b.dirs[p]
	s.mu.Unlock()
	if f == nil {
		if isDir {
			http.Redirect(w, r, r.URL.Path+"/", http.StatusMovedPermanently)
			return
		}
		writeErr(w, http.StatusNotFound, "NoSuchKey", "no such file")
		return
	}
	h := w.Header()
	ct := f.info.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	h.Set("ETag", `"`+f.info.ETag+`"`)
	h.Set("Last-Modified", f.info.ModTime.UTC().Format(http.TimeFormat))
	h.Set("Accept-Ranges", "bytes")
	sh, _ := hex.DecodeString(f.info.SHA256)
	h.Set("Repr-Digest", "sha-256=:"+base64.StdEncoding.EncodeToString(sh)+":")
	size := int64(len(f.data))
	start, end := int64(0), size
	status := http.StatusOK
	if rg := r.Header.Get("Range"); rg != "" {
		spec, ok := strings.CutPrefix(rg, "bytes=")
		if ok && !strings.Contains(spec, ",") {
			a, bb, _ := strings.Cut(spec, "-")
			st, err1 := strconv.ParseInt(a, 10, 64)
			en, err2 := strconv.ParseInt(bb, 10, 64)
			switch {
			case err1 == nil && st >= size:
				h.Set("Content-Range", fmt.Sprintf("bytes */%d", size))
				writeErr(w, http.StatusRequestedRangeNotSatisfiable, "InvalidRange", "range not satisfiable")
				return
			case err1 == nil && bb == "":
				start, status = st, http.StatusPartialContent
			case err1 == nil && err2 == nil && en >= st:
				start, end, status = st, min(en+1, size), http.StatusPartialContent
			}
		}
	}
	if status == http.StatusPartialContent {
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end-1, size))
	}
	h.Set("Content-Length", strconv.FormatInt(end-start, 10))
	w.WriteHeader(status)
	if r.Method == http.MethodGet {
		_, _ = w.Write(f.data[start:end])
	}
}

// listItem is an entry or a common prefix of a listing, sorted by key.
type listItem struct {
	key    string
	entry  *client.ObjectInfo
	prefix bool
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, b *bucket, dir string) {
	q := r.URL.Query()
	limit := 1000
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeErr(w, http.StatusBadRequest, "InvalidArgument", "bad limit")
			return
		}
		limit = min(n, 10000)
	}
	after := q.Get("after")
	recursive := q.Get("recursive") == "1" || q.Get("recursive") == "true"
	base := ""
	if dir != "" {
		base = dir + "/"
	}
	full := base + q.Get("prefix")

	s.mu.Lock()
	if dir != "" && !b.dirs[dir] {
		s.mu.Unlock()
		writeErr(w, http.StatusNotFound, "NoSuchKey", "no such directory")
		return
	}
	var items []listItem
	for p, f := range b.files {
		if !strings.HasPrefix(p, full) {
			continue
		}
		if !recursive && strings.Contains(p[len(base):], "/") {
			continue
		}
		info := f.info
		items = append(items, listItem{key: p, entry: &info})
	}
	if !recursive {
		for d := range b.dirs {
			if strings.HasPrefix(d, full) && d != dir && !strings.Contains(d[len(base):], "/") {
				items = append(items, listItem{key: d + "/", prefix: true})
			}
		}
	}
	s.mu.Unlock()

	sort.Slice(items, func(i, j int) bool { return items[i].key < items[j].key })
	out := client.ListResult{Entries: []client.ObjectInfo{}}
	n := 0
	for _, it := range items {
		if after != "" && it.key <= after {
			continue
		}
		if n == limit {
			out.Truncated = true
			break
		}
		n++
		out.NextToken = it.key
		if it.prefix {
			out.CommonPrefixes = append(out.CommonPrefixes, it.key)
		} else {
			out.Entries = append(out.Entries, *it.entry)
		}
	}
	if !out.Truncated {
		out.NextToken = ""
	}
	if !strings.Contains(r.Header.Get("Accept"), "application/json") {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, "<html><body>listing</body></html>")
		return
	}
	if r.Method == http.MethodHead {
		w.Header().Set("Content-Type", "application/json")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) delete(w http.ResponseWriter, b *bucket, p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.files[p] != nil {
		delete(b.files, p)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if !b.dirs[p] {
		writeErr(w, http.StatusNotFound, "NoSuchKey", "no such file")
		return
	}
	for q := range b.files {
		if strings.HasPrefix(q, p+"/") {
			writeErr(w, http.StatusConflict, "DirectoryNotEmpty", "directory not empty")
			return
		}
	}
	for q := range b.dirs {
		if strings.HasPrefix(q, p+"/") {
			writeErr(w, http.StatusConflict, "DirectoryNotEmpty", "directory not empty")
			return
		}
	}
	delete(b.dirs, p)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) rename(w http.ResponseWriter, b *bucket, src, dst string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if dst == "" || src == "" {
		writeErr(w, http.StatusBadRequest, "InvalidPath", "bad path")
		return
	}
	if f := b.files[src]; f != nil {
		if b.dirs[dst] || !addParents(b, dst) {
			writeErr(w, http.StatusConflict, "IsADirectory", "destination is a directory")
			return
		}
		delete(b.files, src)
		f.info.Path = dst
		b.files[dst] = f
		writeJSON(w, http.StatusOK, f.info)
		return
	}
	if !b.dirs[src] {
		writeErr(w, http.StatusNotFound, "NoSuchKey", "no such file")
		return
	}
	if b.files[dst] != nil || b.dirs[dst] || !addParents(b, dst) {
		writeErr(w, http.StatusConflict, "Exists", "destination exists")
		return
	}
	for q, f := range b.files {
		if rest, ok := strings.CutPrefix(q, src+"/"); ok {
			delete(b.files, q)
			f.info.Path = dst + "/" + rest
			b.files[f.info.Path] = f
		}
	}
	for q := range b.dirs {
		if rest, ok := strings.CutPrefix(q, src+"/"); ok {
			delete(b.dirs, q)
			b.dirs[dst+"/"+rest] = true
		}
	}
	delete(b.dirs, src)
	b.dirs[dst] = true
	w.WriteHeader(http.StatusOK)
}
