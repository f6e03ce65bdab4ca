package store

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/internal/meta"
)

// Versions is the store's API for S3 versioning, built on the trash
// (design 0007, "S3 versioning"). A bucket whose BucketInfo.TrashSeconds
// is VersioningSeconds is versioned: every body an overwrite, a delete or
// a rename removes stays in its trash until deleted by version. The
// versions of a path are then, newest first: its file, and its trash
// entries by deletion time, each entry of a deletion preceded by its
// delete marker. Local implements it.
type Versions interface {
	// WalkVersions calls fn for the versions of the files whose path
	// starts with prefix, path by path in byte order, newest first within
	// a path, starting after the cursor, until fn returns false. The walk
	// reads one snapshot of the namespace. Its memory is bounded; its time
	// is that of the paths and entries it passes.
	WalkVersions(ctx context.Context, bucket, prefix string, after VersionCursor, fn func(Version) bool) error
	// OpenVersion opens a version of a file for reading: the file itself
	// or a trash entry. ErrNotFound when the path has no such version,
	// ErrDeleteMarker when the ID names a delete marker, ErrInvalidVersion
	// for an ID this store never makes.
	OpenVersion(ctx context.Context, bucket, path, id string) (Object, error)
	// DeleteVersion deletes one version for good (OpVersionDelete): the
	// file's (the version it replaced, if kept, becomes the file again), a
	// noncurrent one, or a delete marker (the latest one undeletes its
	// version). It returns the version deleted; ok is false when nothing
	// had that ID (not an error: the delete is idempotent).
	DeleteVersion(ctx context.Context, bucket, path, id string) (v Version, ok bool, err error)
	// DropTrash drops every trash entry whose path starts with prefix
	// (the files a front end removes for itself, such as S3's multipart
	// parts, which are nobody's versions) and returns how many.
	DropTrash(ctx context.Context, bucket, prefix string) (int, error)
}

var _ Versions = (*Local)(nil)

// VersioningSeconds as BucketInfo.TrashSeconds keeps a bucket's trash
// entries without expiry: the bucket is versioned. Setting the trash to
// another retention (or off) ends versioning: the entries then expire by
// that retention.
const VersioningSeconds = meta.TrashForever / int64(time.Second)

// Versioned reports whether bucket b keeps every version.
func Versioned(b BucketInfo) bool { return b.TrashSeconds == VersioningSeconds }

// Errors of the version API.
var (
	ErrInvalidVersion = errors.New("store: invalid version id")
	ErrDeleteMarker   = errors.New("store: the version is a delete marker")
)

// Version is one version of a path.
type Version struct {
	Path string
	// ID is the version's S3 version ID (VersionID, or a delete marker's).
	ID string
	// DeleteMarker: the version is the deletion that ended the version
	// below it; Info.ModTime is its time.
	DeleteMarker bool
	// Latest: the path's current version (its file, or when it has none
	// and its newest entry is a deletion, that delete marker).
	Latest bool
	// Info describes the file version (as it was).
	Info ObjectInfo
}

// VersionCursor is where a walk of versions resumes: after the version
// ID of Path, then with the paths after Path; with no ID, with the paths
// after Path; with neither, from the start.
type VersionCursor struct {
	Path, ID string
}

// Version IDs are 28 characters of base32 (RFC 4648's extended hex
// alphabet, lowercase): a kind byte and two 8-byte numbers.
//
//   - a file version ('v'): its modification time (ns) and the first 8
//     bytes of the SHA-256 of its ETag. An overwrite keeps the old inode
//     in the trash as it was, and a promotion or a restore keeps the
//     modification time and ETag, so a version keeps its ID from the
//     moment it is written until it is deleted. Two versions of one path
//     with the same modification time and the same content share an ID:
//     a read or delete by it takes the newest.
//   - a delete marker ('d'): the trash entry's deletion time (ns) and the
//     deleted inode's number, its key.
const (
	idVersion = 'v'
	idMarker  = 'd'
	idLen     = 28
)

var idEncoding = base32.HexEncoding.WithPadding(base32.NoPadding)

func encodeID(kind byte, a, b uint64) string {
	var raw [17]byte
	raw[0] = kind
	binary.BigEndian.PutUint64(raw[1:], a)
	binary.BigEndian.PutUint64(raw[9:], b)
	return strings.ToLower(idEncoding.EncodeToString(raw[:]))
}

func etagTag(etag string) uint64 {
	s := sha256.Sum256([]byte(etag))
	return binary.BigEndian.Uint64(s[:8])
}

