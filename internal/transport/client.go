package transport

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/cairn-fs/cairn/internal/blob"
)

// Client sends RPCs to other nodes. HTTPClient is the real one, MemNetwork's
// clients the in-memory one. All methods are safe for concurrent use.
type Client interface {
	// SendRaft queues msgs for node to and returns at once: delivery is
	// batched and asynchronous, in order per peer, and failures are reported
	// to the OnUnreachable callback (never returned), as Raft expects. When
	// the peer's queue is full the excess is dropped. The client owns msgs
	// after the call: the caller must not modify them. A MsgSnap with a large
	// snapshot should go through SendSnapshot instead.
	SendRaft(to NodeID, msgs []*raftpb.Message)
	// SendSnapshot streams a snapshot to node to: meta (small, e.g. the
	// marshalled MsgSnap without its data) and body, read to io.EOF without
	// being buffered whole. It blocks until the peer's handler returned; a
	// nil error means the peer applied it. It has no deadline other than
	// ctx's, but is cancelled when the body stalls (SnapshotStallTimeout).
	SendSnapshot(ctx context.Context, to NodeID, meta []byte, body io.Reader) error
	// PutBlob stores b.Data as blob b.Hash on node to; the receiver checks
	// that the data hash to b.Hash, or, when b carries a CRC and the
	// connection is node-to-node TLS, that they have that CRC32C
	// (ErrCorrupt if not; see "Blob checks" in doc.go). nil means the peer
	// stored it (durably, if its handler waits for the fsync).
	PutBlob(ctx context.Context, to NodeID, b BlobPut) error
	// PutBlobs stores several blobs on node to in one call (one request,
	// one answer; the receiver may write them all before one group
	// commit). err is the outcome of the call as a whole (nothing is known
	// to be stored); otherwise errs has one entry per blob, with PutBlob's
	// meaning: nil means that blob is stored. A blob whose data do not hash
	// to its Hash fails alone (ErrCorrupt). The caller must not modify the
	// data until the call returns.
	PutBlobs(ctx context.Context, to NodeID, blobs []BlobPut) (errs []error, err error)
	// GetBlob streams n bytes (-1: to the end) of blob h from offset off on
	// node to. The caller must Close the reader; a peer that fails mid-body
	// gives a read error (io.ErrUnexpectedEOF), never a short clean body.
	// The reader has a Size() int64 method: the body's length when the
	// peer sent it, else -1.
	GetBlob(ctx context.Context, to NodeID, h blob.Hash, off, n int64) (io.ReadCloser, error)
	// HasBlobs asks node to which of hs it holds; the answer has len(hs)
	// entries.
	HasBlobs(ctx context.Context, to NodeID, hs []blob.Hash) ([]bool, error)
	// Join sends req to the node whose public base URL is url (the joining
	// node knows no member IDs yet).
	Join(ctx context.Context, url string, req JoinRequest) (JoinResponse, error)
	// Close stops the client's goroutines; queued Raft messages are dropped.
	Close() error
}

// HTTPClient is the Client over HTTP/1.1: pooled keep-alive connections
// with TCP_NODELAY, one goroutine and bounded queue per Raft peer.
type HTTPClient struct {
	cfg  Config
	sign *signer
	tr   *http.Transport
	rt   http.RoundTripper // tr, or a test's wrapper

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	peers  map[NodeID]*raftPeer
	closed bool

	onDial func(net.Conn) // test hook: every new connection
}

var _ Client = (*HTTPClient)(nil)

