package transport

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-fs/cairn/internal/blob"
)

// PathPrefix is the path under which every RPC is served, on the public
// listener (through httpapi's ExtraHandlers) or on a --cluster-listen one.
const PathPrefix = "/_cairn/rpc/"

// RPC paths, below PathPrefix.
const (
	pathRaft     = PathPrefix + "raft"
	pathSnapshot = PathPrefix + "snapshot"
	pathBlob     = PathPrefix + "blob/" // + 64 hex digits
	pathBlobs    = PathPrefix + "blobs"
	pathHas      = PathPrefix + "has"
	pathJoin     = PathPrefix + "join"
)

// Handler is what a node does with the RPCs it receives. The server calls it
// only for authenticated requests whose bodies passed their integrity check
// (except ApplySnapshot's body, which is checked as it streams: see there).
// Methods are called concurrently, from the HTTP server's goroutines; ctx
// ends when the caller goes away. Errors are mapped to statuses (and back
// to this package's sentinels on the client) by one table: ErrNotFound and
// blob.ErrNotFound → 404, ErrCorrupt and blob.ErrCorrupt → 422, ErrNoSpace,
// blob.ErrNoSpace and blob.ErrReadOnly → 507, ErrBadRequest and
// blob.ErrTooLarge → 400, ErrUnavailable, blob.ErrClosed and context errors
// → 503, anything else → 500.
type Handler interface {
	// StepRaft takes a batch of Raft messages from node from, in the order
	// sent; every message's From is from and its To is this node. It should
	// hand them to the Raft loop and return without waiting for them to be
	// processed. The messages are the handler's to keep.
	StepRaft(ctx context.Context, from NodeID, msgs []*raftpb.Message) error
	// ApplySnapshot receives a snapshot: meta (authenticated before the call)
	// and the streamed body. The body's authenticity is known only at its
	// end: a genuine body ends with io.EOF, a tampered or cut one with an
	// error wrapping ErrUnauthorized or io.ErrUnexpectedEOF. So the handler
	// must read body to io.EOF before it makes anything durable, and fail on
	// any other error. Returning nil without reading to io.EOF is answered
	// with 400.
	ApplySnapshot(ctx context.Context, from NodeID, meta []byte, body io.Reader) error
	// PutBlob stores a blob whose bytes the server has checked against h.
	// data is only valid until PutBlob returns (its buffer is reused).
	PutBlob(ctx context.Context, from NodeID, h blob.Hash, data []byte) error
	// GetBlob opens n bytes of blob h from offset off (n == -1: to the end).
	// It returns a reader of exactly size bytes (size -1: unknown) that the
	// server closes. A read error or short read after the status was sent
	// aborts the connection, so the client sees an error, never a silently
	// short blob.
	GetBlob(ctx context.Context, from NodeID, h blob.Hash, off, n int64) (r io.ReadCloser, size int64, err error)
	// HasBlobs reports, for each hash, whether this node holds the blob. The
	// answer must have len(hs) entries.
	HasBlobs(ctx context.Context, from NodeID, hs []blob.Hash) ([]bool, error)
	// Join handles a join request sent to this node's public URL. from is the
	// ID the joining node claims; every node knows the secret, so it proves
	// membership of the cluster, not identity.
	Join(ctx context.Context, from NodeID, req JoinRequest) (JoinResponse, error)
}

// JoinRequest asks the cluster to admit a node.
type JoinRequest struct {
	// ID is the joining node's ID (chosen by it, as etcd does).
	ID NodeID `json:"id"`
	// PublicURL is the node's --listen address as a URL.
	PublicURL string `json:"public_url"`
	// ClusterURL is the base URL of its RPC endpoint: its --cluster-listen
	// address, or PublicURL when it has none.
	ClusterURL string `json:"cluster_url"`
	// Zone, CapacityBytes and Witness describe the node for placement.
	Zone          string `json:"zone,omitempty"`
	CapacityBytes int64  `json:"capacity_bytes,omitempty"`
	Witness       bool   `json:"witness,omitempty"`
	// Extra carries fields owned by the cluster package. Default empty.
	Extra json.RawMessage `json:"extra,omitempty"`
}

