// Package transport carries node-to-node RPCs: Raft messages and snapshots,
// blob replication (put, batched put, ranged get, has) and joins.
//
// Client is what consensus and replica code call; Handler is what they
// implement to serve; neither sees an *http.Request. HTTPClient (New) and
// Server (NewServer) are the real implementation; MemNetwork is the
// in-memory one for tests and internal/sim, with seeded drops, delays,
// duplicates and partitions. RaftSender adapts any Client to the shape of
// consensus.Transport (mixed-destination Send; SendSnapshot of a MsgSnap,
// decoded on the receiver by DecodeSnapshotMeta).
//
// # Connections
//
// HTTP/1.1 over pooled keep-alive connections (MaxIdleConnsPerPeer idle
// connections per peer, so concurrent blob writes do not redial), with
// TCP_NODELAY set explicitly on every dialed connection (Go's default, made
// a guarantee: Nagle's algorithm with delayed ACKs costs 40 ms per small
// RPC). Connect timeout 300 ms. Control calls (HasBlobs, Join) default to a
// 1 s deadline and Raft batches to 500 ms, so a hung peer (one that accepts
// connections and never answers, e.g. SIGSTOPped) costs a caller
// milliseconds, not the kernel's minutes. Each Raft peer has its own bounded
// queue and sender goroutine: a slow peer fills and overflows its own queue
// (messages dropped, OnUnreachable called, as etcd does) and blocks nobody
// else. TLS: a base URL with https:// uses it (no client certificates).
//
// The Server serves every path under PathPrefix ("/_cairn/rpc/") and needs
// the full path (the prefix is part of what is signed). Mount it on the
// public listener with httpapi.Config.ExtraHandlers["/_cairn/rpc/"] or on a
// --cluster-listen listener; a --cluster-listen node must still mount it on
// its public listener for Join, which arrives at the public URL. On its own
// listener, give the http.Server a ReadHeaderTimeout and an IdleTimeout;
// do not set a whole-request ReadTimeout, which would cut long snapshots.
//
// # Authentication
//
// All nodes share the cluster secret S (at least 16 bytes). The HMAC key is
//
//	K = HMAC-SHA256(key=S, msg="cairn rpc v1 key")
//
// (domain separation: S may key other things, such as gossip encryption).
// Every request carries these headers (decimal numbers without sign or
// leading zeros; hex is lowercase):
//
//	Cairn-From:           sender node ID (uint64, non-zero)
//	Cairn-To:             target node ID (uint64); 0 only on Join
//	Cairn-Timestamp:      sender's clock, Unix milliseconds
//	Cairn-Nonce:          16 random bytes, 32 hex digits
//	Cairn-Content-Sha256: 64 hex digits: SHA-256 of the whole body (of no
//	                      bytes for GET); for a snapshot stream
//	                      "STREAM:" + 64 hex digits: SHA-256 of the meta;
//	                      for a blob batch, SHA-256 of its manifest
//	Cairn-Signature:      64 hex digits: HMAC-SHA256(K, string-to-sign)
//
// The string to sign is the concatenation, with "\n" (0x0A) between fields
// and no trailing newline, of:
//
//	"CAIRN-RPC-V1"
//	method              "POST", "PUT" or "GET"
//	request URI         path and query as sent, e.g. "/_cairn/rpc/blob/<hex>?off=0&n=-1"
//	Cairn-From value
//	Cairn-To value
//	Cairn-Timestamp value
//	Cairn-Nonce value
//	Cairn-Content-Sha256 value
//
// The server, before reading any body: requires each header exactly once
// and well formed; requires |server clock - timestamp| <= MaxClockSkew (10 s
// by default); requires Cairn-To to be its own ID (0 accepted on Join only),
// so a request captured on its way to one node cannot be played to another;
// recomputes the signature and compares it in constant time (hmac.Equal);
// then records the nonce, refusing one already seen. Nonces are remembered
// for at least 2×MaxClockSkew (two generations rotated every 2×skew), which
// outlasts the timestamp window, so a replay is refused for as long as its
// timestamp would be accepted. Only requests with a valid signature take a
// nonce. Then it reads the body and compares its SHA-256 with
// Cairn-Content-Sha256. Any failure is 401 with the same text ("authentication
// failed"; the reason is logged at Debug), and the handler is not called. A
// full replay cache (MaxReplayEntries) answers 503.
//
// A snapshot body is too large to hash before acting on it, so it is signed
// as it streams: Cairn-Content-Sha256 signs the meta (checked before the
// handler is called), and the chunked body ends with the trailer
//
//	Cairn-Body-Signature: hex HMAC-SHA256(K, "CAIRN-RPC-V1-BODY\n" +
//	                      Cairn-Signature value + "\n" + hex SHA-256 of the snapshot data)
//
// where the snapshot data is the body after the meta framing. The reader
// given to Handler.ApplySnapshot returns io.EOF only once this trailer
// checked out; a tampered, truncated or unsigned stream ends with an error
// wrapping ErrUnauthorized (answered 401), so a handler that reads to
// io.EOF before committing never applies a forged snapshot.
//
// Responses are not signed. A blob fetched whole is checked against its
// hash by the caller; use https:// base URLs where the network between
// nodes is not trusted.
//
// # Calls
//
// Successful calls answer 204 No Content unless a body is listed. Errors
// answer a text/plain message with a status from one table (Handler): 400
// bad request, 401 authentication, 404 no such blob, 413 body too large, 422
// blob bytes do not match the hash, 503 unavailable, 507 no space, 500
// other; the client maps them back to ErrBadRequest, ErrUnauthorized,
// ErrNotFound, ErrBadRequest, ErrCorrupt, ErrUnavailable, ErrNoSpace,
// ErrRemote. Network failures and deadlines are ErrUnavailable.
//
//	POST /_cairn/rpc/raft         SendRaft → Handler.StepRaft
//	  body: repeated { uvarint(len(m)) ; m = protobuf raftpb.Message }
//	  (uvarint: encoding/binary's, 7 bits per byte, low group first). At most
//	  MaxBodyBytes (64 MiB); the sender closes a batch at MaxRaftBatchBytes
//	  (1 MiB) or when its queue is empty. Every message's From must be
//	  Cairn-From and its To the server's ID (else 400). One batch in flight
//	  per peer, so messages arrive in the order sent.
//
//	POST /_cairn/rpc/snapshot     SendSnapshot → Handler.ApplySnapshot
//	  Transfer-Encoding: chunked, Trailer: Cairn-Body-Signature
//	  body: uint32 big-endian len(meta) ; meta (at most MaxBodyBytes) ;
//	        snapshot data to the end
//	  Neither end buffers the data; the client cancels the call when the
//	  body makes no progress for SnapshotStallTimeout (10 s).
//
//	PUT /_cairn/rpc/blob/<64 hex: SHA-256 of the blob>[?min=<uint64>][&crc=<8 hex>]    PutBlob → Handler.PutBlob
//	  Content-Length: n (at most MaxBlobBytes, 4 MiB); body: the blob.
//	  The server checks SHA-256(body) against the name (422 if they differ)
//	  before the handler is called. The client signs the name as the body
//	  digest (it is the body's SHA-256; no second hash pass), so a body
//	  that does not match is answered 422, not 401, when the signed digest
//	  is the name; the handler is not called either way. "crc", when
//	  present, is the CRC32C of the body (below, "Blob checks").
//
// # Blob checks
//
// A writer that hands a blob to replication computes its CRC32C in the
// same pass as its SHA-256 name (cas.Sums) and sends it with PutBlob as
// the query parameter "crc", covered by the request's signature. A server
// on node-to-node TLS (Config.TLS set: every request came over mutual TLS
// from the node its signature names, so TLS authenticated the bytes)
// checks the body's CRC32C against it instead of hashing it with SHA-256
// (about 0.2 ms instead of 1.3 per 2 MiB here). The CRC still catches what
// the hash would in practice: bytes changed between hashing and sending (a
// reused buffer), or in the receiver's memory. Without TLS the body's
// SHA-256 against the signed digest is what authenticates it, so the
// server hashes as before and ignores "crc". The blob's name is then the
// sender's word (a cluster node's, holding the secret), as the rest of
// the protocol already trusts it; nothing served relies on it alone: the
// scrub checks every stored blob's SHA-256, and repair's pulls and the
// remote-cache fills check the SHA-256 of what they read.
//
// Mixed versions (a rolling upgrade): an older writer sends no "crc" and
// its blobs are hashed; an older server ignores the parameter (it reads
// only "min") and hashes. PutBlobs batches carry no CRC (their blobs are
// small, each checked by hash), and neither do repair's pushes. The
// in-memory network checks a CRC when one is sent, else the hash.
//
//	POST /_cairn/rpc/blobs        PutBlobs → Handler.PutBlob per blob, or BatchHandler.PutBlobs
//	  body: manifest = uvarint(k) ; k × { 32-byte SHA-256 ; uvarint(len) },
//	        then the k blobs' bytes back to back, in manifest order.
//	  Cairn-Content-Sha256 signs the manifest; the bytes are checked blob by
//	  blob against the signed hashes (a mismatch fails that blob alone,
//	  422). At most MaxBodyBytes in all, MaxBlobBytes per blob. A Handler
//	  that is not a BatchHandler gets one PutBlob per blob, concurrently.
//	  200, body: k × { uint16 big-endian status (204 stored, else what
//	  PutBlob would have answered) ; uvarint(len(msg)) ; msg (≤ 1 KiB) }.
//
//	GET /_cairn/rpc/blob/<64 hex>?off=<int64 >= 0>&n=<int64 >= -1>    GetBlob → Handler.GetBlob
//	  n = -1: to the end. 200, Content-Length when the handler knows the
//	  size, body: the bytes. A body cut short (handler read error) aborts
//	  the connection: the client gets io.ErrUnexpectedEOF, never a short
//	  clean body.
//
//	POST /_cairn/rpc/has          HasBlobs → Handler.HasBlobs
//	  body: k × 32 bytes of hashes. 200, body: k bytes, 1 = held, 0 = not.
//
//	POST /_cairn/rpc/join         Join → Handler.Join    (Cairn-To: 0)
//	  body: JSON JoinRequest. 200, body: JSON JoinResponse.
//
// # The in-memory network
//
// MemNetwork delivers by calling the target's Handler. Raft messages are
// routed one by one and always delivered through MemConfig.Schedule (the
// simulator's fake clock), as copies made through their protobuf encoding;
// each may be dropped, delayed (hence reordered) or duplicated, by rates
// drawn from one RNG seeded with MemConfig.Seed or by a Fault hook.
// Blocking calls wait for their (scheduled) delivery or their ctx. A cut
// link or a crashed node is ErrUnavailable at once (connection refused),
// and OnUnreachable for Raft. Handler errors go through the same status
// table as on the wire, so callers see the same sentinels in both.
package transport