// New returns an HTTPClient for cfg; Addr is required.
func New(cfg Config) (*HTTPClient, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Addr == nil {
		return nil, fmt.Errorf("%w: Addr is required", ErrBadConfig)
	}
	cfg = cfg.withDefaults()
	c := &HTTPClient{cfg: cfg, sign: newSigner(cfg.Secret), peers: map[NodeID]*raftPeer{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	d := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 15 * time.Second}
	c.tr = &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// Go sets TCP_NODELAY on every TCP connection already; set it
			// again so that no change of default can bring back Nagle's
			// 40 ms stalls on small RPCs (the GlusterFS untar story).
			if tc, ok := conn.(*net.TCPConn); ok {
				if err := tc.SetNoDelay(true); err != nil {
					conn.Close()
					return nil, fmt.Errorf("set TCP_NODELAY: %w", err)
				}
			}
			if c.onDial != nil {
				c.onDial(conn)
			}
			return conn, nil
		},
		MaxIdleConnsPerHost: cfg.MaxIdleConnsPerPeer,
		IdleConnTimeout:     cfg.IdleConnTimeout,
		TLSHandshakeTimeout: cfg.ControlTimeout,
		DisableCompression:  true,
		WriteBufferSize:     64 << 10,
		ReadBufferSize:      64 << 10,
	}
	if cfg.TLS != nil {
		c.tr.TLSClientConfig = cfg.TLS.ClientConfig()
	}
	c.rt = c.tr
	return c, nil
}

// Close stops the Raft senders, cancels calls in flight and closes idle
// connections. Later calls fail with ErrClosed.
func (c *HTTPClient) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.tr.CloseIdleConnections()
	return nil
}

// RemovePeer stops the Raft sender of node id (a removed member) and drops
// its queue. A later SendRaft to id starts a new one.
func (c *HTTPClient) RemovePeer(id NodeID) {
	c.mu.Lock()
	p := c.peers[id]
	delete(c.peers, id)
	c.mu.Unlock()
	if p != nil {
		close(p.stop)
	}
}

// call is one prepared RPC.
type call struct {
	to       NodeID
	base     string // base URL
	method   string
	uri      string // path and query
	content  string // Cairn-Content-Sha256 value
	body     io.Reader
	length   int64 // -1: chunked
	streamed *snapshotBody
	// getBody, if set, makes a fresh copy of body, so that net/http can
	// resend a request that failed on a stale keep-alive connection before
	// any byte was written (it does so by itself for bytes.Reader bodies).
	getBody func() (io.ReadCloser, error)
}

// do sends cl with ctx and returns the response of a 2xx status; any other
// outcome is an error wrapping one of the package's sentinels.
func (c *HTTPClient) do(ctx context.Context, cl *call) (*http.Response, error) {
	if c.ctx.Err() != nil {
		return nil, ErrClosed
	}
	base := cl.base
	if c.cfg.TLS != nil && strings.HasPrefix(base, "http://") {
		base = "https://" + base[len("http://"):]
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, base+cl.uri, cl.body)
	if err != nil {
		return nil, fmt.Errorf("%w: %s%s: %w", ErrBadRequest, cl.base, cl.uri, err)
	}
	req.ContentLength = cl.length
	if cl.body == nil {
		req.ContentLength = 0
	}
	if cl.getBody != nil {
		req.GetBody = cl.getBody
	}
	sig := c.sign.stamp(req, c.cfg.NodeID, cl.to, c.cfg.Now(), cl.content)
	if s := cl.streamed; s != nil {
		req.Trailer = http.Header{hdrBodySig: nil}
		s.req, s.headerSig, s.sign = req, sig, c.sign
	}
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		if s := cl.streamed; s != nil {
			if serr := s.err(); serr != nil {
				return nil, serr
			}
		}
		var rh tls.RecordHeaderError
		if errors.As(err, &rh) {
			return nil, fmt.Errorf("%w: %s %s: the peer does not speak TLS: %w", ErrTLSRequired, cl.method, base+cl.uri, err)
		}
		var cv *tls.CertificateVerificationError
		if c.cfg.TLS != nil && errors.As(err, &cv) && len(cv.UnverifiedCertificates) > 0 {
			if _, nerr := nodeOf(cv.UnverifiedCertificates[0]); nerr != nil {
				// Not a Cairn node certificate at all (a public --tls-cert):
				// the peer does not serve node-to-node TLS.
				return nil, fmt.Errorf("%w: %s %s: the peer answered with a certificate that is not a Cairn node's: %w",
					ErrTLSRequired, cl.method, base+cl.uri, err)
			}
		}
		var ua x509.UnknownAuthorityError
		if c.cfg.TLS != nil && errors.As(err, &ua) {
			// A CA derived from another secret, on either side.
			return nil, fmt.Errorf("%w: %s %s: certificate not of this cluster's CA (another cluster secret): %w",
				ErrUnauthorized, cl.method, base+cl.uri, err)
		}
		return nil, fmt.Errorf("%w: %s %s: %w", ErrUnavailable, cl.method, base+cl.uri, err)
	}
	if c.cfg.TLS != nil && cl.to != 0 {
		if id, err := PeerID(resp.TLS); err != nil || id != cl.to {
			resp.Body.Close() // unread: the connection is not reused for this node
			return nil, fmt.Errorf("%w: %s %s: answered by a certificate of node %v (%v), not of node %v",
				ErrUnauthorized, cl.method, base+cl.uri, id, err, cl.to)
		}
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	return nil, fmt.Errorf("%w: %s %s: %s: %s", sentinelOf(resp.StatusCode), cl.method, cl.base+cl.uri,
		resp.Status, strings.TrimSpace(string(msg)))
}

