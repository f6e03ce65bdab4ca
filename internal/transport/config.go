package transport

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"

	"github.com/cairn-fs/cairn/internal/blob"
)

// NodeID names a cluster member. It is the Raft node ID; 0 is never a member.
type NodeID uint64

// String returns the decimal form used on the wire.
func (id NodeID) String() string { return strconv.FormatUint(uint64(id), 10) }

// MinSecretLen is the shortest cluster secret Config.Validate accepts, in bytes.
const MinSecretLen = 16

// Errors returned by clients and servers of this package. Callers test them
// with errors.Is; a returned error may wrap several (for example ErrUnavailable
// and context.DeadlineExceeded).
var (
	// ErrBadConfig is returned (wrapped) by Config.Validate, New and NewServer.
	ErrBadConfig = errors.New("transport: bad config")
	// ErrUnknownPeer: Config.Addr has no address for the node.
	ErrUnknownPeer = errors.New("transport: unknown peer")
	// ErrUnavailable: the peer could not be reached or did not answer in
	// time (connect failure, deadline, reset, 503), or a simulated network
	// dropped the call. Another replica may succeed.
	ErrUnavailable = errors.New("transport: peer unavailable")
	// ErrUnauthorized: the peer rejected the request's authentication (401),
	// or a streamed body failed its final signature check.
	ErrUnauthorized = errors.New("transport: unauthorized")
	// ErrNotFound: the peer does not hold the blob (404).
	ErrNotFound = errors.New("transport: not found")
	// ErrCorrupt: a blob's bytes do not hash to its name (422): PutBlob was
	// given data that does not match the hash, or the peer's copy is bad.
	ErrCorrupt = errors.New("transport: blob bytes do not match their hash")
	// ErrNoSpace: the peer cannot store the blob (507).
	ErrNoSpace = errors.New("transport: peer has no space")
	// ErrBadRequest: the peer could not parse the request (400, 413, 416).
	ErrBadRequest = errors.New("transport: bad request")
	// ErrRefused: the peer understood the request and will not do it
	// (409): a join by a binary older than the cluster's log version.
	ErrRefused = errors.New("transport: refused")
	// ErrRemote: the peer's handler failed for another reason (500).
	ErrRemote = errors.New("transport: remote error")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("transport: closed")
)

// Config configures the HTTP client (New) and server (NewServer) of one node.
// The same Config, or copies of it, serve both; fields marked "client" are
// ignored by NewServer and vice versa.
type Config struct {
	// NodeID is this node's ID: the sender ID on every request, and the
	// target ID a server accepts. Required (non-zero).
	NodeID NodeID
	// Secret is the cluster secret shared by all nodes, at least
	// MinSecretLen bytes. Required. The slice is copied.
	Secret []byte
	// Addr resolves a node to the base URL of its cluster endpoint
	// ("http://10.0.0.2:7000", no trailing slash, no path), resolved again
	// for every call so address changes take effect at once. It must be safe
	// for concurrent use and fast. Client; required by New.
	Addr func(NodeID) (baseURL string, ok bool)

	// DialTimeout bounds connection setup, in time. Client. Default 300 ms.
	DialTimeout time.Duration
	// ControlTimeout is the deadline of HasBlobs and Join calls whose ctx has
	// none. Client. Default 1 s.
	ControlTimeout time.Duration
	// BlobTimeout is the deadline of PutBlob and GetBlob calls whose ctx has
	// none (for GetBlob it covers reading the body too). Client. Default 10 s.
	BlobTimeout time.Duration
	// RaftTimeout is the deadline of one POST of a batch of Raft messages.
	// Client. Default 500 ms.
	RaftTimeout time.Duration
	// SnapshotStallTimeout cancels a SendSnapshot whose body makes no
	// progress (no bytes accepted by the connection) for this long. A
	// snapshot has no overall deadline other than its ctx. Client. Default 10 s.
	SnapshotStallTimeout time.Duration
	// RaftQueueLen is the number of Raft messages queued per peer; messages
	// sent while the queue is full are dropped and OnUnreachable is called.
	// Client. Default 4096.
	RaftQueueLen int
	// MaxRaftBatchBytes is the encoded size, in bytes, after which a batch
	// of queued Raft messages is sent without waiting for more. A single
	// larger message is still sent, alone. Client. Default 1 MiB.
	MaxRaftBatchBytes int
	// MaxIdleConnsPerPeer is the number of idle keep-alive connections kept
	// per peer. Client. Default 64.
	MaxIdleConnsPerPeer int
	// IdleConnTimeout closes a pooled connection unused this long. Client.
	// Default 90 s.
	IdleConnTimeout time.Duration
	// OnUnreachable, if not nil, is called when a batch of Raft messages to
	// a peer could not be delivered (error, timeout, non-2xx) or was dropped
	// because the peer's queue was full; the consensus layer passes it on
	// to RawNode.ReportUnreachable. It is called from the client's
	// goroutines or from inside SendRaft, must be safe for concurrent use,
	// must not block, and must not call the client. Client. Default nil.
	OnUnreachable func(to NodeID, err error)

	// MaxClockSkew is the largest difference, either way, between a
	// request's timestamp and the server's clock. Server. Default 10 s.
	MaxClockSkew time.Duration
	// MaxReplayEntries bounds the nonces remembered to reject replays
	// (about 40 bytes each); while it is full, requests get 503. Server.
	// Default 1<<20.
	MaxReplayEntries int
	// MaxBodyBytes bounds the body of a Raft batch, HasBlobs or Join request,
	// and the metadata of a snapshot, in bytes. Server. Default 64 MiB.
	MaxBodyBytes int64
	// MaxBlobBytes bounds the body of a PutBlob, in bytes. Server. Default
	// blob.MaxSize (4 MiB).
	MaxBlobBytes int64

	// TLS, when not nil, encrypts every RPC and authenticates both ends
	// with certificates of the cluster CA (tls.go): the client dials
	// https (an http:// base URL is upgraded) and checks that the answer
	// comes from the node it addressed; the server refuses RPCs that did
	// not come over TLS with a verified client certificate of the node
	// named by Cairn-From (426, ErrTLSRequired). nil: plain HTTP, the
	// HMAC alone (--cluster-tls=off).
	TLS *Identity

	// Clock runs the client's deadlines and stall timers. Default
	// clock.Real{}.
	Clock clock.Clock
	// Now is the wall clock used for request timestamps and their check.
	// Default Clock.Now.
	Now func() time.Time
	// Logger receives lifecycle messages and rejected requests (Debug).
	// Default: discard.
	Logger *slog.Logger
}

