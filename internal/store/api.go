package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/meta"
)

// Errors returned by Store methods. Front ends map them to status codes in
// one table each (errors.Is).
var (
	ErrNotFound       = errors.New("store: not found")
	ErrNoBucket       = errors.New("store: no such bucket")
	ErrBucketExists   = errors.New("store: bucket already exists")
	ErrBucketNotEmpty = errors.New("store: bucket not empty")
	ErrExists         = errors.New("store: already exists")
	ErrNotEmpty       = errors.New("store: directory not empty")
	ErrIsDir          = errors.New("store: is a directory")
	ErrNotDir         = errors.New("store: not a directory")
	ErrInvalidName    = errors.New("store: invalid name")
	ErrPrecondition   = errors.New("store: precondition failed")
	ErrNoSpace        = errors.New("store: no space left")
	ErrShortBody      = errors.New("store: body shorter than declared length")
	ErrTooLarge       = errors.New("store: body longer than declared length")
	ErrCorrupt        = errors.New("store: data corrupt")
	ErrUnavailable    = errors.New("store: unavailable")
	ErrReadOnly       = errors.New("store: read-only")
	ErrBadDigest      = errors.New("store: body does not match its Content-MD5")
	// ErrSHA256Mismatch: the body does not hash to PutOptions.ContentSHA256.
	ErrSHA256Mismatch = errors.New("store: body does not match its expected SHA-256")
)

// QuorumError is the failure of a write that could not make the copies
// its bucket requires: errors.Is(err, ErrUnavailable). Its message says
// how many copies were reachable and how many are required, and says
// nothing else about the cluster, so front ends may show it.
type QuorumError struct {
	Reachable, Required int
	Strict              bool
	// Err is the replication's error with the nodes' failures: for logs,
	// not for clients (Error leaves it out).
	Err error
}

func (e *QuorumError) Error() string {
	msg := fmt.Sprintf("write quorum not reached: %d copies reachable, %d required", e.Reachable, e.Required)
	if e.Strict {
		msg += " (the bucket is strict)"
	}
	return msg
}

// Is reports ErrUnavailable.
func (e *QuorumError) Is(target error) bool { return target == ErrUnavailable }

// Unwrap returns Err.
func (e *QuorumError) Unwrap() error { return e.Err }

// BucketInfo describes a bucket and its options.
type BucketInfo struct {
	Name             string    `json:"name"`
	Public           bool      `json:"public"`
	ChecksumSidecars bool      `json:"checksum_sidecars"`
	CacheControl     string    `json:"cache_control,omitempty"`
	Created          time.Time `json:"created"`
	// Replicas is the replication factor R: 0 = cluster default (3),
	// -1 = mirror (every data node).
	Replicas int `json:"replicas"`
	// WriteQuorum is W, the copies a write waits for: 0 = majority of R.
	WriteQuorum int `json:"write_quorum"`
	// Strict refuses (ErrUnavailable, a *QuorumError) a write that cannot
	// make W copies. Without it a write goes on with the copies it can
	// make, at least one, and is under-replicated until repair restores R.
	Strict bool `json:"strict"`
	// UID, GID, FileMode and DirMode are the owner and modes of what is
	// written without them (over HTTP, the CLI, S3): a web server's user
	// can then read uploads through a mount. Modes 0: 0644 and 0755.
	UID      uint32 `json:"uid"`
	GID      uint32 `json:"gid"`
	FileMode uint32 `json:"file_mode"`
	DirMode  uint32 `json:"dir_mode"`
	// Owner is the access key id that created the bucket ("" for the
	// admin key); set at creation only.
	Owner string `json:"owner,omitempty"`
	// ACL is the S3 canned ACL beyond Public: "", "public-read-write" or
	// "authenticated-read" (meta.Bucket.ACL).
	ACL string `json:"acl,omitempty"`
	// TrashSeconds is how long deleted and overwritten files stay in the
	// bucket's trash (Trash); 0: no trash.
	TrashSeconds int64 `json:"trash_seconds,omitempty"`
}

