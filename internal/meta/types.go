package meta

import (
	"errors"

	"github.com/cairn-fs/cairn/internal/cas"
)

// Ino is an inode number. RootIno is the root directory; buckets are its
// children.
type Ino uint64

// RootIno is the inode of the root directory.
const RootIno Ino = 1

// FileType is the type of an inode.
type FileType uint8

// File types.
const (
	TypeFile    FileType = 1
	TypeDir     FileType = 2
	TypeSymlink FileType = 3
	// Special files (mknod(2)): no content. A FIFO or a socket is a name
	// only (each node's kernel makes the pipe or socket of its own); a
	// device has a device number (Inode.Rdev). Log version 12.
	TypeFIFO     FileType = 4
	TypeSocket   FileType = 5
	TypeCharDev  FileType = 6
	TypeBlockDev FileType = 7
)

// Special reports whether t is a FIFO, socket or device.
func (t FileType) Special() bool { return t >= TypeFIFO && t <= TypeBlockDev }

// Device reports whether t is a character or block device.
func (t FileType) Device() bool { return t == TypeCharDev || t == TypeBlockDev }

// Extent is one blob of a file's content: the blob Hash holds the file's
// bytes [Offset, Offset+Length). Extents are sorted by Offset, contiguous,
// and each Length is the whole blob's size (<= cas.MaxSize).
type Extent struct {
	Hash   cas.Hash
	Offset int64
	Length int64
}

// Inode is a file, directory or symlink. Times are Unix nanoseconds taken
// from the command that made the change (never the applying node's clock).
type Inode struct {
	Ino         Ino
	Type        FileType
	Mode        uint32 // permission bits (0644 files, 0755 dirs by default)
	UID, GID    uint32
	Nlink       uint32
	Size        int64
	MtimeNs     int64
	CtimeNs     int64
	AtimeNs     int64  // access time as last set (utimensat); 0: the mtime. Reads do not move it.
	ContentType string // stored MIME type, "" if none was given
	ETag        string // hex MD5 of the content (S3 ETag, unquoted)
	SHA256      string // hex SHA-256 of the whole content
	Target      string // symlink target
	Rdev        uint32 // device number of a TypeCharDev or TypeBlockDev (Linux's encoding); 0 otherwise
	Extents     []Extent
	Xattrs      map[string][]byte
}

// Bucket is a top-level directory with options.
type Bucket struct {
	Name             string
	Ino              Ino
	Public           bool // anonymous GET/HEAD allowed
	ChecksumSidecars bool // GET NAME.md5 / NAME.sha256 synthesized
	CacheControl     string
	CreatedNs        int64
	// Replicas is the replication factor R of the bucket's blobs: 0 means
	// the cluster default (3), Mirror (-1) means every data node.
	Replicas int32
	// WriteQuorum W is how many replicas must hold a blob before a write is
	// acknowledged: 0 means a majority of R.
	WriteQuorum int32
	// Strict refuses a write that cannot make W copies (503). Without it a
	// write goes on with the copies it can make (at least one) and is
	// recorded as under-replicated (Reader.UnderReplicated).
	Strict bool
	// Owner of the files and directories written over HTTP, S3 or the CLI
	// (the mount writes as its caller): UID, GID, and modes (0: 0644 for
	// files, 0755 for directories).
	UID, GID          uint32
	FileMode, DirMode uint32
	// Owner is the access key id that created the bucket ("" for the
	// admin key): it may do everything in it (S3's bucket owner).
	Owner string
	// ACL is the bucket's canned S3 ACL beyond Public: "" (private, or
	// public-read when Public), "public-read-write" (anyone may also write
	// and delete) or "authenticated-read" (any access key may read).
	ACL string
	// TrashNs is how long deleted and replaced files stay in the
	// bucket's trash (design 0007); 0: no trash.
	TrashNs int64
}

// Mirror as Bucket.Replicas places a copy of every blob on every data node.
const Mirror int32 = -1

// NodeState is the lifecycle state of a cluster member.
type NodeState uint8