// JoinResponse is the cluster's answer to a JoinRequest.
type JoinResponse struct {
	ClusterID uint64   `json:"cluster_id"`
	Members   []Member `json:"members"`
	// Extra carries fields owned by the cluster package. Default empty.
	Extra json.RawMessage `json:"extra,omitempty"`
}

// Member is one node of a JoinResponse.
type Member struct {
	ID         NodeID `json:"id"`
	PublicURL  string `json:"public_url"`
	ClusterURL string `json:"cluster_url"`
	Voter      bool   `json:"voter,omitempty"`
}

// Server is the http.Handler of the RPC endpoint. It is safe for concurrent
// use; it serves paths under PathPrefix and answers 404 to anything else.
type Server struct {
	cfg    Config
	h      Handler
	sign   *signer
	replay *replayCache
	bufs   sync.Pool // *[]byte of cap MaxBlobBytes, for PutBlob bodies
}

// NewServer returns a Server that authenticates requests with cfg and
// passes them to h. Serve it on the public listener under PathPrefix
// (httpapi.Config.ExtraHandlers[PathPrefix]) or on a cluster listener (it
// needs the full request path either way; do not strip the prefix).
func NewServer(cfg Config, h Handler) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("%w: nil Handler", ErrBadConfig)
	}
	cfg = cfg.withDefaults()
	return &Server{
		cfg: cfg, h: h, sign: newSigner(cfg.Secret),
		replay: newReplayCache(cfg.MaxClockSkew, cfg.MaxReplayEntries),
	}, nil
}