// ObjectInfo describes a file or directory.
type ObjectInfo struct {
	Bucket      string    `json:"bucket"`
	Path        string    `json:"path"` // inside the bucket, no leading slash; dirs have no trailing slash
	IsDir       bool      `json:"is_dir"`
	Size        int64     `json:"size"`
	ModTime     time.Time `json:"mtime"`
	ETag        string    `json:"etag,omitempty"`   // hex MD5, unquoted
	SHA256      string    `json:"sha256,omitempty"` // hex SHA-256 of the content
	ContentType string    `json:"content_type,omitempty"`
	Mode        uint32    `json:"mode"`
	// Ino is the file's inode number, stable while it exists and across
	// renames (the mount's inode numbers); UID and GID its owner.
	Ino      uint64 `json:"-"`
	UID, GID uint32 `json:"-"`
	// Symlink is a symbolic link's target ("" for anything else). A
	// symlink has no content: Open answers ErrNotFound.
	Symlink string `json:"-"`
	// Special is a special file's kind, as mknod(2)'s S_IFMT bits
	// (SpecialFIFO, SpecialSocket, SpecialChar, SpecialBlock), 0 for
	// anything else; Rdev a device's number. A special file has no
	// content: Open answers ErrNotFound.
	Special uint32 `json:"-"`
	Rdev    uint32 `json:"-"`
	// Nlink is the number of names (hard links) of a file, or of links
	// to a directory (2 plus its subdirectories).
	Nlink uint32 `json:"-"`
	// ChangeTime is the last change of the inode (content, attributes,
	// links): ctime. AccessTime is the access time as last set (reads do
	// not move it); the modification time when never set.
	ChangeTime, AccessTime time.Time `json:"-"`
	// Xattrs are the extended attributes of the file (S3 keeps its
	// object headers there: see the s3 front end). Shared with the
	// store's caches: do not modify.
	Xattrs map[string][]byte `json:"-"`
	// Copies and CopiesWanted are set by a write (Put, PutFiles) that was
	// acknowledged under-replicated: Copies is the fewest copies any of
	// the file's blobs has (or is still getting), CopiesWanted the R the
	// bucket asks for, capped at the cluster's data nodes. Both are 0
	// otherwise.
	Copies       int `json:"copies,omitempty"`
	CopiesWanted int `json:"copies_wanted,omitempty"`
}

// Attrs are the POSIX attributes of a file or directory that a front end
// may set: permission bits (0: the default, 0644 for files and 0755 for
// directories), owner and group.
type Attrs struct {
	Mode     uint32
	UID, GID uint32
	// Ino: for Mkdir, a number from ReserveInos for the directory it
	// creates (kept when free). 0: a new one.
	Ino uint64
	// Explicit: the values are the caller's even when zero (the mount);
	// otherwise the bucket's defaults fill the zero ones.
	Explicit bool
	// Exclusive: Mkdir fails with ErrExists when the directory exists
	// (mkdir(2), WebDAV MKCOL), instead of succeeding as mkdir -p.
	Exclusive bool
}

// SetAttrs is a change of a file's or directory's attributes; nil fields
// are left as they are.
type SetAttrs struct {
	Mode     *uint32
	UID, GID *uint32
	ModTime  *time.Time
	ATime    *time.Time // access time
	// Xattrs sets extended attributes by name; a nil value removes one.
	Xattrs map[string][]byte
}

// PutOptions are the optional parts of a Put.
type PutOptions struct {
	ContentType string
	UID, GID    uint32 // owner and group of the file (a replaced file takes them too)
	// Explicit: UID, GID and Mode are the caller's even when zero (the
	// mount); otherwise the bucket's defaults fill the zero ones.
	Explicit bool
	Mode     uint32 // 0 means 0644
	// Ino: a number from ReserveInos for the file this Put creates (kept
	// when free; a replaced file keeps its own). 0: a new one.
	Ino     uint64
	ModTime time.Time // zero means now
	// AccessTime is the file's access time; zero: its modification time.
	AccessTime time.Time
	// Size is the declared body length, or -1 if unknown. A body that ends
	// early fails with ErrShortBody, a longer one with ErrTooLarge; nothing
	// is stored in either case.
	Size int64
	// IfMatch: the current file's ETag must equal it. IfNoneMatchAny: no file may exist.
	IfMatch        string
	IfNoneMatchAny bool
	// Xattrs, when not nil, are the new file's extended attributes,
	// replacing a replaced file's; nil keeps a replaced file's.
	Xattrs map[string][]byte
	// ContentMD5, when set, is the body's expected MD5 (16 bytes): a body
	// that hashes otherwise fails with ErrBadDigest and nothing is stored.
	// The MD5 is computed for the ETag anyway, so checking costs nothing.
	ContentMD5 []byte
	// Decided: the caller (a Holder: the mount) decided this change
	// itself, under Claims, the directory claims it held (design 0008):
	// the store sends it stamped with them, and the log refuses it
	// (ErrFenced) if one has moved. Otherwise the store decides in the
	// log: it stamps the claims of directories this node owns after their
	// holders published, and recalls directories another node owns.
	Decided bool
	Claims  []Claim
	// LockedIno is the inode of the file being replaced, as the caller
	// knows it (the mount): while this node holds that inode's lock right
	// (design 0006), the write is sent stamped with it, and the log
	// refuses it (ErrFenced) once the right has moved. 0: no stamp.
	LockedIno uint64
	// ContentSHA256, when set, is the body's expected SHA-256 (32 bytes),
	// e.g. the x-amz-content-sha256 an S3 request was signed with: a body
	// that hashes otherwise fails with ErrSHA256Mismatch and nothing is
	// stored. It is never trusted: Put computes the body's SHA-256 anyway
	// (the name of a single-blob file's blob, or the whole-file hash it
	// records) and compares, so a caller that hands it over instead of
	// hashing the body itself saves a SHA-256 pass. A single-blob body
	// that does not match is not written at all. Put only: Concat, which
	// reads no body, refuses ContentMD5 and ContentSHA256.
	ContentSHA256 []byte
}

