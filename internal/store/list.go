package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cairn-fs/cairn/internal/meta"
)

// List implements Store.
func (s *Local) List(ctx context.Context, bucket string, opts ListOptions) (ListResult, error) {
	if err := checkPath(bucket, ""); err != nil {
		return ListResult{}, err
	}
	if opts.Limit <= 0 {
		opts.Limit = 1000
	}
	if opts.Delimiter != "" && opts.Delimiter != "/" {
		return ListResult{}, fmt.Errorf("%w: only \"/\" is supported as a delimiter", ErrInvalidName)
	}
	// The directory that holds every key with the prefix.
	dir, namePrefix := "", opts.Prefix
	if i := strings.LastIndexByte(opts.Prefix, '/'); i >= 0 {
		dir, namePrefix = opts.Prefix[:i], opts.Prefix[i+1:]
	}
	var dirIno *meta.Inode
	var err error
	if dir == "" {
		dirIno, err = s.lookup(ctx, bucket, "")
	} else {
		if verr := meta.ValidatePath(dir); verr != nil {
			return ListResult{}, nil // no key can have an invalid prefix
		}
		dirIno, err = s.lookup(ctx, bucket, dir)
	}
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrNotDir) {
			return ListResult{}, nil
		}
		return ListResult{}, err
	}
	if dirIno.Type != meta.TypeDir {
		return ListResult{}, nil
	}
	snap := s.kv.Snapshot()
	defer snap.Close()
	l := &lister{s: s, bucket: bucket, limit: opts.Limit, recursive: opts.Delimiter == "",
		snap: meta.NewReader(snap)}
	dirPrefix := ""
	if dir != "" {
		dirPrefix = dir + "/"
	}
	var after []string
	if opts.StartAfter != "" && opts.StartAfter >= dirPrefix {
		rest := strings.TrimPrefix(opts.StartAfter, dirPrefix)
		if !strings.HasPrefix(opts.StartAfter, dirPrefix) {
			// Not a proper prefix and not smaller: StartAfter sorts after
			// every key under dirPrefix, so nothing is left to list.
			return ListResult{}, nil
		}
		after = splitKeep(rest)
	}
	if err := l.walk(dirIno.Ino, dirPrefix, namePrefix, after); err != nil && !errors.Is(err, errPageFull) {
		return ListResult{}, mapErr(err)
	}
	return l.res, nil
}

// splitKeep splits "a/b/c" into ["a/", "b/", "c"]: directory components
// keep their slash, which is how they sort in a directory.
func splitKeep(p string) []string {
	var out []string
	for {
		i := strings.IndexByte(p, '/')
		if i < 0 {
			if p != "" {
				out = append(out, p)
			}
			return out
		}
		out = append(out, p[:i+1])
		p = p[i+1:]
	}
}

var errPageFull = errors.New("page full")

type lister struct {
	s         *Local
	snap      *meta.Reader
	bucket    string
	limit     int
	recursive bool
	res       ListResult
	last      string
}

func (l *lister) full() bool {
	return len(l.res.Entries)+len(l.res.CommonPrefixes) >= l.limit
}

func (l *lister) emit(key string, ino *meta.Inode, dir bool) error {
	if l.full() {
		l.res.Truncated = true
		l.res.NextToken = l.last
		return errPageFull
	}
	if dir {
		l.res.CommonPrefixes = append(l.res.CommonPrefixes, key)
	} else {
		l.res.Entries = append(l.res.Entries, objectInfo(l.bucket, key, ino))
	}
	l.last = key
	return nil
}

// walk lists directory ino (whose full path prefix is prefix) for names
// starting with namePrefix, resuming after the components in after.
func (l *lister) walk(ino meta.Ino, prefix, namePrefix string, after []string) error {
	start := ""
	if len(after) > 0 {
		start = after[0]
		if strings.HasSuffix(start, "/") && l.recursive {
			// Resume inside the directory first.
			child, err := l.snap.Lookup(l.bucket, strings.TrimSuffix(prefix+start, "/"))
			if err == nil && child.Type == meta.TypeDir {
				if err := l.walk(child.Ino, prefix+start, "", after[1:]); err != nil {
					return err
				}
			}
		}
	} else if namePrefix != "" {
		// Start just before namePrefix: no valid (UTF-8) name contains 0xff.
		b := []byte(namePrefix)
		b[len(b)-1]--
		start = string(b) + "\xff"
	}
	for {
		ents, err := l.snap.ReadDir(ino, start, 256)
		if err != nil {
			return err
		}
		if len(ents) == 0 {
			return nil
		}
		for _, d := range ents {
			start = meta.DirentKeyName(d)
			if !strings.HasPrefix(d.Name, namePrefix) {
				if d.Name > namePrefix {
					return nil
				}
				continue
			}
			full := prefix + d.Name
			if d.Type == meta.TypeDir {
				if !l.recursive {
					if err := l.emit(full+"/", nil, true); err != nil {
						return err
					}
					continue
				}
				if err := l.walk(d.Ino, full+"/", "", nil); err != nil {
					return err
				}
				continue
			}
			child, err := l.snap.Inode(d.Ino)
			if err != nil {
				if errors.Is(err, meta.ErrNotFound) {
					continue
				}
				return err
			}
			if err := l.emit(full, child, false); err != nil {
				return err
			}
		}
	}
}
