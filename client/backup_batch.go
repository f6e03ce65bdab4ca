package client

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"
)

// BatchFile is one file of PutBatch, its content in memory.
type BatchFile struct {
	// Path is relative to PutBatch's prefix.
	Path string
	// Data is the whole content (at most BatchFileBytes to go in the
	// archive; a larger file is sent with its own PUT).
	Data []byte
	// Mode holds the permission bits (0: 0644); ModTime the modification
	// time (zero: the time of the write); ContentType the Content-Type to
	// store ("": by extension on GET).
	Mode        uint32
	ModTime     time.Time
	ContentType string
}

// PutBatch stores files under bucket/prefix with one bulk upload (a tar
// archive, Extract), as Sync does for small files, and returns one error
// per file, in the order of files (nil: that file is stored). Files
// larger than BatchFileBytes are sent with their own PUT. When the server
// has no bulk upload, or the request fails as a whole, or its answer does
// not account for every file, the files are sent again one PUT each (up
// to 8 at a time): an upload replaces a file, so sending one twice is
// harmless. Keep a batch within BatchFiles files and BatchBytes bytes.
// PutBatch blocks until every file has an outcome; it is safe for
// concurrent use.
func (c *Client) PutBatch(ctx context.Context, bucket, prefix string, files []BatchFile) []error {
	errs := make([]error, len(files))
	var bulk, single []int
	for i, f := range files {
		if len(f.Data) > BatchFileBytes {
			single = append(single, i)
		} else {
			bulk = append(bulk, i)
		}
	}
	if len(bulk) > 0 && !c.putBulk(ctx, bucket, prefix, files, bulk, errs) {
		single = append(single, bulk...)
	}
	var wg sync.WaitGroup
	work := make(chan int)
	for range min(8, len(single)) {
		wg.Go(func() {
			for i := range work {
				errs[i] = c.putOne(ctx, bucket, prefix, files[i])
			}
		})
	}
	for _, i := range single {
		work <- i
	}
	close(work)
	wg.Wait()
	return errs
}

func (c *Client) putOne(ctx context.Context, bucket, prefix string, f BatchFile) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := c.Put(ctx, bucket, joinPath(prefix, f.Path), bytes.NewReader(f.Data), int64(len(f.Data)), PutOptions{
		ContentType: f.ContentType, ModTime: f.ModTime, Mode: batchMode(f.Mode),
	})
	return err
}

func batchMode(m uint32) uint32 {
	if m&0o7777 == 0 {
		return 0o644
	}
	return m & 0o7777
}

// putBulk sends files[idx] in one archive and sets errs[i] for each; it
// returns false when which files landed is not known (the caller sends
// them one by one).
func (c *Client) putBulk(ctx context.Context, bucket, prefix string, files []BatchFile, idx []int, errs []error) bool {
	buf := batchBufs.Get().(*bytes.Buffer)
	defer func() { buf.Reset(); batchBufs.Put(buf) }()
	tw := tar.NewWriter(buf)
	remote := make(map[string]int, len(idx))
	for _, i := range idx {
		f := files[i]
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.Path, Size: int64(len(f.Data)),
			Mode: int64(batchMode(f.Mode)), ModTime: f.ModTime, Format: tar.FormatPAX}
		if hdr.ModTime.IsZero() {
			hdr.ModTime = time.Now()
		}
		if f.ContentType != "" {
			hdr.PAXRecords = map[string]string{PAXContentType: f.ContentType}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			errs[i] = fmt.Errorf("put %s/%s: %w: %w", bucket, joinPath(prefix, f.Path), ErrInvalidArgument, err)
			continue
		}
		if _, err := tw.Write(f.Data); err != nil { // cannot fail on a bytes.Buffer
			panic(err)
		}
		remote[joinPath(prefix, f.Path)] = i
	}
	if len(remote) == 0 {
		return true
	}
	if err := tw.Close(); err != nil {
		panic(err)
	}
	body := &lentReader{r: bytes.NewReader(buf.Bytes())}
	res, err := c.Extract(ctx, bucket, prefix, body, int64(buf.Len()), false)
	body.revoke()
	if res.Files+res.Failed != int64(len(remote)) || int64(len(res.Errors)) != res.Failed || (err != nil && res.Failed == 0) {
		if ctx.Err() != nil {
			for _, i := range remote {
				errs[i] = fmt.Errorf("put %s/%s: %w", bucket, joinPath(prefix, files[i].Path), ctx.Err())
			}
			return true
		}
		return false
	}
	for _, e := range res.Errors {
		if i, ok := remote[e.Path]; ok {
			errs[i] = fmt.Errorf("put %s/%s: %w", bucket, e.Path, &Error{Status: e.Status, Code: e.Code, Message: e.Error})
		}
	}
	return true
}