// ObjectRef names a file.
type ObjectRef struct {
	Bucket, Path string
}

// ListOptions selects a page of a listing in S3 order (lexicographic by full path).
type ListOptions struct {
	Prefix     string // path prefix inside the bucket
	Delimiter  string // "" (recursive) or "/"
	StartAfter string // exclusive; a path or a NextToken
	Limit      int    // max entries + common prefixes; 0 means 1000
}

// ListResult is one page of a listing.
type ListResult struct {
	Entries        []ObjectInfo `json:"entries"`
	CommonPrefixes []string     `json:"common_prefixes,omitempty"`
	Truncated      bool         `json:"truncated"`
	NextToken      string       `json:"next_token,omitempty"`
}

// Object is an open file for reading: a consistent view of one version.
type Object interface {
	Info() ObjectInfo
	// ReadAt reads the content like io.ReaderAt. Safe for concurrent use.
	io.ReaderAt
	// WriteRangeTo writes bytes [off, off+n) of the content to w, using the
	// cheapest path available (a pooled buffer, or sendfile).
	WriteRangeTo(w io.Writer, off, n int64) (int64, error)
	Close() error
}

// LocalAccess is the way to this node's copy of an Object's bytes, for a
// front end that sends a body without copying it (httpapi's GET fast
// path). Every Object that Local.Open returns implements it; another
// Store's objects may not, and front ends then use ReadAt and
// WriteRangeTo. Each method answers "no" (ok false, nothing held) when
// the bytes are not one local piece; see store's object for the contract
// of each (the needle is checked as ReadAt checks it).
type LocalAccess interface {
	// LocalSpan returns the volume file and offset holding bytes
	// [off, off+n), for sendfile; release must be called once.
	LocalSpan(off, n int64) (f *os.File, fileOff int64, release func(), ok bool)
	// LocalBytes lends bytes [off, off+n) from the volume's memory map
	// until hold.Release.
	LocalBytes(off, n int64) (b []byte, hold Hold, ok bool)
	// Resident reports whether those bytes are all in the page cache.
	Resident(off, n int64) bool
}

// Hold keeps bytes lent by LocalAccess.LocalBytes valid until Release,
// which must be called exactly once.
type Hold interface{ Release() }

// MaxBlobSize is the largest piece a file is stored in: a body up to it is
// one blob (front ends batch small files below it).
const MaxBlobSize = blob.MaxSize

// ValidBucketName checks a bucket name against the S3 naming rules that
// CreateBucket enforces (3-63 characters of a-z, 0-9, '.' and '-', ...).
func ValidBucketName(name string) error { return meta.ValidBucketName(name) }

// Optional capabilities of a Store, checked with a type assertion: Local
// has both; a front end must work without them.
type (
	// Barrierer serves consistent reads: after Barrier, a read of this
	// node sees every write acknowledged anywhere before the call.
	Barrierer interface {
		Barrier(ctx context.Context) error
	}
	// Watchable reports applied namespace changes (watch.go) until
	// cancel.
	Watchable interface {
		Watch(w Watcher) (cancel func())
	}
)

var (
	_ Barrierer = (*Local)(nil)
	_ Watchable = (*Local)(nil)
)

