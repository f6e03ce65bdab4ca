// Package webdav serves buckets over WebDAV (RFC 4918): at /_dav/BUCKET/
// on the public listener (routed by internal/frontend/httpapi) and at
// /BUCKET/ on --webdav-listen. It is golang.org/x/net/webdav over
// store.Store: one FileSystem per bucket, dead properties kept as extended
// attributes, COPY by store.Concat without copying bytes, Basic auth with
// access keys, and WebDAV locks kept in the log as records of kind 'v'
// (Locks), so that a lock taken through one node holds on every node.
// docs/webdav.md has the behaviour clients see.
//
// It owns the mapping of WebDAV onto the store and its lock records. It
// must not import anything below the store (test/deps), and it does not
// take or honour the mounts' file locks: the two kinds of lock are
// separate (docs/webdav.md).
package webdav