// VersionID is the version ID of the file version with that modification
// time and ETag (ObjectInfo.ModTime and ETag).
func VersionID(mtime time.Time, etag string) string {
	return encodeID(idVersion, uint64(mtime.UnixNano()), etagTag(etag))
}

func markerID(e *meta.TrashEntry) string {
	return encodeID(idMarker, uint64(e.DeletedNs), uint64(e.Inode.Ino))
}

// parsedID is a parsed version ID.
type parsedID struct {
	marker bool
	a, b   uint64 // version: mtime, ETag tag; marker: deletion time, inode
}

func parseID(id string) (parsedID, error) {
	bad := fmt.Errorf("%w: %q", ErrInvalidVersion, id)
	if len(id) != idLen {
		return parsedID{}, bad
	}
	raw, err := idEncoding.DecodeString(strings.ToUpper(id))
	if err != nil || len(raw) != 17 || encodeID(raw[0], binary.BigEndian.Uint64(raw[1:]), binary.BigEndian.Uint64(raw[9:])) != id {
		return parsedID{}, bad
	}
	p := parsedID{a: binary.BigEndian.Uint64(raw[1:]), b: binary.BigEndian.Uint64(raw[9:])}
	switch raw[0] {
	case idVersion:
	case idMarker:
		p.marker = true
	default:
		return parsedID{}, bad
	}
	return p, nil
}

// ValidVersionID reports whether id is a version ID this store makes.
func ValidVersionID(id string) bool {
	_, err := parseID(id)
	return err == nil
}

func (p parsedID) matches(n *meta.Inode) bool {
	return !p.marker && n.Type != meta.TypeDir && uint64(n.MtimeNs) == p.a && etagTag(n.ETag) == p.b
}

func versionOf(bucket, path string, n *meta.Inode) Version {
	return Version{Path: path, ID: encodeID(idVersion, uint64(n.MtimeNs), etagTag(n.ETag)), Info: objectInfo(bucket, path, n)}
}

func markerOf(bucket, path string, e *meta.TrashEntry) Version {
	return Version{Path: path, ID: markerID(e), DeleteMarker: true,
		Info: ObjectInfo{Bucket: bucket, Path: path, ModTime: time.Unix(0, e.DeletedNs).UTC()}}
}

// liveFileAt returns the file (not a directory) at path as r sees it, or
// nil.
func liveFileAt(r *meta.Reader, bucket, path string) (*meta.Inode, error) {
	n, err := r.Lookup(bucket, path)
	if errors.Is(err, meta.ErrNotFound) || errors.Is(err, meta.ErrNotDir) {
		return nil, nil
	}
	if err != nil || n.Type == meta.TypeDir {
		return nil, err
	}
	return n, nil
}

// entryOf finds the entry of path holding the version p as r sees it:
// the newest such entry, or with oldest the oldest; nil when none.
func entryOf(r *meta.Reader, bucket, path string, p parsedID, oldest bool) (*meta.TrashEntry, error) {
	var found *meta.TrashEntry
	err := r.Trash(bucket, path, func(e *meta.TrashEntry) bool {
		if e.Path != path {
			return false // past the path's own entries ("path" sorts first)
		}
		if p.matches(e.Inode) {
			found = e
			return !oldest
		}
		return true
	})
	return found, err
}

// versionWalk is one WalkVersions.
type versionWalk struct {
	ctx    context.Context
	s      *Local
	r      *meta.Reader
	bucket string
	fn     func(Version) bool
}

// versionPage bounds the entries a walk reads at once.
const versionPage = 256

// WalkVersions implements Versions.
func (s *Local) WalkVersions(ctx context.Context, bucket, prefix string, after VersionCursor, fn func(Version) bool) error {
	if err := checkPath(bucket, ""); err != nil {
		return err
	}
	snap := s.kv.Snapshot()
	defer snap.Close()
	w := &versionWalk{ctx: ctx, s: s, r: meta.NewReader(snap), bucket: bucket, fn: fn}
	if _, err := w.r.Bucket(bucket); err != nil {
		return mapErr(err)
	}
	start := after.Path
	if start != "" && after.ID != "" && strings.HasPrefix(start, prefix) {
		id, err := parseID(after.ID)
		if err != nil {
			return err
		}
		if more, err := w.path(start, &id); err != nil || !more {
			return mapErr(err)
		}
	}
	// Merge the live files (the lister, in pages) with the paths that
	// have trash entries (one seek each), in byte order.
	// The live pages grow from a few entries: a caller that stops early
	// (a delimiter's group, a page's end) reads little.
	var page []ObjectInfo
	liveAfter, liveDone, pageSize := start, false, 8
	trashPath, trashOK, err := w.r.TrashPathAfter(bucket, prefix, start)
	if err != nil {
		return mapErr(err)
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if len(page) == 0 && !liveDone {
			res, err := s.listIn(w.r, bucket, ListOptions{Prefix: prefix, StartAfter: liveAfter, Limit: pageSize})
			if err != nil {
				return err
			}
			pageSize = min(2*pageSize, versionPage)
			page = res.Entries
			if len(page) > 0 {
				liveAfter = page[len(page)-1].Path
			}
			liveDone = !res.Truncated
		}
		var path string
		switch {
		case len(page) > 0 && (!trashOK || page[0].Path <= trashPath):
			path = page[0].Path
		case trashOK:
			path = trashPath
		default:
			return nil
		}
		if len(page) > 0 && page[0].Path == path {
			page = page[1:]
		}
		if trashOK && trashPath == path {
			if trashPath, trashOK, err = w.r.TrashPathAfter(bucket, prefix, path); err != nil {
				return mapErr(err)
			}
		}
		if more, err := w.path(path, nil); err != nil || !more {
			return mapErr(err)
		}
	}
}