// DefaultConfig returns a Config with every optional field at its default;
// NodeID, Secret and (for a client) Addr must still be set.
func DefaultConfig() Config {
	return Config{
		DialTimeout:          300 * time.Millisecond,
		ControlTimeout:       time.Second,
		BlobTimeout:          10 * time.Second,
		RaftTimeout:          500 * time.Millisecond,
		SnapshotStallTimeout: 10 * time.Second,
		RaftQueueLen:         4096,
		MaxRaftBatchBytes:    1 << 20,
		MaxIdleConnsPerPeer:  64,
		IdleConnTimeout:      90 * time.Second,
		MaxClockSkew:         10 * time.Second,
		MaxReplayEntries:     1 << 20,
		MaxBodyBytes:         64 << 20,
		MaxBlobBytes:         blob.MaxSize,
	}
}

// withDefaults fills zero optional fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	setDur := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	setDur(&c.DialTimeout, d.DialTimeout)
	setDur(&c.ControlTimeout, d.ControlTimeout)
	setDur(&c.BlobTimeout, d.BlobTimeout)
	setDur(&c.RaftTimeout, d.RaftTimeout)
	setDur(&c.SnapshotStallTimeout, d.SnapshotStallTimeout)
	setDur(&c.IdleConnTimeout, d.IdleConnTimeout)
	setDur(&c.MaxClockSkew, d.MaxClockSkew)
	if c.RaftQueueLen == 0 {
		c.RaftQueueLen = d.RaftQueueLen
	}
	if c.MaxRaftBatchBytes == 0 {
		c.MaxRaftBatchBytes = d.MaxRaftBatchBytes
	}
	if c.MaxIdleConnsPerPeer == 0 {
		c.MaxIdleConnsPerPeer = d.MaxIdleConnsPerPeer
	}
	if c.MaxReplayEntries == 0 {
		c.MaxReplayEntries = d.MaxReplayEntries
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = d.MaxBodyBytes
	}
	if c.MaxBlobBytes == 0 {
		c.MaxBlobBytes = d.MaxBlobBytes
	}
	c.Clock = clock.Or(c.Clock)
	if c.Now == nil {
		c.Now = c.Clock.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Secret = append([]byte(nil), c.Secret...)
	return c
}

// Validate reports a Config that NewServer would refuse, wrapping
// ErrBadConfig. New additionally requires Addr. Zero optional fields are
// valid (they take their defaults).
func (c Config) Validate() error {
	if c.NodeID == 0 {
		return fmt.Errorf("%w: NodeID is required", ErrBadConfig)
	}
	if len(c.Secret) < MinSecretLen {
		return fmt.Errorf("%w: cluster secret is %d bytes, want at least %d", ErrBadConfig, len(c.Secret), MinSecretLen)
	}
	if c.DialTimeout < 0 || c.ControlTimeout < 0 || c.BlobTimeout < 0 || c.RaftTimeout < 0 ||
		c.SnapshotStallTimeout < 0 || c.IdleConnTimeout < 0 || c.MaxClockSkew < 0 {
		return fmt.Errorf("%w: negative timeout", ErrBadConfig)
	}
	if c.RaftQueueLen < 0 || c.MaxRaftBatchBytes < 0 || c.MaxIdleConnsPerPeer < 0 ||
		c.MaxReplayEntries < 0 || c.MaxBodyBytes < 0 || c.MaxBlobBytes < 0 {
		return fmt.Errorf("%w: negative size", ErrBadConfig)
	}
	return nil
}
