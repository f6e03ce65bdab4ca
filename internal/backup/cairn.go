package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cairn-fs/cairn/client"
)

// cairnLocation is a prefix of a bucket of a Cairn cluster, written with
// the native API: small files in bulk tar uploads (client.PutBatch, as
// cairn sync does), larger ones with a PUT each. Its listing gives every
// file's SHA-256, so what it holds is known without reading it.
type cairnLocation struct {
	c      *client.Client
	bucket string
	prefix string // no leading or trailing slash
	name   string
}

// NewCairn returns the location bucket/prefix of the cluster c talks to;
// name is for messages ("" makes one). It does no I/O.
func NewCairn(c *client.Client, bucket, prefix, name string) (Location, error) {
	if bucket == "" || strings.Contains(bucket, "/") {
		return nil, fmt.Errorf("bad bucket name %q", bucket)
	}
	prefix, err := cleanPrefix(prefix)
	if err != nil {
		return nil, err
	}
	if name == "" {
		name = c.BaseURL() + "/" + joinKey(bucket, prefix)
	}
	return &cairnLocation{c: c, bucket: bucket, prefix: prefix, name: name}, nil
}

func (l *cairnLocation) String() string { return l.name }
func (l *cairnLocation) Close() error   { return nil }

func (l *cairnLocation) key(p string) string { return joinKey(l.prefix, p) }

func (l *cairnLocation) Inventory(ctx context.Context, fn func(p string, f Found) error) error {
	base := ""
	if l.prefix != "" {
		base = l.prefix + "/"
	}
	err := l.c.ListPages(ctx, l.bucket, l.prefix, client.ListOptions{Recursive: true, Limit: 10000}, func(page client.ListResult) error {
		for _, e := range page.Entries {
			rel, ok := strings.CutPrefix(strings.Trim(e.Path, "/"), base)
			if !ok || e.IsDir || CheckPath(rel) != nil {
				continue // MetaDir, and anything that is not ours
			}
			if err := fn(rel, Found{Size: e.Size, SHA256: strings.ToLower(e.SHA256)}); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, client.ErrNotFound) {
		// No such prefix yet (fine), or no such bucket (not).
		if _, berr := l.c.Bucket(ctx, l.bucket); berr != nil {
			if errors.Is(berr, client.ErrNotFound) {
				return fmt.Errorf("%s: bucket %s does not exist on %s: create it first (cairn bucket create %s, with the options it needs)",
					l.name, l.bucket, l.c.BaseURL(), l.bucket)
			}
			return fmt.Errorf("%s: %w", l.name, berr)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", l.name, err)
	}
	return nil
}

func (l *cairnLocation) ReadMeta(ctx context.Context, name string) (io.ReadCloser, error) {
	body, _, err := l.c.Get(ctx, l.bucket, l.key(MetaDir+"/"+name))
	if errors.Is(err, client.ErrNotFound) {
		return nil, fmt.Errorf("%s/%s/%s: %w", l.name, MetaDir, name, ErrNoMeta)
	}
	if err != nil {
		return nil, err
	}
	return body, nil
}

// WriteMeta is one PUT: the server replaces a file atomically, once the
// new content is durable on its write quorum.
func (l *cairnLocation) WriteMeta(ctx context.Context, name string, e Entry, r io.Reader) error {
	return l.PutStream(ctx, MetaDir+"/"+name, e, r)
}

func (l *cairnLocation) RemoveMeta(ctx context.Context, name string) error {
	err := l.c.Delete(ctx, l.bucket, l.key(MetaDir+"/"+name))
	if errors.Is(err, client.ErrNotFound) {
		return nil
	}
	return err
}

func (l *cairnLocation) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	body, _, err := l.c.Get(ctx, l.bucket, l.key(p))
	return body, err
}

func (l *cairnLocation) Holds(ctx context.Context, p string, e Entry) (bool, error) {
	info, err := l.c.Stat(ctx, l.bucket, l.key(p))
	if errors.Is(err, client.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return !info.IsDir && info.Size == e.Size && strings.EqualFold(info.SHA256, e.SHA256), nil
}

func (l *cairnLocation) Batch() (int, int64) { return client.BatchFiles, client.BatchBytes }

func (l *cairnLocation) PutSmall(ctx context.Context, files []File) []error {
	batch := make([]client.BatchFile, len(files))
	for i, f := range files {
		batch[i] = client.BatchFile{Path: f.Path, Data: f.Data, Mode: f.Entry.Mode,
			ModTime: f.Entry.Mtime, ContentType: f.Entry.ContentType}
	}
	return l.c.PutBatch(ctx, l.bucket, l.prefix, batch)
}

// PutStream sends r as the body of a PUT of e.Size bytes: when r fails
// before its last byte (a wrong content), the body is cut short and the
// server stores nothing. The answer's SHA-256 is checked too.
func (l *cairnLocation) PutStream(ctx context.Context, p string, e Entry, r io.Reader) error {
	mode := e.Mode & 0o7777
	if mode == 0 {
		mode = 0o644
	}
	info, err := l.c.Put(ctx, l.bucket, l.key(p), r, e.Size, client.PutOptions{
		ContentType: e.ContentType, ModTime: e.Mtime, Mode: mode})
	if err != nil {
		return err
	}
	if e.SHA256 != "" && info.SHA256 != "" && !strings.EqualFold(info.SHA256, e.SHA256) {
		return fmt.Errorf("%w: %s/%s stored as %s, want %s", ErrDigest, l.name, p, short(info.SHA256), short(e.SHA256))
	}
	return nil
}

func (l *cairnLocation) Remove(ctx context.Context, p string) error {
	err := l.c.Delete(ctx, l.bucket, l.key(p))
	if errors.Is(err, client.ErrNotFound) {
		return nil
	}
	return err
}

func (l *cairnLocation) RemoveDirs(ctx context.Context, dirs []string) {
	for _, d := range dirs {
		if ctx.Err() != nil {
			return
		}
		// A directory that is not empty answers 409 and stays.
		_ = l.c.Delete(ctx, l.bucket, l.key(d))
	}
}

// SetMeta: a file's mode and mtime change only with its content over the
// native API; the manifest keeps them.
func (l *cairnLocation) SetMeta(ctx context.Context, p string, e Entry) (bool, error) {
	return false, nil
}

// Flush: every write was acknowledged durable.
func (l *cairnLocation) Flush(ctx context.Context) error { return nil }

// listsDigests marks a location whose Inventory gives each file's SHA-256:
// after copying, a run lists it again and checks every copied file.
func (l *cairnLocation) listsDigests() {}