// path emits the versions of path, after the version after (nil: all),
// and reports whether the walk goes on.
func (w *versionWalk) path(path string, after *parsedID) (bool, error) {
	live, err := liveFileAt(w.r, w.bucket, path)
	if err != nil {
		return false, err
	}
	newest, _, err := w.r.PathTrash(w.bucket, path, nil, 1)
	if err != nil {
		return false, err
	}
	var before *meta.TrashPos // entries older than this; nil: all
	skipMarker := false       // the first entry's marker was emitted already
	emitLive := live != nil
	if after != nil {
		switch {
		case after.marker:
			// Resume with the version under that marker, even if the
			// marker went since.
			emitLive = false
			pos := meta.TrashPos{At: int64(after.a), Ino: meta.Ino(after.b)}
			if e, err := w.r.TrashEntryAt(w.bucket, path, pos.At, pos.Ino); err == nil {
				pos.Ino++ // include the entry itself, its version only
				skipMarker = !e.Replaced
			} else if !errors.Is(err, meta.ErrNotFound) {
				return false, err
			}
			before = &pos
		case live != nil && after.matches(live):
			emitLive = false
		default:
			// After the oldest entry with that version (a shared ID never
			// stops a walk); a version deleted since: the path again.
			e, err := entryOf(w.r, w.bucket, path, *after, true)
			if err != nil {
				return false, err
			}
			if e != nil {
				emitLive = false
				pos := e.Pos()
				before = &pos
			}
		}
	}
	if emitLive {
		v := versionOf(w.bucket, path, live)
		v.Latest = true
		if !w.fn(v) {
			return false, nil
		}
	}
	for {
		if err := w.ctx.Err(); err != nil {
			return false, err
		}
		es, more, err := w.r.PathTrash(w.bucket, path, before, versionPage)
		if err != nil {
			return false, err
		}
		for _, e := range es {
			isNewest := len(newest) > 0 && e.Pos() == newest[0].Pos()
			if !e.Replaced && !skipMarker {
				m := markerOf(w.bucket, path, e)
				m.Latest = live == nil && isNewest
				if !w.fn(m) {
					return false, nil
				}
			}
			skipMarker = false
			if !w.fn(versionOf(w.bucket, path, e.Inode)) {
				return false, nil
			}
		}
		if !more || len(es) == 0 {
			return true, nil
		}
		pos := es[len(es)-1].Pos()
		before = &pos
	}
}

// listIn is List over the namespace reader r (one snapshot for a whole
// walk), recursive.
func (s *Local) listIn(r *meta.Reader, bucket string, opts ListOptions) (ListResult, error) {
	dir, namePrefix := "", opts.Prefix
	if i := strings.LastIndexByte(opts.Prefix, '/'); i >= 0 {
		dir, namePrefix = opts.Prefix[:i], opts.Prefix[i+1:]
	}
	if dir != "" && meta.ValidatePath(dir) != nil {
		return ListResult{}, nil // no key can have an invalid prefix
	}
	dirIno, err := r.Lookup(bucket, dir)
	if errors.Is(err, meta.ErrNotFound) || errors.Is(err, meta.ErrNotDir) || err == nil && dirIno.Type != meta.TypeDir {
		return ListResult{}, nil
	}
	if err != nil {
		return ListResult{}, mapErr(err)
	}
	l := &lister{s: s, bucket: bucket, limit: opts.Limit, recursive: true, snap: r}
	dirPrefix := ""
	if dir != "" {
		dirPrefix = dir + "/"
	}
	var after []string
	if opts.StartAfter != "" && opts.StartAfter >= dirPrefix {
		if !strings.HasPrefix(opts.StartAfter, dirPrefix) {
			return ListResult{}, nil
		}
		after = splitKeep(strings.TrimPrefix(opts.StartAfter, dirPrefix))
	}
	if err := l.walk(dirIno.Ino, dirPrefix, namePrefix, after); err != nil && !errors.Is(err, errPageFull) {
		return ListResult{}, mapErr(err)
	}
	return l.res, nil
}

