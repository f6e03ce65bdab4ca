// Package clienttest provides an in-memory fake of Cairn's native HTTP API
// (docs/http-api.md) for tests of the client package, the command-line tool
// and anything else that talks to a Cairn node over HTTP.
//
// The fake implements the subset of the contract that clients use: bucket
// administration, PUT (files and directories), GET/HEAD with single ranges,
// DELETE, rename, and JSON listings with recursive mode, prefix filter and
// pagination in S3 order. It keeps everything in memory, is safe for
// concurrent use, and can inject failures (Server.FailPut) and count
// requests (Server.Count) so tests can assert on both.
//
// Deliberate simplifications: no conditional requests other than If-Match and
// If-None-Match: * on PUT, no checksum sidecars, no HTML listings and no
// index.html (a GET of a directory with Accept: application/json always
// answers the listing). Recursive listings hold files only.
package clienttest
