package s3

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"strings"

	"github.com/cairn-fs/cairn/internal/store"
)

// A bucket's snapshots (design 0007) read over S3 by a key convention, as
// the mount shows them:
//
//	.snapshots/NAME/PATH   the file PATH of snapshot NAME: GetObject and
//	                       HeadObject (ranges, conditionals, response-*),
//	                       GetObjectAcl, a copy source (CopyObject,
//	                       UploadPartCopy), as for a live key
//	prefix .snapshots/NAME/...  ListObjects V1/V2 and ListObjectVersions
//	                       (version "null") list the snapshot
//	prefix .snapshots/ with delimiter /  the snapshots' names as common
//	                       prefixes (.snapshots/NAME/)
//
// A listing without that prefix never shows .snapshots/ (it is hidden, as
// in the mount), and the key is reserved: a live file there is not served
// over S3. Snapshots are read-only: a PUT, POST or DELETE of a key under
// .snapshots/ is AccessDenied. Access is checked as for PATH in the live
// bucket (grants by prefix, bucket ACL and policy), with the object ACL
// the file had when the snapshot was taken.
const snapshotsDir = ".snapshots"

// errSnapshotReadOnly answers a write under .snapshots/.
var errSnapshotReadOnly = &Error{"AccessDenied", http.StatusForbidden,
	"Access Denied: keys under .snapshots/ read the bucket's snapshots, which are read-only."}

// isSnapshotKey reports whether key is under .snapshots/ (or is it).
func isSnapshotKey(key string) bool {
	return key == snapshotsDir || strings.HasPrefix(key, snapshotsDir+"/")
}

// hidden reports whether a path of the bucket is left out of S3 listings:
// the multipart uploads' parts and the reserved .snapshots.
func hidden(path string) bool { return isInternal(path) || isSnapshotKey(path) }

// snapshotKey splits a key under .snapshots/: the snapshot's name and the
// path inside it ("" for its root). ok is false for .snapshots itself
// and for .snapshots/NAME without a slash after the name.
func snapshotKey(key string) (name, path string, ok bool) {
	rest, found := strings.CutPrefix(key, snapshotsDir+"/")
	if !found {
		return "", "", false
	}
	name, path, found = strings.Cut(rest, "/")
	return name, path, found && name != ""
}

// snapshots returns the store's snapshots, if it keeps them.
func (h *Handler) snapshots() (store.Snapshots, bool) {
	s, ok := h.st.(store.Snapshots)
	return s, ok
}

// openSnapshotKey opens a key under .snapshots/ of bucket: the file (or,
// for a key ending in "/", the directory as an empty object) of that
// snapshot. path is the path inside the snapshot, for access checks.
func (h *Handler) openSnapshotKey(ctx context.Context, bucket, key string) (obj store.Object, info store.ObjectInfo, path string, err error) {
	name, path, ok := snapshotKey(key)
	snaps, has := h.snapshots()
	if !ok || !has {
		return nil, info, path, store.ErrNotFound
	}
	v, err := snaps.OpenSnapshot(ctx, bucket, name)
	if err != nil {
		return nil, info, path, err
	}
	defer v.Close() // the object stays readable
	if path == "" || strings.HasSuffix(path, "/") {
		info, err = v.Stat(ctx, strings.TrimSuffix(path, "/"))
		if err == nil && !info.IsDir {
			err = store.ErrNotFound
		}
		if err != nil {
			return nil, info, path, err
		}
		info.Size, info.ETag = 0, emptyMD5
		return nil, info, path, nil
	}
	if hidden(path) {
		return nil, info, path, store.ErrNotFound
	}
	obj, err = v.Open(ctx, path)
	if errors.Is(err, store.ErrIsDir) {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, info, path, err
	}
	return obj, obj.Info(), path, nil
}

// snapshotAccessPrefix is the prefix access is checked on for a listing
// with prefix under .snapshots/: the prefix inside the snapshot, or ""
// (the whole bucket) for the snapshots' names.
func snapshotAccessPrefix(prefix string) string {
	if _, inner, ok := snapshotKey(prefix); ok {
		return inner
	}
	return ""
}