// Memoizer is implemented by Objects that keep a slot for a front end's
// data derived from the object (httpapi's answer headers): the same
// object, with the same slot, is returned for every open of a cached
// version of a file (Local's objects do).
type Memoizer interface {
	Memo() *atomic.Value
}

// MaxNameLen and MaxPathLen bound a name and a whole path inside a bucket,
// in bytes (longer ones are ErrInvalidName).
const (
	MaxNameLen = 255
	MaxPathLen = meta.MaxPathLen
)

// Store is the one API every front end calls. All methods are safe for
// concurrent use. A method that returns nil error for a write has made the
// change durable.
type Store interface {
	CreateBucket(ctx context.Context, b BucketInfo) error
	UpdateBucket(ctx context.Context, b BucketInfo) error
	DeleteBucket(ctx context.Context, name string) error
	Bucket(ctx context.Context, name string) (BucketInfo, error)
	Buckets(ctx context.Context) ([]BucketInfo, error)

	// Put streams r into bucket/path, creating parent directories. created
	// reports that no file existed before.
	Put(ctx context.Context, bucket, path string, r io.Reader, opts PutOptions) (info ObjectInfo, created bool, err error)
	// Open opens a file for reading. ErrIsDir for a directory.
	Open(ctx context.Context, bucket, path string) (Object, error)
	// Stat describes a file or directory ("" is the bucket's root).
	Stat(ctx context.Context, bucket, path string) (ObjectInfo, error)
	List(ctx context.Context, bucket string, opts ListOptions) (ListResult, error)
	// Mkdir creates directory path and its missing parents (mkdir -p) with
	// attrs; an existing directory is left as it is (no error).
	Mkdir(ctx context.Context, bucket, path string, attrs Attrs) error
	// SetAttrs changes the mode, owner or modification time of a file or
	// directory ("" is the bucket's root) and returns its new description.
	SetAttrs(ctx context.Context, bucket, path string, set SetAttrs) (ObjectInfo, error)
	// StatIno and OpenIno are Stat and Open by inode number (ObjectInfo.Ino)
	// instead of path: a mount's inode keeps its identity through renames
	// and hard links, whose names another node may change under it. The
	// path in the answer is path, as the caller knows it.
	StatIno(ctx context.Context, bucket, path string, ino uint64) (ObjectInfo, error)
	OpenIno(ctx context.Context, bucket, path string, ino uint64) (Object, error)
	// Xattrs returns the extended attributes of a file or directory.
	Xattrs(ctx context.Context, bucket, path string) (map[string][]byte, error)
	// Link makes dst one more name (a hard link) of the file or symlink at
	// src, in the same bucket. ErrExists if dst exists, ErrNotFound if
	// src or dst's parent does not, ErrIsDir for a directory.
	Link(ctx context.Context, bucket, src, dst string) (ObjectInfo, error)
	// Symlink creates a symbolic link at path pointing to target.
	// ErrExists if anything is there.
	Symlink(ctx context.Context, bucket, path, target string, attrs Attrs) (ObjectInfo, error)
	// Mknod creates a special file at path: special is its kind
	// (SpecialFIFO, SpecialSocket, SpecialChar, SpecialBlock), rdev a
	// device's number. Decided in the log, as Symlink: ErrExists if
	// anything is there, whichever node named it first.
	Mknod(ctx context.Context, bucket, path string, special, rdev uint32, attrs Attrs) (ObjectInfo, error)
	// Delete removes a file or an empty directory.
	Delete(ctx context.Context, bucket, path string, ifMatch string) error
	// Rename moves a file or directory inside a bucket, replacing a file
	// (or an empty directory) at dst. ErrNotFound if src or dst's parent
	// directory does not exist, as rename(2).
	Rename(ctx context.Context, bucket, src, dst string) error
	// ReserveInos reserves n inode numbers (1..65536), [first, first+n),
	// that nothing else will allocate: a front end that names a file
	// before it is committed (the mount's write-back) gives one to its
	// Put (PutOptions.Ino).
	ReserveInos(ctx context.Context, n int) (first uint64, err error)
	// Concat makes bucket/path a file whose content is the contents of
	// srcs one after the other, without copying their bytes (the new file
	// names their blobs; S3's multipart completion). etag is its ETag. The
	// sources are left as they are. ErrNotFound if a source is missing.
	Concat(ctx context.Context, bucket, path string, srcs []ObjectRef, etag string, opts PutOptions) (info ObjectInfo, created bool, err error)
}