// sentinelOf maps a status back to the package's errors (the inverse of
// statusOf).
func sentinelOf(status int) error {
	switch status {
	case http.StatusUnauthorized:
		return ErrUnauthorized
	case http.StatusConflict:
		return ErrRefused
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusUnprocessableEntity:
		return ErrCorrupt
	case http.StatusInsufficientStorage:
		return ErrNoSpace
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusMethodNotAllowed,
		http.StatusRequestedRangeNotSatisfiable:
		return ErrBadRequest
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return ErrUnavailable
	case http.StatusUpgradeRequired:
		return ErrTLSRequired
	}
	return ErrRemote
}

// addr resolves a peer's base URL.
func (c *HTTPClient) addr(to NodeID) (string, error) {
	base, ok := c.cfg.Addr(to)
	if !ok {
		return "", fmt.Errorf("%w: node %v", ErrUnknownPeer, to)
	}
	return strings.TrimSuffix(base, "/"), nil
}

// withDefault gives ctx a deadline d away unless it has one.
func withDefault(ctx context.Context, clk clock.Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return clock.WithTimeout(ctx, clk, d)
}

// discard drains a little of a finished response so its connection can be
// reused, and closes it.
func discard(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
}

// PutBlob implements Client.
func (c *HTTPClient) PutBlob(ctx context.Context, to NodeID, b BlobPut) error {
	base, err := c.addr(to)
	if err != nil {
		return err
	}
	ctx, cancel := withDefault(ctx, c.cfg.Clock, c.cfg.BlobTimeout)
	defer cancel()
	resp, err := c.do(ctx, &call{
		to: to, base: base, method: http.MethodPut, uri: putBlobURI(ctx, b),
		// The body's digest is the blob's name: no second hash pass here. A
		// caller's wrong hash is caught by the server (ErrCorrupt).
		content: b.Hash.String(), body: bytes.NewReader(b.Data), length: int64(len(b.Data)),
	})
	if err != nil {
		return err
	}
	discard(resp)
	return nil
}

// GetBlob implements Client. Without a ctx deadline, BlobTimeout bounds the
// call and the reading of the body.
func (c *HTTPClient) GetBlob(ctx context.Context, to NodeID, h blob.Hash, off, n int64) (io.ReadCloser, error) {
	base, err := c.addr(to)
	if err != nil {
		return nil, err
	}
	if off < 0 || n < -1 {
		return nil, fmt.Errorf("%w: GetBlob off %d n %d", ErrBadRequest, off, n)
	}
	ctx, cancel := withDefault(ctx, c.cfg.Clock, c.cfg.BlobTimeout)
	resp, err := c.do(ctx, &call{
		to: to, base: base, method: http.MethodGet, content: emptyDigest,
		uri: pathBlob + h.String() + "?off=" + strconv.FormatInt(off, 10) + "&n=" + strconv.FormatInt(n, 10),
	})
	if err != nil {
		cancel()
		return nil, err
	}
	return &cancelBody{ReadCloser: resp.Body, cancel: cancel, size: resp.ContentLength}, nil
}

