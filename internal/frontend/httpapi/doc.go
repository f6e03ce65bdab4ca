// Package httpapi serves Cairn's native HTTP API (docs/http-api.md): files
// under /BUCKET/PATH, bucket administration under /_cairn/buckets, and the
// node endpoints /_cairn/health and /_cairn/metrics. It is a protocol
// adapter only: everything it serves comes from a store.Store.
//
// # Request flow
//
// Every request goes through the same five steps, in ServeHTTP (or, for
// GETs and HEADs of files, the fast path below, which shares them):
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
// net/http costs a small-file GET two write(2) calls (its 4 KiB writer
// flushes the header, then the body goes out alone), a context, a header
// map and a sorted header write. So Serve runs its own accept loop and
// serves each connection with a minimal HTTP/1.1 loop (fast.go, fastreq.go,
// fastresp.go):
//
//   - Each connection has a pooled 8 KiB read buffer. The request line and
//     header block are parsed in place (parseFastRequest), without
//     consuming or copying them. Only GET and HEAD in HTTP/1.1 or 1.0, of
//     an origin-form printable-ASCII target, with CRLF lines, no body, no
//     Expect or Upgrade and a plain Connection field are taken; anything
//     else, or a header block over min(8 KiB, MaxHeaderBytes), is handed
//     off.
//   - Hand-off: the connection, wrapped so that its reads first return the
//     bytes still buffered (the current request onwards), goes through a
//     channel-backed net.Listener to the http.Server for the rest of its
//     life, after the answers already made are written. A connection
//     moves at most once; uploads, admin calls, listings, redirects,
//     sidecars and malformed requests (400, 431, 505) are net/http's.
//   - A request taken is decided by the same code as in ServeHTTP:
//     parseTarget, openRead (authenticate, bucket, authorize, open) and
//     planObject (conditionals and Range), and errors by the same status
//     table and errorBody. Directories, redirects and sidecar candidates
//     are handed off even then: nothing has been written yet.
//   - The answer is encoded into a pooled write buffer as net/http would
//     write it (same fields, same order: the handler's sorted, then Date
//     from a once-a-second cache, Content-Length of error bodies,
//     Connection), checked byte for byte against net/http by
//     TestFastPathDifferential. A body of up to 64 KiB that the store can
//     lend from a volume's memory map (store's object.LocalBytes, over
//     blob.Store.MappedData: one local blob, mapped volume; the needle
//     header and the last byte of the range checked under the fault
//     guard, the volume held by a blob.Ref until the send returns) leaves
//     with the pending answers and its head in one sendmsg(2) of two
//     iovecs: the kernel copies it from the page cache into the socket,
//     with no user-space copy. Otherwise (a remote blob, no map, not TCP)
//     it is read into the write buffer with one Object.ReadAt and leaves
//     with its head in one write. A larger body, when the store can lend
//     it as one piece of a local volume file (store's object.LocalSpan;
//     Linux, TCP), leaves with sendfile(2) at an explicit offset after
//     the head sent with MSG_MORE (fastsend_linux.go: no descriptor per
//     request, no user-space copy); otherwise it follows the header
//     through Object.WriteRangeTo. (Sendfile of small bodies too was
//     measured: about 1 µs less CPU per GET at 20 connections, but slower
//     at 1–5 connections, as head and body take two system calls; see
//     bench/BENCHMARKS.md, 2026-11-22 session 2.) Answers to pipelined
//     requests already buffered are batched into one write (an answer
//     with a lent body sends the batch before it along with it).
//   - Socket I/O (fastio_linux.go): reads, writes and the sendmsg above
//     are made in RawConn callbacks with raw system calls
//     (syscall.RawSyscall: no entersyscall/exitsyscall). A Go socket is
//     non-blocking, so these never wait: EAGAIN returns to the runtime's
//     poller, with the deadlines, as net.Conn does. The point is the
//     runtime's sysmon: every ordinary system call wakes it from its deep
//     sleep, after which it polls every 20 µs for a millisecond and retakes
//     (hands off) Ps found in system calls, which on the 2-core bench host
//     cost 4–6% of the server's CPU in nanosleep wake-ups and context
//     switches. sendfile(2) of a large body is raw too when its pages are
//     in the page cache (store's object.Resident: mincore(2) on the
//     volume's map, vfs.Resident), and an ordinary system call otherwise,
//     since it may then wait for the disk.
//   - No byte of a corrupt blob is sent: the blob store checks a needle
//     whole (CRC) the first time it lends, hands out for sendfile or reads
//     it, before any of it leaves, and quarantines a copy that fails
//     (blob package, "Verified reads"). The lend or span is then refused
//     and the body is read with Object.ReadAt, which in a cluster reads a
//     replica and alone fails with store.ErrCorrupt: a 500 before the
//     head, as for any unreadable body (corrupt_test.go).
//   - The head of a plain 200 (no conditional or Range field) is encoded
//     once per cached version of a file and kept in the store object's
//     memo slot (store's object.Memo; the store hands every reader of a
//     cached version the same object): a GET of a hot file touches one
//     encoded block instead of the inode's strings, the hex SHA-256 and
//     the MIME table. It is re-encoded if the bucket's Cache-Control
//     changed.
//   - Timeouts: ReadHeaderTimeout from the first byte of a request to the
//     end of its header block (slowloris; the first request's clock starts
//     at accept), IdleTimeout between requests, WriteTimeout per write,
//     extended while the body progresses, as below. The idle deadline is
//     reset lazily (only when the one set lies more than IdleTimeout/8
//     early; if that one passes first, the exact one is set and the wait
//     goes on), sparing a runtime timer update per request. Shutdown closes the
//     listeners and idle connections, lets answers in progress end, then
//     shuts the http.Server down.
//   - Metrics and access log lines are the same as net/http's. A GET
//     allocates about once on the fast path (the path string), plus what
//     the store's Open allocates (nothing for a cached file of
//     store.Local; TestServeFastRealStoreAllocs), nothing for a body lent
//     from a map (blob.Ref is a value), plus two for a body sent with
//     sendfile (blob.Store.Locate's release function).
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
