// Package fastpath is httpapi's fast HTTP/1.1 path: a minimal server for
// the GETs and HEADs that make most of the traffic, on the same listener
// as net/http, to which it hands every other connection. It owns the
// socket; the API it serves is a Planner's.
//
// net/http costs a small-file GET two write(2) calls (its 4 KiB writer
// flushes the header, then the body goes out alone), a context, a header
// map and a sorted header write. Serve runs its own accept loop instead
// and serves each connection with the loop of conn.go.
//
// # The seam
//
// A parsed GET or HEAD goes in, a plan comes out. For each request it
// takes, the connection calls Planner.Plan with the Request (method,
// version, target, decoded path, raw query, the dozen header fields a GET
// depends on, the client) and a Plan holding the connection's pending
// answers. The planner appends the answer's head to them and names its
// body: none (the answer is whole), a span of a local file (BodyFile), a
// piece of memory it lends (BodyLent), bytes to read from a Source into
// the write buffer (BodyRead) or to stream from it (BodyStream). Or it
// hands the request off, having written nothing. After sending, the
// connection calls Done, with the bytes sent and how the send ended.
// A field the Request does not keep (such as the fields a signature
// covers) is read from its raw header block with Request.Field, without
// allocating.
//
// The planner's contract is that every answer it plans leaves byte for
// byte as the Fallback, net/http, would send it (the Date value aside):
// the differential test of package fastpathtest (Run) checks it on a
// planner and its net/http handler; httpapi's TestFastPathDifferential is
// that test for Cairn's native API.
//
// # What it owns
//
//   - Parse: each connection has a pooled 8 KiB read buffer. The request
//     line and header block are parsed in place, without consuming or
//     copying them. Only GET and HEAD in HTTP/1.1 or 1.0, of an
//     origin-form printable-ASCII target, with CRLF lines, no body, no
//     Expect or Upgrade and a plain Connection field are taken; anything
//     else, a malformed percent escape, or a header block over
//     min(8 KiB, MaxHeaderBytes), is handed off (FuzzParseFastRequest
//     checks the parser against net/http's).
//   - Hand-off: the connection, wrapped so that its reads first return the
//     bytes still buffered (the current request onwards), goes through a
//     channel-backed net.Listener to the Fallback for the rest of its
//     life, after the answers already made are written. A connection
//     moves at most once.
//   - Encoding helpers (encode.go) for what net/http adds to a head: the
//     status line, Date (from a once-a-second cache), Connection, and
//     field values sanitized as net/http's Header.Write.
//   - Sending. Answers to pipelined requests already buffered are batched
//     into one write (an answer with a lent body sends the batch before
//     it along with it). A BodyRead body (at most MaxBody, 64 KiB) is read
//     with one ReadAt into the write buffer after its head and leaves with
//     it in one write; a failed read becomes the planner's Unreadable
//     answer, as nothing of it was sent. A BodyLent body (a volume's
//     memory map) leaves with the pending answers and its head in one
//     sendmsg(2) of two iovecs: the kernel copies it from the page cache
//     into the socket, with no user-space copy. A BodyFile body (at least
//     SendfileMin: Linux, TCP) leaves with sendfile(2) at an explicit
//     offset after the head sent with MSG_MORE (sendfile_linux.go: no
//     descriptor per request, no user-space copy). A BodyStream body
//     follows the flushed head through the Source's WriteRangeTo.
//     (Sendfile of small bodies too was measured: about 1 µs less CPU per
//     GET at 20 connections, but slower at 1–5 connections, as head and
//     body take two system calls; see bench/BENCHMARKS.md, 2026-11-22
//     session 2.)
//   - Socket I/O (io_linux.go): reads, writes and the sendmsg above are
//     made in RawConn callbacks with raw system calls
//     (syscall.RawSyscall: no entersyscall/exitsyscall). A Go socket is
//     non-blocking, so these never wait: EAGAIN returns to the runtime's
//     poller, with the deadlines, as net.Conn does. The point is the
//     runtime's sysmon: every ordinary system call wakes it from its deep
//     sleep, after which it polls every 20 µs for a millisecond and
//     retakes (hands off) Ps found in system calls, which on the 2-core
//     bench host cost 4–6% of the server's CPU in nanosleep wake-ups and
//     context switches. sendfile(2) is raw too when the plan says the
//     pages are resident (Plan.Resident), and an ordinary system call
//     otherwise, since it may then wait for the disk.
//   - TLS (tls.go; Config.TLS): each connection's handshake runs in its
//     own goroutine, bounded by ReadHeaderTimeout from accept, and the
//     loop above then reads and writes through the *tls.Conn, so that a
//     batch of answers leaves as one write of whole records (a body too
//     large for the write buffer is streamed through it: sendfile and
//     lent bodies do not apply, as crypto/tls must copy the bytes to
//     encrypt them). crypto/tls itself runs over the raw socket calls
//     below (rawTCP, with one rawIO for reads and one for writes, as
//     net/http may read and write at once after a hand-off). A
//     connection that negotiates HTTP/2 by ALPN, or whose client
//     presents a certificate (the cluster's peers), is handed off whole
//     as the *tls.Conn, before any request is read, so that net/http
//     serves HTTP/2 and handlers see Request.TLS; one handed off later
//     reaches net/http as a plain net.Conn, whose TLS state TLSState
//     returns (httpapi sets Request.TLS from it). Plain HTTP sent to the
//     port gets net/http's 400. kTLS (the kernel encrypting, so that
//     sendfile and the raw writes above stay) needs the kernel's "tls"
//     upper-layer protocol, which the bench host does not have
//     (/proc/sys/net/ipv4/tcp_available_ulp lists only mptcp), and Go's
//     crypto/tls hands out its traffic secrets only to a KeyLogWriter and
//     never its record sequence numbers: it was not built
//     (bench/BENCHMARKS.md, HTTPS).
//   - Timeouts: ReadHeaderTimeout from the first byte of a request to the
//     end of its header block (slowloris; the first request's clock
//     starts at accept), IdleTimeout between requests, WriteTimeout per
//     write, extended while a body progresses (DeadlineWriter, which
//     httpapi's net/http handler uses too). The idle deadline is reset
//     lazily (only when the one set lies more than IdleTimeout/8 early; if
//     that one passes first, the exact one is set and the wait goes on),
//     sparing a runtime timer update per request. Shutdown closes the
//     listeners and idle connections and lets answers in progress end.
//   - Allocation: none per request of its own. The Request and the Plan
//     live in the pooled connection, so that the interface calls to the
//     planner take no pointer to the stack; buffers are pooled; the path
//     is decoded into a per-connection scratch.
//
// # What it must not do
//
//   - Know Cairn: it imports no package of Cairn (not the store, not
//     access), and knows nothing of buckets, keys, routes, rules or error
//     kinds. What a request means, and which bytes answer it, is the
//     planner's; how a failure is worded or logged too (Done gets the raw
//     error).
//   - Write anything of a request's answer before the planner planned it,
//     nor send a head whose body is not known readable as the planner
//     decided it (a BodyStream's first byte is the planner's to check).
//   - Keep a request's bytes past its Done, or let the planner keep them:
//     they are views of buffers reused for the next request.
//
// It lives under httpapi rather than beside it (internal/frontend/...):
// it is not a front end of its own, serves only httpapi's listener, and
// its hand-offs go to httpapi's net/http server; the name says what it
// provides.
package fastpath