// cancelBody releases a call's context when its body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
	size   int64 // Content-Length; -1: not sent
}

// Size is the body's length as the peer announced it (-1: unknown), so
// that a reader can size its buffer.
func (b *cancelBody) Size() int64 { return b.size }

func (b *cancelBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: read blob: %w", ErrUnavailable, err)
	}
	return n, err
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// HasBlobs implements Client. Without a ctx deadline, ControlTimeout bounds
// the call.
func (c *HTTPClient) HasBlobs(ctx context.Context, to NodeID, hs []blob.Hash) ([]bool, error) {
	base, err := c.addr(to)
	if err != nil {
		return nil, err
	}
	body := make([]byte, 0, 32*len(hs))
	for _, h := range hs {
		body = append(body, h[:]...)
	}
	ctx, cancel := withDefault(ctx, c.cfg.Clock, c.cfg.ControlTimeout)
	defer cancel()
	resp, err := c.do(ctx, &call{
		to: to, base: base, method: http.MethodPost, uri: withMinIndexQuery(ctx, pathHas),
		content: hexDigest(body), body: bytes.NewReader(body), length: int64(len(body)),
	})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, int64(len(hs))+1))
	if err != nil {
		return nil, fmt.Errorf("%w: HasBlobs from %v: %w", ErrUnavailable, to, err)
	}
	if len(out) != len(hs) {
		return nil, fmt.Errorf("%w: HasBlobs from %v: %d answers for %d hashes", ErrRemote, to, len(out), len(hs))
	}
	has := make([]bool, len(hs))
	for i, b := range out {
		has[i] = b == 1
	}
	return has, nil
}

// Join implements Client. Without a ctx deadline, ControlTimeout bounds the
// call.
func (c *HTTPClient) Join(ctx context.Context, url string, req JoinRequest) (JoinResponse, error) {
	var resp JoinResponse
	body, err := json.Marshal(req)
	if err != nil {
		return resp, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	ctx, cancel := withDefault(ctx, c.cfg.Clock, c.cfg.ControlTimeout)
	defer cancel()
	hr, err := c.do(ctx, &call{
		base: strings.TrimSuffix(url, "/"), method: http.MethodPost, uri: pathJoin,
		content: hexDigest(body), body: bytes.NewReader(body), length: int64(len(body)),
	})
	if err != nil {
		return resp, err
	}
	defer hr.Body.Close()
	if err := json.NewDecoder(io.LimitReader(hr.Body, c.cfg.MaxBodyBytes)).Decode(&resp); err != nil {
		return resp, fmt.Errorf("%w: join answer from %s: %w", ErrRemote, url, err)
	}
	return resp, nil
}

// SendSnapshot implements Client.
func (c *HTTPClient) SendSnapshot(ctx context.Context, to NodeID, meta []byte, body io.Reader) error {
	base, err := c.addr(to)
	if err != nil {
		return err
	}
	if uint64(len(meta)) > uint64(^uint32(0)) {
		return fmt.Errorf("%w: snapshot meta of %d bytes", ErrBadRequest, len(meta))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	prefix := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(meta)), uint32(len(meta)))
	prefix = append(prefix, meta...)
	sb := &snapshotBody{prefix: prefix, src: body, h: sha256.New()}
	stall := clock.AfterFunc(c.cfg.Clock, c.cfg.SnapshotStallTimeout, cancel)
	defer stall.Stop()
	sb.progress = func() { stall.Reset(c.cfg.SnapshotStallTimeout) }
	sb.finished = func() { stall.Stop() }
	resp, err := c.do(ctx, &call{
		to: to, base: base, method: http.MethodPost, uri: pathSnapshot,
		content: streamTag + hexDigest(meta), body: sb, length: -1, streamed: sb,
	})
	if err != nil {
		return err
	}
	discard(resp)
	return nil
}

