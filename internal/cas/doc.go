// Package cas is the content address of Cairn's blobs: the Hash that names
// a blob (the SHA-256 of its bytes), a Blob (bytes with their Hash, and
// optionally their CRC32C, computed with it in one pass by Sums, which
// replicas check instead of re-hashing) and the largest blob, MaxSize. It is a leaf: the namespace (meta), placement,
// the store, replication, the transport and the blob store share these
// names without importing each other.
//
// It must not import anything of Cairn: it is the leaf that the namespace,
// placement, the store, replication, the transport and the blob store
// share.
package cas