// ServeHTTP authenticates and serves one RPC.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	var method string
	switch {
	case p == pathRaft, p == pathSnapshot, p == pathHas, p == pathJoin, p == pathBlobs:
		method = http.MethodPost
	case strings.HasPrefix(p, pathBlob):
		method = r.Method
		if method != http.MethodGet && method != http.MethodPut {
			method = http.MethodPut
		}
	default:
		httpError(w, http.StatusNotFound, "no such RPC")
		return
	}
	if r.Method != method {
		w.Header().Set("Allow", method)
		httpError(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	var peer NodeID
	if s.cfg.TLS != nil {
		id, err := PeerID(r.TLS)
		if err != nil {
			s.cfg.Logger.Debug("rpc rejected", "path", p, "remote", r.RemoteAddr, "err", err)
			httpError(w, http.StatusUpgradeRequired, "this node requires node-to-node TLS with a certificate of its cluster "+
				"(--cluster-tls=on, the default): every node of a cluster needs the same --cluster-tls setting and secret")
			return
		}
		peer = id
	}
	v, err := s.sign.check(r, s.cfg.NodeID, s.cfg.Now(), s.cfg.MaxClockSkew, s.replay, p == pathJoin)
	if err != nil {
		s.reject(w, r, err)
		return
	}
	if s.cfg.TLS != nil && peer != v.from {
		s.reject(w, r, fmt.Errorf("%w: request signed as node %v came with the certificate of node %v", errAuth, v.from, peer))
		return
	}
	switch {
	case p == pathRaft:
		s.serveRaft(w, r, v)
	case p == pathSnapshot:
		s.serveSnapshot(w, r, v)
	case p == pathHas:
		s.serveHas(w, r, v)
	case p == pathBlobs:
		s.servePutBlobs(w, r, v)
	case p == pathJoin:
		s.serveJoin(w, r, v)
	case r.Method == http.MethodPut:
		s.servePutBlob(w, r, v)
	default:
		s.serveGetBlob(w, r, v)
	}
}

// reject answers a request that failed authentication or its body check.
func (s *Server) reject(w http.ResponseWriter, r *http.Request, err error) {
	s.cfg.Logger.Debug("rpc rejected", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
	if errors.Is(err, errReplayFull) {
		httpError(w, http.StatusServiceUnavailable, "busy")
		return
	}
	httpError(w, http.StatusUnauthorized, errAuth.Error())
}

// fail answers a request whose handler or body failed.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, errAuth) {
		s.reject(w, r, err)
		return
	}
	st := statusOf(err)
	if st >= 500 {
		s.cfg.Logger.Debug("rpc failed", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
	}
	httpError(w, st, err.Error())
}

// statusOf is the one table from errors to statuses (see Handler).
func statusOf(err error) int {
	switch {
	case errors.Is(err, errBodyTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrNotFound), errors.Is(err, blob.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrCorrupt), errors.Is(err, blob.ErrCorrupt):
		return http.StatusUnprocessableEntity
	case errors.Is(err, ErrNoSpace), errors.Is(err, blob.ErrNoSpace), errors.Is(err, blob.ErrReadOnly):
		return http.StatusInsufficientStorage
	case errors.Is(err, ErrBadRequest), errors.Is(err, blob.ErrTooLarge):
		return http.StatusBadRequest
	case errors.Is(err, ErrUnauthorized):
		return http.StatusUnauthorized
	case errors.Is(err, ErrRefused):
		return http.StatusConflict
	case errors.Is(err, ErrUnavailable), errors.Is(err, blob.ErrClosed),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func httpError(w http.ResponseWriter, status int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg)
}

var errBodyTooLarge = errors.New("request body too large")

// pooledBodyMin is the PutBlob body size above which a pooled buffer of
// MaxBlobBytes is used.
const pooledBodyMin = 64 << 10

// readBody reads r's whole body, at most limit bytes, into buf when it is
// large enough, and checks its SHA-256 against the signed content digest.
func readBody(r *http.Request, v verified, limit int64, buf []byte) ([]byte, [32]byte, error) {
	var sum [32]byte
	data, err := readBodyBytes(r, limit, buf)
	if err != nil {
		return nil, sum, err
	}
	sum = sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != v.content {
		// data and sum are returned with the error for servePutBlob.
		return data, sum, fmt.Errorf("%w: body does not match %s", errAuth, hdrContent)
	}
	return data, sum, nil
}

// readBodyBytes reads r's whole body, at most limit bytes, into buf when
// it is large enough. It checks nothing: the caller does.
func readBodyBytes(r *http.Request, limit int64, buf []byte) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", errBodyTooLarge, r.ContentLength, limit)
	}
	if cl := r.ContentLength; cl >= 0 {
		// net/http ends the body after Content-Length bytes.
		if int64(cap(buf)) < cl {
			buf = make([]byte, cl)
		}
		data := buf[:cl]
		if _, err := io.ReadFull(r.Body, data); err != nil {
			return nil, fmt.Errorf("%w: read body: %w", ErrBadRequest, err)
		}
		return data, nil
	}
	b := bytes.NewBuffer(buf[:0])
	n, err := b.ReadFrom(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read body: %w", ErrBadRequest, err)
	}
	if n > limit {
		return nil, fmt.Errorf("%w: limit %d", errBodyTooLarge, limit)
	}
	return b.Bytes(), nil
}

func (s *Server) serveRaft(w http.ResponseWriter, r *http.Request, v verified) {
	body, _, err := readBody(r, v, s.cfg.MaxBodyBytes, nil)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	msgs, err := decodeRaft(body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, m := range msgs {
		if NodeID(m.GetFrom()) != v.from || NodeID(m.GetTo()) != s.cfg.NodeID {
			s.fail(w, r, fmt.Errorf("%w: message from %d to %d in a batch from %d to %d",
				ErrBadRequest, m.GetFrom(), m.GetTo(), v.from, s.cfg.NodeID))
			return
		}
	}
	if err := s.h.StepRaft(r.Context(), v.from, msgs); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// decodeRaft parses a Raft batch body: repeated (uvarint length, message).
func decodeRaft(b []byte) ([]*raftpb.Message, error) {
	var msgs []*raftpb.Message
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, fmt.Errorf("%w: bad raft batch framing", ErrBadRequest)
		}
		m := new(raftpb.Message)
		if err := proto.Unmarshal(b[k:k+int(n)], m); err != nil {
			return nil, fmt.Errorf("%w: raft message: %w", ErrBadRequest, err)
		}
		msgs = append(msgs, m)
		b = b[k+int(n):]
	}
	return msgs, nil
}

