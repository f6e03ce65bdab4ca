// Package httpapi serves Cairn's native HTTP API (docs/http-api.md): files
// under /BUCKET/PATH, bucket administration under /_cairn/buckets, and the
// node endpoints /_cairn/health and /_cairn/metrics. It is a protocol
// adapter only: everything it serves comes from a store.Store.
//
// # Request flow
//
// Every request goes through the same five steps, in ServeHTTP (or, for
// GETs and HEADs of files, the fast path below, which shares them), after
// the front door (door.go) has checked the abuse rules and chosen the API
// (native, WebDAV, S3, node endpoints):
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
// # Fast path
//
// Serve runs the fast path (package fastpath): its own HTTP/1.1 loop on
// the listener, which parses GETs and HEADs in place and asks this
// package's planner (fastplan.go, a fastpath.Planner) for each answer;
// every other connection it hands to the net/http server, for the rest of
// the connection's life. fastpath's doc.go describes the connection, its
// buffers, the system calls and the timeouts; this package decides:
//
//   - A request taken is decided by the same code as in ServeHTTP: the
//     front door (door.go, frontDoor: abuse rules, WebDAV, S3 and
//     presigned URLs, node endpoints; one function for both paths),
//     parseTarget, openRead (authenticate, bucket, authorize, open) and
//     planObject (conditionals and Range), and errors by the same status
//     table and errorBody. What the fast path leaves to net/http is
//     handed off before anything is written: S3 (but presigned and
//     header-signed GETs of plain objects, below) and node endpoints,
//     consistent reads, directories, redirects, and WebDAV requests but
//     GETs of files.
//   - A presigned S3 GET or HEAD (doorPresigned) is verified once per URL
//     by S3Handler.Presigned (cached until it expires; the key re-checked
//     on every hit) and served as the native GET of the object, unless the
//     S3 API would answer otherwise (an invalid signature, an error, an
//     object with S3 headers): those go to net/http and the S3 handler.
//   - A GET or HEAD signed with SigV4 in its Authorization header (doorS3;
//     the SDKs' GetObject and HeadObject) is S3's to plan
//     (S3Handler.PlanSigned, planSigned): the signature is checked in full
//     on every request (each carries a new x-amz-date and signature, so no
//     cache of verified requests would be honest) without allocating,
//     then S3's own checks run and its head is written as its ServeHTTP
//     writes it through net/http (the x-amz-request-id value aside); the
//     body is planned as a native GET's. Errors, conditionals, other
//     operations and objects with S3 headers go to net/http. A body that
//     cannot be read before the head leaves is the native 500 (where the
//     S3 handler would send its head and cut the connection).
//   - The answer is encoded as net/http would write it (same fields, same
//     order: the handler's sorted, then Date, Content-Length of error
//     bodies, Connection), checked byte for byte against net/http by
//     TestFastPathDifferential, the contract test of the seam.
//   - The body (planBody): a body of at least fastpath.SendfileMin that
//     the store can lend as one piece of a local volume file (store's
//     LocalAccess.LocalSpan; Linux, TCP) leaves with sendfile(2) at its
//     offset (raw when LocalAccess.Resident finds its pages in the page
//     cache: mincore(2) on the volume's map); a body of up to
//     fastpath.MaxBody (64 KiB) that the store can lend from a volume's
//     memory map (LocalAccess.LocalBytes, over blob.Store.MappedData: one
//     local blob, mapped volume; the needle header and the last byte of
//     the range checked under the fault guard, the volume held by a
//     blob.Ref until the send returns) leaves with its head in one
//     sendmsg(2); another small body (a remote blob, no map, not TCP) is
//     read into the write buffer and leaves with its head in one write;
//     a larger one follows the head through Object.WriteRangeTo once its
//     first byte was read (probeBody).
//   - No byte of a corrupt blob is sent: the blob store checks a needle
//     whole (CRC) the first time it lends, hands out for sendfile or reads
//     it, before any of it leaves, and quarantines a copy that fails
//     (blob package, "Verified reads"). The lend or span is then refused
//     and the body is read with Object.ReadAt, which in a cluster reads a
//     replica and alone fails with store.ErrCorrupt: a 500 before the
//     head, as for any unreadable body (corrupt_test.go).
//   - The head of a plain 200 (no conditional or Range field) is encoded
//     once per cached version of a file and kept in the store object's
//     memo slot (store.Memoizer; the store hands every reader of a
//     cached version the same object): a GET of a hot file touches one
//     encoded block instead of the inode's strings, the hex SHA-256 and
//     the MIME table. It is re-encoded if the bucket's Cache-Control
//     changed. A checksum sidecar's answer is kept in the same memo
//     (planSidecar).
//   - Metrics and access log lines (the planner's Done) are the same as
//     net/http's. A GET allocates about once on the fast path (the path
//     string), plus what the store's Open allocates (nothing for a cached
//     file of store.Local; TestServeFastRealStoreAllocs), nothing for a
//     body lent from a map (blob.Ref is a value), plus two for a body sent
//     with sendfile (blob.Store.Locate's release function).
//
// Config.DisableFastPath sends every connection to net/http;
// Config.DisableSendfile keeps the fast path off sendfile.
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