// OpenVersion implements Versions.
func (s *Local) OpenVersion(ctx context.Context, bucket, path, id string) (Object, error) {
	if err := checkPath(bucket, path); err != nil {
		return nil, err
	}
	p, err := parseID(id)
	if err != nil {
		return nil, err
	}
	if p.marker {
		if _, err := s.meta.TrashEntryAt(bucket, path, int64(p.a), meta.Ino(p.b)); err != nil {
			return nil, mapErr(err)
		}
		return nil, ErrDeleteMarker
	}
	n, err := s.versionInode(bucket, path, p)
	if err != nil {
		return nil, err
	}
	if n.Type == meta.TypeSymlink {
		return nil, fmt.Errorf("%w: %s/%s is a symbolic link", ErrNotFound, bucket, path)
	}
	return s.newObject(bucket, path, n), nil
}

// versionInode returns the inode of file version p of path: the live file,
// or the newest trash entry holding it.
func (s *Local) versionInode(bucket, path string, p parsedID) (*meta.Inode, error) {
	live, err := liveFileAt(s.meta, bucket, path)
	if err != nil {
		return nil, mapErr(err)
	}
	if live != nil && p.matches(live) {
		return live, nil
	}
	e, err := entryOf(s.meta, bucket, path, p, false)
	if err != nil {
		return nil, mapErr(err)
	}
	if e == nil {
		return nil, fmt.Errorf("%w: version of %s/%s", ErrNotFound, bucket, path)
	}
	return e.Inode, nil
}

// DeleteVersion implements Versions.
func (s *Local) DeleteVersion(ctx context.Context, bucket, path, id string) (Version, bool, error) {
	if err := checkPath(bucket, path); err != nil {
		return Version{}, false, err
	}
	p, err := parseID(id)
	if err != nil {
		return Version{}, false, err
	}
	cmd := meta.Command{Op: meta.OpVersionDelete, BucketName: bucket, Path: path, Trash: &meta.TrashCmd{}}
	v := Version{Path: path, ID: id, DeleteMarker: p.marker}
	if p.marker {
		cmd.Trash.At, cmd.File = int64(p.a), &meta.Inode{Ino: meta.Ino(p.b)}
	} else {
		// The command names the version by its mtime and ETag; the ID
		// holds a hash of the ETag, so find the version first. The state
		// machine resolves the command again, exactly.
		n, err := s.versionInode(bucket, path, p)
		if errors.Is(err, ErrNotFound) {
			return v, false, nil
		}
		if err != nil {
			return v, false, err
		}
		cmd.File = &meta.Inode{MtimeNs: n.MtimeNs, ETag: n.ETag}
		v.Info = objectInfo(bucket, path, n)
	}
	res, err := s.propose(ctx, cmd)
	if err != nil {
		return v, false, err
	}
	return v, res.Count > 0, nil
}

// DropTrash implements Versions: rounds of at most maxDropRound entries,
// each dropped by its own OpTrashDrop.
func (s *Local) DropTrash(ctx context.Context, bucket, prefix string) (int, error) {
	const maxDropRound = 512 // as TrashRestore's batches
	total := 0
	for {
		var cmds []meta.Command
		now := s.cfg.Now().UnixNano()
		err := s.meta.Trash(bucket, prefix, func(e *meta.TrashEntry) bool {
			cmds = append(cmds, meta.Command{Op: meta.OpTrashDrop, BucketName: bucket, Path: e.Path, TimeNs: now,
				Trash: &meta.TrashCmd{At: e.DeletedNs}, File: &meta.Inode{Ino: e.Inode.Ino}})
			return len(cmds) < maxDropRound
		})
		if err != nil || len(cmds) == 0 {
			return total, mapErr(err)
		}
		res, errs := s.proposeAll(ctx, cmds)
		dropped := 0
		for i := range cmds {
			if err := errors.Join(errs[i], res[i].Err); err != nil {
				return total, mapErr(err)
			}
			dropped += res[i].Count
		}
		total += dropped
		if dropped == 0 {
			return total, nil // nothing moved: never loop on the same entries
		}
	}
}
