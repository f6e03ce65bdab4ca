package backup

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/cairn-fs/cairn/client"
)

// Found is a file at a location, as its listing shows it.
type Found struct {
	// Size in bytes.
	Size int64
	// SHA256 is the content's hex SHA-256 when the listing gives it (a
	// Cairn location does), else "".
	SHA256 string
}

// File is a file whose content is in memory and checked against
// Entry.SHA256.
type File struct {
	Path  string
	Entry Entry
	Data  []byte
}

// Location is where a backup is kept (a directory, a Cairn bucket, an S3
// bucket) and, for a restore, read from. Paths are relative to its root
// and pass CheckPath. Every method is safe for concurrent use and blocks
// until done or ctx is done.
type Location interface {
	// String names the location for messages (the URL it was parsed from).
	String() string
	// Inventory calls fn with each file under the root, MetaDir left out,
	// until fn fails (its error is returned).
	Inventory(ctx context.Context, fn func(p string, f Found) error) error
	// ReadMeta opens MetaDir/name; ErrNoMeta when there is none.
	ReadMeta(ctx context.Context, name string) (io.ReadCloser, error)
	// WriteMeta replaces MetaDir/name atomically and durably with r's
	// content, of e.Size bytes and SHA-256 e.SHA256: a reader sees the
	// old content or the new, never a part.
	WriteMeta(ctx context.Context, name string, e Entry, r io.Reader) error
	// RemoveMeta removes MetaDir/name (no error when it is not there).
	RemoveMeta(ctx context.Context, name string) error
	// Open reads the file at p.
	Open(ctx context.Context, p string) (io.ReadCloser, error)
	// Holds reports whether the file at p has exactly e's content, reading
	// what it must to know (a hash of a local file, an object's metadata).
	Holds(ctx context.Context, p string, e Entry) (bool, error)
	// Batch is the most files and bytes PutSmall is best given at once
	// (1 file: one at a time).
	Batch() (files int, bytes int64)
	// PutSmall stores files and returns one error per file (nil: stored).
	PutSmall(ctx context.Context, files []File) []error
	// PutStream stores the file p, read from r, which yields e.Size bytes
	// and fails before the last one when the content is not e's: then
	// nothing is stored at p.
	PutStream(ctx context.Context, p string, e Entry, r io.Reader) error
	// Remove removes the file at p (no error when it is not there).
	Remove(ctx context.Context, p string) error
	// RemoveDirs removes the directories dirs (deepest first) that are
	// empty; the others stay. Best effort: it reports nothing.
	RemoveDirs(ctx context.Context, dirs []string)
	// SetMeta gives the file at p e's mode and mtime without rewriting
	// it; false when the location keeps no such metadata of its own (the
	// manifest keeps them).
	SetMeta(ctx context.Context, p string, e Entry) (bool, error)
	// Flush makes every write so far durable.
	Flush(ctx context.Context) error
	// Close releases the location.
	Close() error
}

// localCopier marks a location whose files are cheaper to copy from each
// other than to fetch again (a local directory): a file whose content the
// destination holds at another path is copied from there.
type localCopier interface{ copiesLocally() }

// LocationOptions are what ParseLocation needs besides the URL.
type LocationOptions struct {
	// CairnKey is the admin key of a cairn:// location's cluster.
	CairnKey string
	// S3 configures s3:// locations (credentials, endpoint).
	S3 S3Options
	// UserAgent is sent to Cairn and S3 servers.
	UserAgent string
	// Create makes a local directory that does not exist (a backup's
	// destination); without it a missing directory is an error.
	Create bool
}

// Syntax is the destination syntax, for messages and help.
const Syntax = "DIR, file:///DIR, cairn://HOST:PORT/BUCKET[/PREFIX] (cairns:// for HTTPS), or s3://BUCKET[/PREFIX]"

// ParseLocation opens the location arg names:
//
//	/backups/web, ./web, file:///backups/web   a local directory
//	cairn://HOST:PORT/BUCKET[/PREFIX]          a Cairn cluster, over HTTP
//	cairns://HOST:PORT/BUCKET[/PREFIX]         the same over HTTPS
//	s3://BUCKET[/PREFIX]                       an S3 bucket (opts.S3)
//
// It does no network I/O; a directory is opened (and made with Create).
func ParseLocation(arg string, opts LocationOptions) (Location, error) {
	scheme, rest, ok := strings.Cut(arg, "://")
	if !ok {
		return OpenDir(arg, opts.Create)
	}
	switch strings.ToLower(scheme) {
	case "file":
		u, err := url.Parse(arg)
		if err != nil || (u.Host != "" && u.Host != "localhost") || u.Path == "" {
			return nil, fmt.Errorf("%q: a file URL is file:///ABSOLUTE/PATH", arg)
		}
		return OpenDir(filepath.FromSlash(u.Path), opts.Create)
	case "cairn", "cairns":
		host, bp, _ := strings.Cut(rest, "/")
		bucket, prefix, _ := strings.Cut(strings.Trim(bp, "/"), "/")
		if host == "" || bucket == "" {
			return nil, fmt.Errorf("%q: expected %s://HOST:PORT/BUCKET[/PREFIX]", arg, scheme)
		}
		proto := "http"
		if strings.ToLower(scheme) == "cairns" {
			proto = "https"
		}
		ua := opts.UserAgent
		if ua == "" {
			ua = "cairn-backup"
		}
		c := client.New(proto+"://"+host, opts.CairnKey, client.WithUserAgent(ua))
		return NewCairn(c, bucket, prefix, arg)
	case "s3":
		bucket, prefix, _ := strings.Cut(strings.Trim(rest, "/"), "/")
		if bucket == "" {
			return nil, fmt.Errorf("%q: expected s3://BUCKET[/PREFIX]", arg)
		}
		return NewS3(bucket, prefix, arg, opts.S3, opts.UserAgent)
	case "http", "https":
		return nil, fmt.Errorf("%q: name another Cairn cluster as cairn://HOST:PORT/BUCKET[/PREFIX] (cairns:// for HTTPS)", arg)
	}
	return nil, fmt.Errorf("%q: unknown scheme %q: expected %s", arg, scheme, Syntax)
}

// cleanPrefix trims a prefix's slashes and checks it.
func cleanPrefix(prefix string) (string, error) {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		return "", nil
	}
	if err := CheckPath(prefix); err != nil {
		return "", fmt.Errorf("prefix: %w", err)
	}
	return prefix, nil
}

// joinKey joins a prefix and a relative path with "/".
func joinKey(prefix, p string) string {
	if prefix == "" {
		return p
	}
	return prefix + "/" + p
}
