// Package httpapi serves Cairn's native HTTP API (docs/http-api.md): files
// under /BUCKET/PATH, bucket administration under /_cairn/buckets, and the
// node endpoints /_cairn/health and /_cairn/metrics. It is a protocol
// adapter only: everything it serves comes from a store.Store.
//
// # Request flow
//
// Every request goes through the same five steps, in ServeHTTP:
//
//  1. Parse. The percent-decoded path (r.URL.Path) is validated and split
//     into bucket, path and trailing slash by parseTarget without
//     allocating: ".", ".." and empty segments, NUL and other control
//     bytes, invalid UTF-8, names over 255 bytes and paths over 4096 bytes
//     are refused with 400 before anything else happens. Headers
//     (Range, If-*, X-Cairn-Mtime, X-Cairn-Mode, Accept) have small parsers
//     of their own, table-tested in parse_test.go; http.ServeContent is not
//     used because it sniffs content and needs a Seeker.
//  2. Authorize. internal/access turns the Authorization header into a
//     principal and decides: writes and /_cairn/buckets need the admin key;
//     reads of a public bucket need nothing, of a private one the key.
//  3. Store. One or two store.Store calls.
//  4. Map error. Every error, from the store, access or this package, goes
//     through the one table in errors.go (errors.Is) to a status and a code;
//     the body is JSON {"error":"...","code":"..."}.
//  5. Encode. File GETs set pre-canonicalized headers directly in the
//     header map (their values built in one scratch buffer converted to one
//     string), call WriteHeader, and hand the body to Object.WriteRangeTo,
//     which may use sendfile: the response writer wrappers keep
//     io.ReaderFrom. Other answers are JSON or a small escaped HTML listing.
//
// After the handler, the request is counted in the metrics (Metrics) and,
// if configured, appended to the access log in the combined format, which a
// background goroutine writes out (accesslog.go): a stuck log writer costs
// dropped, counted lines, never a blocked request.
//
// # Slow clients
//
// Serve's http.Server has ReadHeaderTimeout, IdleTimeout and
// MaxHeaderBytes (431 from net/http), but no whole-request ReadTimeout or
// WriteTimeout, which would kill big transfers. Instead the connection's
// read deadline is pushed ReadTimeout ahead while the request body makes
// progress, and its write deadline WriteTimeout ahead while the response
// body does (in chunks of at most 128 KiB): an upload that stalls gets 408
// and stores nothing, a download whose reader stops is cut.
//
// # Decisions beyond the contract
//
//   - A request presenting a wrong key is refused (403) even for a public
//     bucket.
//   - GET DIR/ with "Accept: application/json" lists the directory even if
//     it holds index.html, so that tools can list any directory.
//   - A malformed Range, a range on an empty file and several ranges are
//     all answered with the whole file (200), as RFC 9110 allows.
//   - PUT DIR/ on an existing directory answers 200; the body of a mkdir
//     must be empty.
//   - net/http itself answers 431 and malformed requests, in plain text.
//   - /_cairn/health and /_cairn/metrics need no key.
//   - The fsync histogram lives in Metrics (Metrics.ObserveFsync) so that
//     the store can be given it before the server exists.
package httpapi