// Node states.
const (
	NodeActive   NodeState = 1 // holds data and takes new copies
	NodeDraining NodeState = 2 // keeps serving until its copies moved; takes no new copies
	// NodeClient: a node that stores no blob and never votes (`cairn
	// server --role client`): it keeps the namespace as a Raft learner and
	// serves every front end, reading blobs from the nodes that hold them.
	// Never a placement target nor a repair source; its absence costs the
	// cluster nothing. Log version 15.
	NodeClient NodeState = 3
)

// Node is a member of the cluster map, which lives in the log so every node
// agrees on it. Liveness is not here: the failure detector decides that.
type Node struct {
	ID         uint64    // Raft node ID, never reused; > 0
	Name       string    // operator-facing name
	URL        string    // public base URL, http://HOST:PORT of --listen
	ClusterURL string    // node-to-node base URL; "" means URL
	GossipAddr string    // failure detector (memberlist) address HOST:PORT; "" = unknown
	Zone       string    // failure domain; copies of a blob spread over zones
	Weight     float64   // capacity weight for placement; 0 means 1
	Witness    bool      // votes, stores no data
	State      NodeState // NodeActive or NodeDraining
	JoinedNs   int64     // time of the command that added it
}

// Dirent is one entry of a directory listing.
type Dirent struct {
	Name string // without trailing slash
	Ino  Ino
	Type FileType
}

// Errors carried in Result.Err and returned by readers. Deterministic: every
// node applying the same command gets the same error.
var (
	ErrNotFound       = errors.New("meta: not found")
	ErrExists         = errors.New("meta: already exists")
	ErrNotEmpty       = errors.New("meta: directory not empty")
	ErrNotDir         = errors.New("meta: not a directory")
	ErrIsDir          = errors.New("meta: is a directory")
	ErrInvalid        = errors.New("meta: invalid argument")
	ErrNoBucket       = errors.New("meta: no such bucket")
	ErrBucketExists   = errors.New("meta: bucket already exists")
	ErrBucketNotEmpty = errors.New("meta: bucket not empty")
	ErrPrecondition   = errors.New("meta: precondition failed")
	ErrBlobReaped     = errors.New("meta: a referenced blob was reclaimed while the write was in flight; retry")
)

// Op is the kind of a Command.
type Op uint8

// Command kinds.
const (
	OpCreateBucket   Op = iota + 1 // Bucket (Name, Public, ChecksumSidecars, CacheControl)
	OpUpdateBucket                 // Bucket: replaces the options of Bucket.Name
	OpDeleteBucket                 // Bucket.Name; must be empty
	OpPutFile                      // BucketName, Path, File: create or replace a file, mkdir -p parents
	OpMkdir                        // BucketName, Path: mkdir -p
	OpDelete                       // BucketName, Path: unlink a file or rmdir an empty dir
	OpRename                       // BucketName, Path -> DstPath (same bucket); replaces a file at DstPath
	OpReap                         // Reap: approve deletion of garbage blobs older than ReapBefore
	OpSetAttr                      // BucketName, Path, File.Mode/UID/GID/MtimeNs/Xattrs
	OpSetNode                      // Node: add a member or replace its record
	OpRemoveNode                   // Node.ID: remove a member from the cluster map
	OpReplicated                   // Replicated: blobs that have all their copies again
	OpLink                         // BucketName, Path (a file or symlink) -> DstPath: a hard link, one more name for the inode
	OpReserveInos                  // Count: reserve that many inode numbers for a proposer's new files (Result.Inode.Ino is the first)
	OpPutRecord                    // Record: create or replace a record; Name "" takes the kind's next sequence number (Result.Name)
	OpDeleteRecord                 // Record.Kind, Record.Name: remove a record (ErrNotFound if absent)
	OpReapOrphans                  // Reap: approve deletion of blobs no file references and no reap is pending for (orphans)
	OpLock                         // Lock: take, wait for or release a file lock (locks.go)
	OpLockCancel                   // Lock.Ino, Lock.Lock.Owner/WaitID: an interrupted wait leaves its queue
	OpLockSession                  // Lock.Lock.Owner.Node/Epoch, Lock.LeaseNs: renew a node's lock session
	OpLockExpire                   // Lock.Lock.Owner.Node/Epoch, Lock.RenewNs: expire a session that stopped renewing
	OpSetLogVersion                // Upgrade: raise the cluster's log version (version.go)
	OpTrashRestore                 // BucketName, Path (a trash entry's path), DstPath ("": Path), Trash.At: a trash entry becomes a file again
	OpTrashPurge                   // BucketName, Trash.Before, Trash.Limit: drop trash entries deleted before Before
	OpSnapshotCreate               // BucketName, Snap.Name: take a snapshot (Result.Count: its id)
	OpSnapshotDelete               // BucketName, Snap.Name: hide a snapshot; OpSnapshotDrain then removes it
	OpSnapshotDrain                // BucketName, Snap.ID, Snap.Limit: hand a deleted snapshot's overlay down (Result.Count: keys handled)
	OpTrashDrop                    // BucketName, Path, Trash.At, File.Ino: drop that one trash entry (apply_version.go)
	OpVersionDelete                // BucketName, Path, File.MtimeNs+ETag or Trash.At+File.Ino: S3's DELETE of a version or delete marker (apply_version.go)
	OpOwn                          // Own.Node/Session/Dir (Recall): claim a directory, or ask its owner to give it up (owners.go)
	OpDisown                       // Own.Node/Dir/Epoch: the owner gives a directory up
	OpLockReturn                   // Lock.Ino, Lock.Lock.Owner, Right.Seq/Held/Waiting: the holder of an inode's lock right gives it back with its table (lockrights.go)
	OpFenceBucket                  // BucketName, Count (1 fence, 0 lift): a bucket that moves to another namespace group takes no more changes here (fence.go)

	opLast = OpFenceBucket
)