// listSnapshots is list for a prefix under .snapshots/: the snapshots'
// names as common prefixes, or their files, with keys under
// .snapshots/NAME/. Snapshots are walked in name order, each with the
// store's listing of its view.
func (h *Handler) listSnapshots(ctx context.Context, bucket, prefix, delim, startAfter string, max int) (listing, error) {
	var out listing
	snaps, ok := h.snapshots()
	if !ok || max <= 0 {
		return out, nil
	}
	if name, inner, ok := snapshotKey(prefix); ok {
		return h.listSnapshot(ctx, snaps, bucket, name, inner, delim, startAfter, max)
	}
	// The prefix is .snapshots/ and part of a name.
	namePrefix := strings.TrimPrefix(prefix, snapshotsDir+"/")
	all, err := snaps.SnapshotList(ctx, bucket)
	if err != nil {
		return out, err
	}
	var names []string
	for _, s := range all {
		if strings.HasPrefix(s.Name, namePrefix) {
			names = append(names, s.Name)
		}
	}
	// In key order: ".snapshots/a-b/" sorts before ".snapshots/a/".
	sort.Slice(names, func(i, j int) bool { return names[i]+"/" < names[j]+"/" })
	count := func() int { return len(out.entries) + len(out.prefixes) }
	for _, name := range names {
		kp := snapshotsDir + "/" + name + "/"
		if delim != "" {
			if i := strings.Index(kp[len(prefix):], delim); i >= 0 {
				// Everything under the name groups at the delimiter.
				cp := prefix + kp[len(prefix):][:i+len(delim)]
				if cp <= startAfter || len(out.prefixes) > 0 && out.prefixes[len(out.prefixes)-1] == cp {
					continue
				}
				if count() >= max {
					out.truncated = true
					return out, nil
				}
				out.prefixes = append(out.prefixes, cp)
				out.next = cp
				continue
			}
		}
		if !strings.HasPrefix(startAfter, kp) && startAfter >= kp {
			continue // every key of this snapshot is before the marker
		}
		if count() >= max {
			out.truncated = true
			return out, nil
		}
		page, err := h.listSnapshot(ctx, snaps, bucket, name, "", delim, startAfter, max-count())
		if err != nil {
			return out, err
		}
		out.entries = append(out.entries, page.entries...)
		out.prefixes = append(out.prefixes, page.prefixes...)
		if page.next != "" {
			out.next = page.next
		}
		if page.truncated {
			out.truncated = true
			return out, nil
		}
	}
	return out, nil
}

// listSnapshot lists snapshot name of bucket under inner (a prefix inside
// it) as list does the live bucket, with keys and markers under
// .snapshots/NAME/.
func (h *Handler) listSnapshot(ctx context.Context, snaps store.Snapshots, bucket, name, inner, delim, startAfter string, max int) (listing, error) {
	kp := snapshotsDir + "/" + name + "/"
	after := ""
	switch {
	case strings.HasPrefix(startAfter, kp):
		after = startAfter[len(kp):]
	case startAfter >= kp:
		return listing{}, nil
	}
	v, err := snaps.OpenSnapshot(ctx, bucket, name)
	if errors.Is(err, store.ErrNotFound) {
		return listing{}, nil
	}
	if err != nil {
		return listing{}, err
	}
	defer v.Close()
	page, err := listPages(ctx, func(ctx context.Context, opts store.ListOptions) (store.ListResult, error) {
		return v.List(ctx, opts)
	}, inner, delim, after, max)
	if err != nil {
		return page, err
	}
	for i := range page.entries {
		page.entries[i].Path = kp + page.entries[i].Path
	}
	for i := range page.prefixes {
		page.prefixes[i] = kp + page.prefixes[i]
	}
	if page.next != "" {
		page.next = kp + page.next
	}
	return page, nil
}
