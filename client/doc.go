// Package client is the public Go client of Cairn's native HTTP API
// (docs/http-api.md). The command-line tool, the mount and the end-to-end
// tests use it.
//
// A Client is safe for concurrent use by many goroutines and keeps a pool of
// keep-alive connections to the server, so parallel uploads (see Sync) reuse
// connections instead of paying a handshake per file.
//
// Invariants:
//   - The package imports nothing from Cairn's internal packages: its wire
//     types (BucketInfo, ObjectInfo, ListResult) mirror the server's JSON
//     shapes with the same tags.
//   - Every non-2xx answer becomes an *Error carrying the HTTP status and the
//     server's error code; errors.Is(err, ErrNotFound) and friends test the
//     kind, whatever context the error was wrapped in.
//   - Paths are inside a bucket, use "/" as separator and have no leading
//     slash; the client escapes each segment, so any UTF-8 name survives.
//   - Redirects are not followed: the API answers 301 only for a directory
//     addressed without its trailing slash, which Stat reports as a directory.
package client