// Valid reports whether op is a known command kind.
func (op Op) Valid() bool { return op >= OpCreateBucket && op <= opLast }

// Command is one namespace change. It is what the Raft log carries: it must
// hold everything Apply needs, so that every node reaches the same state.
type Command struct {
	Op         Op
	BucketName string
	Path       string // slash-separated path inside the bucket, already validated, no leading slash
	DstPath    string
	Bucket     *Bucket
	// File: attributes and extents for OpPutFile / OpSetAttr (Nlink
	// ignored). Ino, on an OpPutFile that creates a file, is a number the
	// proposer reserved (OpReserveInos) for it: used when it was handed
	// out and is free, else a new one is allocated.
	File   *Inode
	TimeNs int64 // proposer's wall clock, Unix ns
	// IfMatch, when set on OpPutFile/OpDelete, requires the current file's ETag to equal it.
	IfMatch string
	// IfNoneMatchAny on OpPutFile requires that no file exists at Path.
	IfNoneMatchAny bool
	// StartIndex is the applied index the proposer saw before writing blobs
	// (OpPutFile). If any of the command's blobs was reaped after it, the
	// command fails with ErrBlobReaped and the proposer rewrites the blobs.
	StartIndex uint64
	// Reap lists blobs the proposer found with refcount 0 older than
	// ReapBefore (OpReap), or copies it holds that nothing references
	// (OpReapOrphans).
	Reap       []cas.Hash
	ReapBefore int64
	// Node is the member record of OpSetNode and OpRemoveNode.
	Node *Node
	// Under, on OpPutFile, lists the file's blobs that were written with
	// fewer copies than wanted: they are recorded as under-replicated
	// (with the bucket's R) until an OpReplicated clears them.
	Under []cas.Hash
	// Replicated lists blobs whose copies repair confirmed (OpReplicated):
	// their under-replicated records are dropped.
	Replicated []cas.Hash
	// Count is how many inode numbers OpReserveInos reserves (1..65536).
	Count uint64
	// Record is the record of OpPutRecord and OpDeleteRecord (Value
	// unused for a delete). IfNoneMatchAny on OpPutRecord refuses to
	// replace an existing record (ErrExists).
	Record *Record
	// Lock is the lock request or session of OpLock, OpLockCancel,
	// OpLockSession and OpLockExpire.
	Lock *LockCmd
	// Upgrade is the new log version of OpSetLogVersion and the members
	// its proposer found able to read it.
	Upgrade *LogUpgrade
	// Origin says who asked for the change, for the trash entries it
	// makes. Informational: dropped below log version 10 (Fit).
	Origin *Origin
	// Trash is the argument of OpTrashRestore and OpTrashPurge.
	Trash *TrashCmd
	// Snap is the argument of the snapshot commands.
	Snap *SnapCmd
	// Own is the body of OpOwn and OpDisown and, on a command that
	// changes names, the directory claims it was decided under
	// (owners.go, design 0008). Log version 11.
	Own *OwnCmd
	// Exclusive makes OpMkdir fail with ErrExists on an existing
	// directory (not mkdir -p), and OpRename on an existing destination
	// (RENAME_NOREPLACE). Log version 11.
	Exclusive bool
	// NoParents makes OpRename fail with ErrNotFound when the
	// destination's parent directory is missing, as rename(2) does,
	// instead of making it (mkdir -p). Log version 11.
	NoParents bool
	// Right is the lock-right part of OpLock and OpLockReturn and, on a
	// write, the lock right it was made under (lockrights.go). Log
	// version 13.
	Right *RightCmd
}

