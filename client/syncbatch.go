package client

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"os"
	"path"
	"sync"
	"time"
)

// PAXContentType is the PAX record of a bulk upload's archive entry that
// carries the file's Content-Type.
const PAXContentType = "CAIRN.content-type"

// Bulk uploads of Sync (SyncOptions.NoBatch turns them off).
const (
	// BatchFileBytes is the largest file Sync sends in a bulk upload: the
	// server's largest blob (a file of one blob is stored whole from the
	// archive; a larger one is streamed).
	BatchFileBytes = 4 << 20
	// BatchFiles and BatchBytes bound one bulk upload's archive.
	BatchFiles = 512
	BatchBytes = 8 << 20
)

// uploadBatch sends batch as one tar archive (Extract) and records every
// file's outcome. Files that cannot be read locally fail alone; when the
// server has no bulk upload, or the request fails as a whole, the files
// are uploaded one by one instead.
func (s *syncer) uploadBatch(ctx context.Context, batch []syncTask) {
	if s.noBulk.Load() {
		s.uploadEach(ctx, batch)
		return
	}
	buf := batchBufs.Get().(*bytes.Buffer)
	defer func() { buf.Reset(); batchBufs.Put(buf) }()
	scratch := batchScratch.Get().(*[]byte)
	defer batchScratch.Put(scratch)
	tw := tar.NewWriter(buf)
	var sent []syncTask
	sizes := map[string]int64{}
	for _, t := range batch {
		data, mode, mtime, err := readSmall(t.local.abs, scratch)
		if errors.Is(err, errGrew) {
			s.upload(ctx, t)
			continue
		}
		if err != nil {
			s.record(SyncEvent{Op: SyncUpload, Path: s.remote(t.rel), Size: t.local.size, Err: err})
			continue
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: t.rel, Size: int64(len(data)),
			Mode: int64(mode), ModTime: mtime, Format: tar.FormatPAX}
		if ct := mime.TypeByExtension(path.Ext(t.rel)); ct != "" {
			hdr.PAXRecords = map[string]string{PAXContentType: ct}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			s.record(SyncEvent{Op: SyncUpload, Path: s.remote(t.rel), Size: t.local.size, Err: err})
			continue
		}
		if _, err := tw.Write(data); err != nil { // cannot fail on a bytes.Buffer
			panic(err)
		}
		sent = append(sent, t)
		sizes[s.remote(t.rel)] = int64(len(data))
	}
	if len(sent) == 0 {
		return
	}
	if err := tw.Close(); err != nil {
		panic(err)
	}
	// The transport may still read a body after the answer came (an early
	// answer): the buffer is lent only until Extract returns.
	body := &lentReader{r: bytes.NewReader(buf.Bytes())}
	res, err := s.c.Extract(ctx, s.opts.Bucket, s.prefix, body, int64(buf.Len()), false)
	body.revoke()
	if res.Files+res.Failed != int64(len(sent)) || int64(len(res.Errors)) != res.Failed || (err != nil && res.Failed == 0) {
		// The request failed as a whole, or the answer does not account
		// for every file: which files landed is not known. Upload them
		// one by one (a file that did land is simply written again).
		var e *Error
		if res.Files == 0 && res.Failed == 0 && errors.As(err, &e) &&
			(e.Status == 404 || e.Status == 405 || e.Status == 400) && e.Code != "BadArchive" && e.Code != "NoSuchBucket" {
			s.noBulk.Store(true) // an older server: no bulk upload
		}
		if ctx.Err() != nil {
			return
		}
		s.uploadEach(ctx, sent)
		return
	}
	failed := map[string]error{}
	for _, e := range res.Errors {
		failed[e.Path] = &Error{Status: e.Status, Code: e.Code, Message: e.Error}
	}
	for _, t := range sent {
		remote := s.remote(t.rel)
		s.record(SyncEvent{Op: SyncUpload, Path: remote, Size: sizes[remote], Err: failed[remote]})
	}
}

// uploadEach uploads tasks one PUT at a time (concurrently, as Sync does).
func (s *syncer) uploadEach(ctx context.Context, tasks []syncTask) {
	runPool(ctx, 8, len(tasks), func(i int) { s.upload(ctx, tasks[i]) })
}

// Buffers of uploadBatch, reused: an archive (up to BatchBytes plus the
// headers) and one file's content.
var (
	batchBufs    = sync.Pool{New: func() any { return bytes.NewBuffer(make([]byte, 0, BatchBytes+BatchFiles*1024)) }}
	batchScratch = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}
)

// errGrew: a file grew past BatchFileBytes since the walk.
var errGrew = errors.New("grew since the walk")

// readSmall reads a whole small regular file with its mode and mtime, from
// one open descriptor, into *scratch (grown as needed; the result is valid
// until the next call with it). A file larger than BatchFileBytes by now
// fails with errGrew.
func readSmall(name string, scratch *[]byte) ([]byte, os.FileMode, time.Time, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, 0, time.Time{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, time.Time{}, err
	}
	if !st.Mode().IsRegular() {
		return nil, 0, time.Time{}, fmt.Errorf("%s: %w: not a regular file", name, ErrInvalidArgument)
	}
	if st.Size() > BatchFileBytes {
		return nil, 0, time.Time{}, errGrew
	}
	if int64(cap(*scratch)) < st.Size() {
		*scratch = make([]byte, st.Size())
	}
	data := (*scratch)[:st.Size()]
	n, err := io.ReadFull(f, data)
	switch {
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		data = data[:n] // it shrank: what is there now
	case err != nil:
		return nil, 0, time.Time{}, err
	default:
		var one [1]byte
		if m, _ := f.Read(one[:]); m > 0 {
			return nil, 0, time.Time{}, errGrew
		}
	}
	return data, st.Mode().Perm(), st.ModTime(), nil
}

// lentReader reads r until revoked; then it fails.
type lentReader struct {
	mu sync.Mutex
	r  io.Reader
}

func (l *lentReader) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.r == nil {
		return 0, errors.New("request body no longer available")
	}
	return l.r.Read(p)
}

func (l *lentReader) revoke() {
	l.mu.Lock()
	l.r = nil
	l.mu.Unlock()
}
