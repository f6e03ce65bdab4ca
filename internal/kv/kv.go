package kv

import "errors"

// ErrNotFound is returned by Get when the key does not exist.
var ErrNotFound = errors.New("kv: not found")

// Reader reads an ordered key space.
type Reader interface {
	// Get returns a copy of the value stored at key, or ErrNotFound.
	Get(key []byte) ([]byte, error)
	// Scan calls fn for each key in [lower, upper) in ascending order
	// (upper nil means no bound) until fn returns false. k and v are valid
	// only during the call.
	Scan(lower, upper []byte, fn func(k, v []byte) bool) error
}

// Batch is a set of writes applied atomically by Commit. Reads through a
// Batch see the batch's own writes on top of the store. A Batch is not safe
// for concurrent use.
type Batch interface {
	Reader
	Set(key, value []byte) error
	Delete(key []byte) error
	// Commit applies the batch; with sync it is durable on return.
	Commit(sync bool) error
	// Close releases the batch; it is a no-op after Commit.
	Close() error
}

// Store is an ordered KV store. Safe for concurrent use.
type Store interface {
	Reader
	// NewBatch returns an indexed (readable) batch.
	NewBatch() Batch
	// Snapshot returns a consistent read-only view; Close it when done.
	Snapshot() Snapshot
	// NewIngest starts a large set of sorted changes applied at once
	// without holding them in memory: they are written to files on the
	// store's own disk (Pebble: sstables) as they come, then made visible
	// in one atomic, durable step. A Raft snapshot is installed this way.
	NewIngest() (Ingest, error)
	// Sync makes every batch committed before the call durable (batches
	// committed without sync survive a crash only once synced).
	Sync() error
	Close() error
}

// Snapshot is a consistent point-in-time view of a Store.
type Snapshot interface {
	Reader
	Close() error
}

// Ingest is a set of changes being staged (Store.NewIngest). Changes go into
// the current file, in strictly increasing key order; Cut ends it. Two
// files must not overlap (the keys of one all sort before or after the
// keys of the other). Not safe for concurrent use.
type Ingest interface {
	Set(key, value []byte) error
	Delete(key []byte) error
	// Cut ends the current file; the next change starts a new one.
	Cut() error
	// Apply makes every change visible at once and durable, as one commit
	// would (a crash leaves all of them or none), and removes the files.
	// Reads, snapshots and batches opened before see the store as it was.
	Apply() error
	// Abort removes the files and applies nothing.
	Abort() error
	// Staged is the number of bytes written so far.
	Staged() int64
}