// Origin is where a change came from.
type Origin struct {
	Node     uint64 // the node that took the request (0: a lone node)
	Frontend string // http, s3, webdav, mount, cli, admin
	Key      string // the access key ID: "admin" for the admin key, "" anonymous or unknown (a mount)
}

// TrashCmd is the argument of the trash commands.
type TrashCmd struct {
	// At: OpTrashRestore restores the newest entry deleted at or before
	// At (Unix ns; 0: the newest).
	At int64
	// Before and Limit: OpTrashPurge drops at most Limit (1..10,000)
	// entries deleted before Before.
	Before int64
	Limit  int
}

// RecordKind names a family of records.
type RecordKind byte

// Record kinds. Their values are opaque to meta: the package that owns
// the kind encodes them.
const (
	RecordKey  RecordKind = 'k' // access keys and their grants (internal/access)
	RecordRule RecordKind = 'l' // abuse rules (internal/access/rules)
	RecordLock RecordKind = 'v' // WebDAV locks, by token (internal/frontend/webdav)
	// RecordSnapSchedule is a bucket's snapshot schedule, named by the
	// bucket (internal/store/snapschedule.go); log version 10.
	RecordSnapSchedule RecordKind = 'p'
	// RecordGroup is the group map of a namespace split into groups
	// (docs/design/0009-scale.md): named by a bucket, its value the
	// namespace group that holds the bucket ("2"; no record: the root
	// group). RecordMove is a move of a file across groups in progress
	// (its intent, kept in the source group until the move is done). Log
	// version 14; only internal/sim writes them so far.
	RecordGroup RecordKind = 'G'
	RecordMove  RecordKind = 'M'
)

// Record is a small cluster-wide setting kept in the log, so that every
// node knows it within the propagation bound: an access key, an abuse
// rule. Name is unique within its Kind.
type Record struct {
	Kind  RecordKind
	Name  string
	Value []byte
}

// Record limits enforced by Apply (ErrInvalid beyond them).
const (
	MaxRecordName  = 255
	MaxRecordValue = 256 << 10
)

// Result is the outcome of applying one Command.
type Result struct {
	Err     error
	Created bool   // OpPutFile: no file existed before
	Inode   *Inode // OpPutFile/OpMkdir/OpSetAttr: the new inode
	// Freed lists, for OpReap and OpReapOrphans, the blobs whose deletion
	// was approved: every node may now delete its copies, and only now.
	Freed []cas.Hash
	// Changed lists paths ("bucket/path") whose resolution changed, for
	// path caches; ChangedAll means "drop every cached path" (rename of a
	// directory, bucket deletion).
	Changed    []string
	ChangedAll bool
	// Name is the name of the record OpPutRecord wrote (assigned when
	// the command's was empty).
	Name string
	// Lock is the outcome of a lock command.
	Lock *LockResult
	// Count is how many trash entries OpTrashPurge dropped.
	Count int
	// Own is the outcome of OpOwn (and OpDisown: the claim given up).
	Own *OwnResult
}

// GarbageEntry is a blob whose reference count fell to zero at TimeNs.
type GarbageEntry struct {
	Hash   cas.Hash
	TimeNs int64
}
