package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/store"
)

// SnapshotPrefix is where a bucket's snapshots are read over HTTP:
// /_snapshots/BUCKET/NAME/PATH (design 0007), read-only, with the
// bucket's access rules. A directory (a path ending in "/", or the
// snapshot's root) is listed as JSON, like the live bucket's.
const SnapshotPrefix = "/_snapshots/"

// snapshotTarget splits a /_snapshots/ path: bucket, snapshot name, path
// inside it, and whether it names a directory.
func snapshotTarget(p string) (bucket, name, path string, dir bool, err error) {
	rest := strings.TrimPrefix(p, SnapshotPrefix)
	bucket, rest, _ = strings.Cut(rest, "/")
	name, path, _ = strings.Cut(rest, "/")
	if bucket == "" || name == "" {
		return "", "", "", false, fmt.Errorf("%w: %sBUCKET/NAME/PATH", ErrBadPath, SnapshotPrefix)
	}
	dir = path == "" || strings.HasSuffix(path, "/")
	path = strings.TrimSuffix(path, "/")
	if path != "" {
		if err := checkPath(path, false); err != nil {
			return "", "", "", false, err
		}
	}
	return bucket, name, path, dir, nil
}

// serveSnapshot answers GET and HEAD under SnapshotPrefix.
func (s *Server) serveSnapshot(rs *reqState, p string) {
	r := rs.req
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		rs.allow = "GET, HEAD"
		s.writeError(rs, fmt.Errorf("%w: snapshots are read-only", ErrMethodNotAllowed))
		return
	}
	bucket, name, path, dir, err := snapshotTarget(p)
	if err != nil {
		s.writeError(rs, err)
		return
	}
	ctx := r.Context()
	if err := s.authenticate(rs); err != nil {
		s.writeError(rs, err)
		return
	}
	b, err := s.store.Bucket(ctx, bucket)
	if err != nil {
		s.writeError(rs, err)
		return
	}
	act := access.ActionRead
	if dir {
		act = access.ActionList
	}
	if err := s.auth.Authorize(rs.principal, act, bucketResource(b, path)); err != nil {
		s.writeError(rs, err)
		return
	}
	snaps, ok := s.store.(store.Snapshots)
	if !ok {
		s.writeError(rs, fmt.Errorf("%w: this store keeps no snapshots", store.ErrNotFound))
		return
	}
	v, err := snaps.OpenSnapshot(ctx, bucket, name)
	if err != nil {
		s.writeError(rs, err)
		return
	}
	defer v.Close()
	if dir {
		if path != "" {
			info, err := v.Stat(ctx, path)
			if err != nil {
				s.writeError(rs, err)
				return
			}
			if !info.IsDir {
				s.writeError(rs, fmt.Errorf("%w: %s is a file", store.ErrNotFound, path))
				return
			}
		}
		lp, err := parseListParams(r.URL.Query())
		if err != nil {
			s.writeError(rs, err)
			return
		}
		prefix := ""
		if path != "" {
			prefix = path + "/"
		}
		opts := store.ListOptions{Prefix: prefix + lp.prefix, StartAfter: lp.after, Limit: lp.limit, Delimiter: "/"}
		if lp.recursive {
			opts.Delimiter = ""
		}
		res, err := v.List(ctx, opts)
		if err != nil {
			s.writeError(rs, err)
			return
		}
		if res.Entries == nil {
			res.Entries = []store.ObjectInfo{}
		}
		s.writeJSON(rs, http.StatusOK, res)
		return
	}
	obj, err := v.Open(ctx, path)
	if errors.Is(err, store.ErrIsDir) {
		s.redirectSlash(rs)
		return
	}
	if err != nil {
		s.writeError(rs, err)
		return
	}
	defer obj.Close()
	s.serveObject(rs, b, obj)
}