// encodeRaft appends m's framing (uvarint length, message) to b.
func encodeRaft(b []byte, m *raftpb.Message) ([]byte, error) {
	b = binary.AppendUvarint(b, uint64(proto.Size(m)))
	return proto.MarshalOptions{}.MarshalAppend(b, m)
}

func (s *Server) serveSnapshot(w http.ResponseWriter, r *http.Request, v verified) {
	wantMeta, ok := strings.CutPrefix(v.content, streamTag)
	if !ok {
		s.fail(w, r, fmt.Errorf("%w: snapshot without %s content", errAuth, streamTag))
		return
	}
	var lb [4]byte
	if _, err := io.ReadFull(r.Body, lb[:]); err != nil {
		s.fail(w, r, fmt.Errorf("%w: snapshot meta length: %w", ErrBadRequest, err))
		return
	}
	ml := int64(binary.BigEndian.Uint32(lb[:]))
	if ml > s.cfg.MaxBodyBytes {
		s.fail(w, r, fmt.Errorf("%w: snapshot meta of %d bytes", errBodyTooLarge, ml))
		return
	}
	meta := make([]byte, ml)
	if _, err := io.ReadFull(r.Body, meta); err != nil {
		s.fail(w, r, fmt.Errorf("%w: snapshot meta: %w", ErrBadRequest, err))
		return
	}
	if hexDigest(meta) != wantMeta {
		s.fail(w, r, fmt.Errorf("%w: snapshot meta does not match %s", errAuth, hdrContent))
		return
	}
	body := &verifyingReader{r: r.Body, h: sha256.New(), req: r, sign: s.sign, headerSig: v.sig}
	err := s.h.ApplySnapshot(r.Context(), v.from, meta, body)
	switch {
	case body.authErr != nil:
		s.fail(w, r, body.authErr)
	case err != nil:
		s.fail(w, r, err)
	case !body.done:
		s.fail(w, r, fmt.Errorf("%w: handler did not read the snapshot to its end", ErrBadRequest))
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// verifyingReader hashes a streamed body and, at its end, checks the
// trailer signature: io.EOF only for a genuine body.
type verifyingReader struct {
	r         io.Reader
	h         hash.Hash
	req       *http.Request
	sign      *signer
	headerSig string
	done      bool  // reached a verified io.EOF
	authErr   error // the trailer was missing or wrong
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.done {
		return 0, io.EOF
	}
	if v.authErr != nil {
		return 0, v.authErr
	}
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	if err == io.EOF {
		got := v.req.Trailer.Get(hdrBodySig)
		want := v.sign.bodySignature(v.headerSig, v.h.Sum(nil))
		if !hmac.Equal([]byte(strings.ToLower(got)), []byte(want)) {
			v.authErr = fmt.Errorf("%w: %w: streamed body fails its %s", ErrUnauthorized, errAuth, hdrBodySig)
			return n, v.authErr
		}
		v.done = true
	}
	return n, err
}

func (s *Server) servePutBlob(w http.ResponseWriter, r *http.Request, v verified) {
	h, err := blob.ParseHash(strings.TrimPrefix(r.URL.Path, pathBlob))
	if err != nil {
		s.fail(w, r, fmt.Errorf("%w: %w", ErrBadRequest, err))
		return
	}
	var buf []byte
	if r.ContentLength > pooledBodyMin && r.ContentLength <= s.cfg.MaxBlobBytes {
		// Big blobs reuse buffers; small ones get exactly their size.
		bp, _ := s.bufs.Get().(*[]byte)
		if bp == nil {
			b := make([]byte, s.cfg.MaxBlobBytes)
			bp = &b
		}
		defer s.bufs.Put(bp)
		buf = *bp
	}
	if crc, ok := queryCRC(r.URL); ok && s.cfg.TLS != nil && v.content == h.String() {
		// Node-to-node TLS authenticated the bytes (the peer's certificate
		// is its signature's node): the CRC32C the sender computed with
		// the blob's name, carried in the signed URI, checks them at a
		// fraction of the cost of hashing them again (doc.go, "Blob
		// checks").
		data, err := readBodyBytes(r, s.cfg.MaxBlobBytes, buf)
		if err == nil {
			err = checkBlob(h, data, crc, true)
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if err := s.h.PutBlob(minIndexContext(r), v.from, h, data); err != nil {
			s.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	data, sum, err := readBody(r, v, s.cfg.MaxBlobBytes, buf)
	if err != nil && errors.Is(err, errAuth) && data != nil && v.content == h.String() {
		// The signed digest is the blob's name (what clients send) and the
		// bytes do not hash to it: a corrupt blob, not a forgery to log.
		err = nil
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if blob.Hash(sum) != h {
		s.fail(w, r, fmt.Errorf("%w: blob %s: got bytes of %s", ErrCorrupt, h, blob.Hash(sum)))
		return
	}
	if err := s.h.PutBlob(minIndexContext(r), v.from, h, data); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) serveGetBlob(w http.ResponseWriter, r *http.Request, v verified) {
	if v.content != emptyDigest {
		s.fail(w, r, fmt.Errorf("%w: GET with a body digest", errAuth))
		return
	}
	h, err := blob.ParseHash(strings.TrimPrefix(r.URL.Path, pathBlob))
	if err != nil {
		s.fail(w, r, fmt.Errorf("%w: %w", ErrBadRequest, err))
		return
	}
	q := r.URL.Query()
	off, err1 := strconv.ParseInt(q.Get("off"), 10, 64)
	n, err2 := strconv.ParseInt(q.Get("n"), 10, 64)
	if err1 != nil || err2 != nil || off < 0 || n < -1 {
		s.fail(w, r, fmt.Errorf("%w: bad off/n %q", ErrBadRequest, r.URL.RawQuery))
		return
	}
	rc, size, err := s.h.GetBlob(r.Context(), v.from, h, off, n)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer rc.Close()
	hd := w.Header()
	hd.Set("Content-Type", "application/octet-stream")
	if size >= 0 {
		hd.Set("Content-Length", strconv.FormatInt(size, 10))
	}
	w.WriteHeader(http.StatusOK)
	copied, err := io.Copy(w, rc)
	if err != nil || (size >= 0 && copied != size) {
		// The status is out: only cutting the connection tells the client
		// that the body is incomplete (a chunked body would end cleanly).
		s.cfg.Logger.Debug("rpc blob read cut", "blob", h, "copied", copied, "size", size, "err", err)
		panic(http.ErrAbortHandler)
	}
}

func (s *Server) serveHas(w http.ResponseWriter, r *http.Request, v verified) {
	body, _, err := readBody(r, v, s.cfg.MaxBodyBytes, nil)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(body)%len(blob.Hash{}) != 0 {
		s.fail(w, r, fmt.Errorf("%w: has body of %d bytes", ErrBadRequest, len(body)))
		return
	}
	hs := make([]blob.Hash, len(body)/32)
	for i := range hs {
		copy(hs[i][:], body[32*i:])
	}
	has, err := s.h.HasBlobs(minIndexContext(r), v.from, hs)
	if err == nil && len(has) != len(hs) {
		err = fmt.Errorf("HasBlobs answered %d of %d hashes", len(has), len(hs))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]byte, len(has))
	for i, ok := range has {
		if ok {
			out[i] = 1
		}
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	_, _ = w.Write(out)
}

func (s *Server) serveJoin(w http.ResponseWriter, r *http.Request, v verified) {
	body, _, err := readBody(r, v, s.cfg.MaxBodyBytes, nil)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req JoinRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.fail(w, r, fmt.Errorf("%w: join request: %w", ErrBadRequest, err))
		return
	}
	resp, err := s.h.Join(r.Context(), v.from, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := json.Marshal(resp)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	_, _ = w.Write(out)
}
