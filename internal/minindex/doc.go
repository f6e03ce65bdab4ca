// Package minindex carries the minimum applied index of a blob write in
// its context: the receiving node must have applied the namespace log at
// least that far before it stores the blob. The uploader sets it to the
// index its upload started from, so any reap the upload saw is applied on
// the receiver (and its deletion queued there) before the receiver decides
// that a copy it already holds will do (see store.Local.GuardReplicaPut).
// A repair hand-off confirms copies with HasBlobs under the same rule.
//
// The store and replication set it, replication's guard reads it on the
// receiving node, and the transport carries it between nodes (over HTTP
// as the signed query parameter "min"; in memory, in the context).
//
// It is a leaf, so that the store sets it without importing the
// transport: it must not import anything of Cairn.
package minindex
