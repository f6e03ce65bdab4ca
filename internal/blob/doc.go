// Package blob is the node-local blob store: blobs named by their SHA-256,
// packed into append-only volume files (package volume), found through a
// compact in-memory index.
//
// # Layout in Config.Dir
//
//	00000001.vol, 00000002.vol, ...   volume files; the highest id is active
//	index.ckpt                        index checkpoint written by Close (layout in checkpoint.go)
//	*.tmp                             leftovers of an interrupted checkpoint, removed at Open
//
// # Write path and group commit
//
// Put appends the needle to the active volume under the store mutex, inserts
// it into the index, gives the append a sequence number and then waits until
// that sequence is durable. The first waiter that finds no fsync in flight
// becomes the leader and fsyncs the active volume for every append that
// completed before it started; the others wait on a condition variable. N
// concurrent Puts therefore cost about two fsyncs, not N. When the active
// volume would pass MaxVolumeSize it is fsynced (sealed) and a new volume is
// created durably (file fsync + directory fsync).
//
// # Failures
//
// A failed write or fsync is never retried: the store becomes read-only
// (ErrReadOnly on every later write, reads continue), logs at Error, and
// removes from the index every Put that was not yet durable, so nothing
// unacknowledged is reported as stored. ENOSPC from a write, or free space
// below MinFreeBytes, returns ErrNoSpace; the volume truncates the partial
// needle away, so the store stays consistent and writable once space is
// freed.
//
// # Index
//
// See index.go: 20-byte slots (hash bytes 0..8, volume, offset/8, length) in
// 256 open-addressing shards chosen by hash byte 8; under 54 bytes of RAM per
// blob at any load. Every read checks the full hash in the needle header on
// disk, so hash-prefix collisions are handled correctly.
//
// # Read path
//
// Reads take a shard read lock, then an atomic reference on the volume
// (which keeps compaction from closing it), then issue one pread. ReadAt of
// up to 64 KiB reads header and data in that one pread into a pooled buffer;
// nothing is allocated per read.
//
// # Recovery
//
// Open loads index.ckpt if its CRC and its per-volume valid offsets match the
// volumes on disk (otherwise it is ignored with a Warn and every volume is
// scanned in full), then scans every volume in id order from its
// checkpointed offset to the end. A later needle for a hash supersedes an
// earlier one, a tombstone removes the hash, and the first invalid needle
// (torn or CRC mismatch) ends the volume: the tail is truncated there and
// logged at Warn. Appends only go to the highest volume (compaction copies
// into it too), so (volume id, offset) order is the order of operations.
// Per-volume live bytes are recomputed from the index; tombstone bytes are
// kept in the checkpoint.
//
// # Compaction
//
// Compact rewrites sealed volumes whose garbage exceeds CompactGarbageRatio:
// live needles are appended to the active volume and made durable, the
// index entries that still point at the old location are switched, and the
// old volume is removed once no reader holds a reference. A crash in
// between leaves two copies, and the scan keeps the later one.
package blob