// snapshotBody is a snapshot's request body: the meta framing, then the
// caller's body, hashed on the way; at its end it sets the trailer that
// signs the hash. The transport reads it from one goroutine.
type snapshotBody struct {
	prefix    []byte
	src       io.Reader
	h         hash.Hash
	req       *http.Request
	sign      *signer
	headerSig string
	progress  func()
	finished  func()

	mu     sync.Mutex
	srcErr error // the caller's body failed: returned instead of the transport's error
}

// err returns the caller's body's read error, if any. The transport may
// still be reading the body when RoundTrip returns, hence the lock.
func (b *snapshotBody) err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.srcErr
}

func (b *snapshotBody) Read(p []byte) (int, error) {
	if len(b.prefix) > 0 {
		n := copy(p, b.prefix)
		b.prefix = b.prefix[n:]
		return n, nil
	}
	n, err := b.src.Read(p)
	b.h.Write(p[:n])
	if n > 0 {
		b.progress()
	}
	switch {
	case err == io.EOF:
		// Trailer values may be set until the body returns io.EOF.
		b.req.Trailer.Set(hdrBodySig, b.sign.bodySignature(b.headerSig, b.h.Sum(nil)))
		b.finished()
	case err != nil:
		b.mu.Lock()
		b.srcErr = fmt.Errorf("snapshot body: %w", err)
		b.mu.Unlock()
	}
	return n, err
}

// raftPeer is the queue and sender goroutine of one Raft peer.
type raftPeer struct {
	id   NodeID
	q    chan *raftpb.Message
	stop chan struct{}
}

// SendRaft implements Client.
func (c *HTTPClient) SendRaft(to NodeID, msgs []*raftpb.Message) {
	if len(msgs) == 0 {
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	p := c.peers[to]
	if p == nil {
		p = &raftPeer{id: to, q: make(chan *raftpb.Message, c.cfg.RaftQueueLen), stop: make(chan struct{})}
		c.peers[to] = p
		c.wg.Add(1)
		go c.runPeer(p)
	}
	c.mu.Unlock()
	dropped := 0
	for _, m := range msgs {
		select {
		case p.q <- m:
		default:
			dropped++
		}
	}
	if dropped > 0 {
		c.unreachable(to, fmt.Errorf("%w: raft queue to node %v full, %d messages dropped", ErrUnavailable, to, dropped))
	}
}

func (c *HTTPClient) unreachable(to NodeID, err error) {
	c.cfg.Logger.Debug("raft send failed", "to", to, "err", err)
	if c.cfg.OnUnreachable != nil {
		c.cfg.OnUnreachable(to, err)
	}
}

// runPeer sends p's queued messages, one POST per batch of whatever is
// queued (up to MaxRaftBatchBytes), one batch at a time so order is kept.
func (c *HTTPClient) runPeer(p *raftPeer) {
	defer c.wg.Done()
	for {
		var first *raftpb.Message
		select {
		case <-c.ctx.Done():
			return
		case <-p.stop:
			return
		case first = <-p.q:
		}
		// A fresh buffer per batch: the transport may still read a request
		// body after RoundTrip returned an error.
		buf, err := encodeRaft(nil, first)
	fill:
		for err == nil && len(buf) < c.cfg.MaxRaftBatchBytes {
			select {
			case m := <-p.q:
				buf, err = encodeRaft(buf, m)
			default:
				break fill
			}
		}
		if err != nil {
			c.unreachable(p.id, fmt.Errorf("encode raft message: %w", err))
			continue
		}
		if err := c.postRaft(p.id, buf); err != nil && c.ctx.Err() == nil {
			c.unreachable(p.id, err)
		}
	}
}

func (c *HTTPClient) postRaft(to NodeID, body []byte) error {
	base, err := c.addr(to)
	if err != nil {
		return err
	}
	ctx, cancel := clock.WithTimeout(c.ctx, c.cfg.Clock, c.cfg.RaftTimeout)
	defer cancel()
	resp, err := c.do(ctx, &call{
		to: to, base: base, method: http.MethodPost, uri: pathRaft,
		content: hexDigest(body), body: bytes.NewReader(body), length: int64(len(body)),
	})
	if err != nil {
		return err
	}
	discard(resp)
	return nil
}
