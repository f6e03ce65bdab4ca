// Package meta is Cairn's namespace: a deterministic state machine of
// buckets, directories, files, blob reference counts and the blob garbage
// queue, applied from the Raft log onto a kv.Batch.
//
// # Determinism
//
// Apply reads nothing but its commands and the batch: times come from
// Command.TimeNs, inode numbers from a counter in the store, and every
// write of a command is staged, then flushed to the batch in key order.
// Maps never leak their order (xattrs are encoded sorted, refcount changes
// applied in hash order). The same log therefore yields byte-identical
// stores on every node, whatever the batching of entries into commits (a
// test checks it against kv.NewMem and Pebble).
//
// A command either applies whole or changes nothing: its writes are staged
// in a per-command overlay that is dropped when it fails with a Result.Err.
// Apply returns an error only for a KV failure or a corrupt stored value;
// the host must then stop (the state is not known to be deterministic).
//
// # Key layout
//
// Integers are big-endian so that they sort numerically. A time t (int64
// Unix ns) in a key is stored as uint64(t) XOR 1<<63 so negative times sort
// first. Values are opaque to the KV store.
//
//	i ino(8)                 → inode, encoded as below
//	d parent(8) keyname      → child ino(8) + type(1)
//	                           keyname = name for files and symlinks,
//	                           name + "/" for directories
//	b name                   → bucket, encoded as below
//	r hash(32)               → refcount u64 (extents naming the blob,
//	                           across all inodes; a blob used twice in one
//	                           file counts twice). Kept at 0 until reaped.
//	g time(8) hash(32)       → empty: the blob's refcount fell to 0 at time
//	h hash(32)               → time(8): reverse of the g key, so that a
//	                           blob referenced again (0 → 1) leaves the queue
//	x hash(32)               → index u64 of the OpReap or OpReapOrphans
//	                           that last approved the blob's deletion
//	y index(8) hash(32)      → empty: the x markers by index, for pruning
//	n id(8)                  → cluster member (Node), encoded as below
//	u hash(32)               → timeNs (varint), replicas (varint): the blob
//	                           was written with fewer copies than wanted
//	                           (under-replicated), in a bucket of that R
//	c kind(1) name           → 1, value: a record (Record: access keys 'k',
//	                           abuse rules 'l', WebDAV locks 'v'); the value is the owner
//	                           package's encoding, opaque to meta
//	l ino(8)                 → the inode's file locks: granted locks and
//	                           FIFO waiters (locks_encoding.go, design 0006)
//	s node(8)                → the node's lock session: epoch, lease, last
//	                           renewal, expired, inodes it has locks on
//	w node(8) epoch(8) owner(8) ino(8) → empty: the owner waits for a lock
//	                           on ino (deadlock detection)
//	O dir(8)                 → 1, node, session, epoch, since: the
//	                           directory's owner (owners.go, design 0008)
//	Q node(8) dir(8)         → empty: the node owns the directory (index)
//	m "ownepoch"             → u64 last directory claim epoch handed out
//	m "fence/" bucket        → 1: the bucket is fenced for a move to another
//	                           namespace group (fence.go, OpFenceBucket)
//	m "seq" kind(1)          → u64 last sequence number given to a record
//	                           of that kind put without a name
//	m "applied"              → u64 last applied log index
//	m "nextino"              → u64 next inode number to allocate
//	m "counts"               → files i64, dirs i64, bytes i64 (24 bytes)
//	m "under"                → u64 number of u records
//
// Prefixes owned by internal/consensus in the same store: R (Raft's log,
// hard state, membership: never replicated) and P (per-proposer sequence
// numbers of applied batches: replicated, part of snapshots).
//
// Directory entries are keyed name + "/" for directories so that a scan of
// a directory yields S3 order, bytewise by full path: "img.png" sorts
// before "img/x" because '.' < '/'. A name is never stored both ways, so a
// lookup tries "name/" then "name" for a parent component and "name" then
// "name/" for the last one (the likelier first; Pebble's Bloom filters make
// the miss cheap).
//
// RootIno (1) is the root directory, created by the first Apply; each
// bucket is a directory entry under it plus its b record. Directory link
// counts follow POSIX: 2 + the number of subdirectories.
//
// # Value encodings
//
// All are versioned by their first byte (currently 1) and use Go's
// varints (uvarint for unsigned, zig-zag varint for signed); a string or
// byte slice is uvarint(len) + bytes; a bool is one byte 0 or 1; a hash is
// its 32 raw bytes. Decoders reject unknown versions, truncation, trailing
// bytes and absurd lengths with ErrCorrupt.
//
//	inode:   1, type(1), mode, uid, gid, nlink (uvarint), size, mtime,
//	         ctime (varint), contentType, etag, sha256, target (string),
//	         n extents (uvarint) × [hash, offset varint, length varint],
//	         n xattrs (uvarint) × [key string, value bytes] in key order.
//	         The inode number is not stored: it is the key.
//	bucket:  5, name, ino (uvarint), public, checksumSidecars (bool),
//	         cacheControl, createdNs, replicas, writeQuorum (varint),
//	         strict (bool), uid, gid, fileMode, dirMode (uvarint),
//	         owner (string: the access key id that created it), acl (string)
//	node:    1, id (uvarint), name, url, clusterURL, zone (string),
//	         weight (uvarint of the float64 bits), witness (bool),
//	         state (1), joinedNs (varint), gossipAddr (string)
//	entry:   4, n commands (uvarint) × [op(1), bucketName, path, dstPath,
//	         hasBucket(bool) [bucket body], hasFile(bool) [ino uvarint +
//	         inode body], timeNs (varint), ifMatch, ifNoneMatchAny (bool),
//	         startIndex (uvarint), n reap (uvarint) × hash, reapBefore
//	         (varint), hasNode(bool) [node body], n under (uvarint) ×
//	         hash, n replicated (uvarint) × hash]
//
// Versions were bumped (bucket 2, entry 2) before any release; older
// encodings are rejected as corrupt. Bucket 3 and entry 3 (strict,
// under, replicated) and bucket 4 and entry 4 (the bucket's default owner
// and modes) came after data existed: older bodies still decode (strict
// false, no lists, owner root, default modes); an entry of version N
// carries bucket bodies of version N. The node body gained gossipAddr at its
// end, also before any release, without a version bump: node records and
// entries written before it do not decode.
//
// Entry version 8 adds the lock command (OpLock and the session ops). An
// entry without one is still written as version 7, byte for byte, so that
// binaries from before locks decode every entry but lock commands.
//
// New ops keep the entry version: an entry holding OpReapOrphans (op 17)
// is one a binary that predates it refuses to decode (unknown op), so it
// stops applying instead of applying it differently.
//
// # Command semantics (choices not fixed by types.go)
//
//   - OpPutFile replacing a file keeps its inode number and link count and
//     replaces every attribute from Command.File (callers wanting to keep
//     the mode pass it), but for the xattrs: a command without any keeps
//     the file's (its ACLs), as a write to a local file does. File.MtimeNs 0 means "now" (TimeNs); Mode
//     0 means 0644 (0777 for a symlink). Missing parents are created 0755,
//     owned by File.UID/GID. Extents must be contiguous from 0 and cover
//     Size; a symlink has no extents and Size = len(Target).
//   - Blob reference changes of one command are netted per hash first, so a
//     blob kept by a replacement does not bounce through the garbage queue.
//   - Reap check: a blob of a new file that still has an r entry cannot
//     have been reaped since it was written, and is accepted. Otherwise the
//     put fails with ErrBlobReaped if an x marker says it was reaped at an
//     index > StartIndex, or if there is no marker and StartIndex is more
//     than ReapMarkerWindow entries old (the marker may have been pruned).
//   - OpReap deletes the r, g and h keys of each approved blob and writes
//     its x/y marker at the current index; then it prunes markers older
//     than index - ReapMarkerWindow. Pruning runs only inside OpReap (and OpReapOrphans), so it
//     is a pure function of the log.
//   - OpReapOrphans approves the blobs of Reap that have no r entry (never
//     referenced, or already reaped: copies left by uploads that never
//     committed) and writes their x/y markers at the current index, like
//     OpReap; a blob with an r entry (referenced, or count-0 garbage
//     waiting for OpReap) is left alone. A node's orphan sweep proposes
//     it for its own copies; every node deletes its copies on the entry.
//   - OpDelete leaves empty parent directories in place (POSIX); an If-Match
//     on a directory always fails (directories have no ETag).
//   - OpRename: a file replaces a file; a directory replaces an empty
//     directory; a file over a directory is ErrExists, a directory over a
//     file ErrNotDir, a directory over a non-empty directory ErrExists, a
//     directory into its own subtree ErrInvalid; src == dst is a no-op.
//     Missing parents of dst are created.
//   - OpSetAttr replaces Mode, UID, GID, MtimeNs, AtimeNs and Xattrs wholesale (read,
//     modify, propose); path "" is the bucket's directory.
//   - OpLink adds DstPath as a name of Path's file or symlink (same inode,
//     Nlink + 1); DstPath's parent must exist, DstPath must not, and a
//     directory cannot be linked (ErrIsDir). OpDelete of one name drops
//     one link; the inode and its blob references go with the last.
//   - OpReserveInos advances the inode counter by Count (1..65536) and
//     answers the first number (Result.Inode.Ino): numbers nothing else
//     will allocate, for a proposer that must name new files before they
//     are committed (the mount's write-back). An OpPutFile that creates a
//     file, or an OpMkdir that creates the directory, takes File.Ino when
//     it is below the counter and free, else a new number; a replaced file
//     keeps its number.
//   - A change of a hard-linked file (Nlink > 1: new content, attributes,
//     a name removed or replaced, a link added) sets ChangedAll: meta has
//     no index from an inode to its names, and every name's cached view
//     (the store's path cache, the mounts' kernel caches) must see it.
//     Hard links are rare in the workloads Cairn serves.
//   - Under-replicated records: OpPutFile records each blob of Under that
//     is one of the file's extents (a u key with the bucket's R; a blob
//     already recorded keeps its record). OpReplicated drops the records
//     of its blobs; OpReap drops those of the blobs it approves. m "under"
//     counts the records, so every node reports the same count.
//   - Counts: files counts files and symlinks, dirs every directory but the
//     root, bytes the sum of file sizes.
package meta
