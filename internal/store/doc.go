// Package store is the one API every front end calls (HTTP, S3, WebDAV,
// FUSE, CLI): buckets, Put (streaming), Open/ReadAt/WriteRangeTo (ranges),
// Stat, List (prefix, delimiter, pagination in S3 order), Mkdir, Delete,
// Rename, with typed errors (ErrNotFound, ErrNoSpace, ...).
//
// Local implements it for one node over internal/blob (content) and
// internal/meta (namespace, applied through a consensus.Log).
//
// Put path: the body is read in blobs of blob.MaxSize, each hashed
// (SHA-256 names the blob; MD5 and SHA-256 of the whole file are computed
// in the same pass) and written to the blob store while the next one is
// read, at most ParallelBlobWrites in flight, so a 5 GiB upload holds a few
// blobs of memory. Each blob write returns once durable (group commit).
// Only then is an OpPutFile command proposed; the write is acknowledged
// when the command is applied and its KV batch synced. A body shorter or
// longer than its declared size, a client gone mid-body, or a full disk
// leaves no file visible (blobs already written become orphans and are
// collected after GCGrace).
//
// Get path: the path is resolved through an in-memory cache of inodes
// (invalidated by every applied command that touches the path), then each
// extent is read with one pread into a pooled buffer, or sent with
// sendfile when it is 64 KiB or larger.
//
// Garbage: blob reference counts live in the namespace. A blob whose count
// falls to zero is queued with the time; after GCGrace an OpReap command
// approves its deletion in the log and every node deletes its copy.
// Uploads pin the blobs they use, so a local copy an upload relies on is
// never deleted under it; a reap that raced an upload is detected by the
// command's StartIndex (meta.ErrBlobReaped) and the upload retries.
//
// Orphans (local copies no file references and no reap is pending for:
// failed uploads, copies a replica put spared) are deleted on the log's
// word too: the GC pass proposes meta.OpReapOrphans for those seen for
// GCGrace, and the entry's approval goes through Applied, the reap guard
// and the deleter like a reap's. No code path of this package deletes a
// copy the log has not condemned (docs/design/0004-blob-deletion.md).
package store
