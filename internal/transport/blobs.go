package transport

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/cas"
)

// BlobPut is one blob of a PutBlobs call: a cas.Blob, the type in which
// the store and replication hand blobs down (an alias, so that a batch
// passes through without a copy).
type BlobPut = cas.Blob

// BatchHandler is the optional batch half of Handler: a Handler that also
// implements it receives a PutBlobs call in one piece (e.g. to write every
// blob before one group commit). A Handler without it gets one PutBlob
// call per blob, run concurrently so a group-committing store still shares
// its fsyncs among them.
type BatchHandler interface {
	// PutBlobs stores blobs whose bytes the server has checked against
	// their hashes; errs has one entry per blob (nil: stored, durably if the
	// handler waits for its fsync). The data are valid only until PutBlobs
	// returns.
	PutBlobs(ctx context.Context, from NodeID, blobs []BlobPut) (errs []error)
}

// putBlobsVia runs a batch on h: through BatchHandler when h has it, else
// one PutBlob per blob, concurrently.
func putBlobsVia(ctx context.Context, h Handler, from NodeID, blobs []BlobPut) []error {
	if bh, ok := h.(BatchHandler); ok {
		errs := bh.PutBlobs(ctx, from, blobs)
		if len(errs) != len(blobs) {
			errs = fillErrs(len(blobs), fmt.Errorf("PutBlobs answered %d of %d blobs", len(errs), len(blobs)))
		}
		return errs
	}
	errs := make([]error, len(blobs))
	if len(blobs) == 1 {
		errs[0] = h.PutBlob(ctx, from, blobs[0].Hash, blobs[0].Data)
		return errs
	}
	var wg sync.WaitGroup
	for i := range blobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = h.PutBlob(ctx, from, blobs[i].Hash, blobs[i].Data)
		}()
	}
	wg.Wait()
	return errs
}

func fillErrs(n int, err error) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// Batch framing (POST /_cairn/rpc/blobs). The body is a manifest followed by
// the blobs' bytes:
//
//	manifest: uvarint(k) ; k × { 32-byte SHA-256 ; uvarint(len) }
//	data:     the k blobs' bytes, in manifest order, back to back
//
// Cairn-Content-Sha256 is the SHA-256 of the manifest only: every blob is
// checked against its (signed) hash anyway, so hashing the data a second
// time for the signature would buy nothing. The answer (200) has one entry
// per blob, in order: uint16 big-endian status (204 stored, else the status
// the single-blob call would have answered) ; uvarint(len(msg)) ; msg.

// encodeManifest returns the manifest of blobs and the total of their sizes.
func encodeManifest(blobs []BlobPut) ([]byte, int64) {
	m := make([]byte, 0, binary.MaxVarintLen64+len(blobs)*(32+3))
	m = binary.AppendUvarint(m, uint64(len(blobs)))
	var total int64
	for i := range blobs {
		m = append(m, blobs[i].Hash[:]...)
		m = binary.AppendUvarint(m, uint64(len(blobs[i].Data)))
		total += int64(len(blobs[i].Data))
	}
	return m, total
}

// decodeBatch splits a batch body into its manifest's digest and its blobs
// (whose Data alias body). Lengths are checked against the body and
// maxBlob; hashes are not checked here.
func decodeBatch(body []byte, maxBlob int64) (manifestDigest string, blobs []BlobPut, err error) {
	k, n := binary.Uvarint(body)
	if n <= 0 || k == 0 || k > uint64(len(body))/33 {
		return "", nil, fmt.Errorf("%w: bad blob batch count", ErrBadRequest)
	}
	p := n
	blobs = make([]BlobPut, k)
	lens := make([]uint64, k)
	var total uint64
	for i := range blobs {
		if len(body)-p < 33 {
			return "", nil, fmt.Errorf("%w: blob batch manifest cut short", ErrBadRequest)
		}
		copy(blobs[i].Hash[:], body[p:p+32])
		p += 32
		l, m := binary.Uvarint(body[p:])
		if m <= 0 || l > uint64(maxBlob) {
			return "", nil, fmt.Errorf("%w: bad blob length in batch", ErrBadRequest)
		}
		p += m
		lens[i] = l
		total += l
	}
	sum := sha256.Sum256(body[:p])
	if total != uint64(len(body)-p) {
		return "", nil, fmt.Errorf("%w: blob batch of %d data bytes, manifest says %d", ErrBadRequest, len(body)-p, total)
	}
	for i := range blobs {
		blobs[i].Data = body[p : p+int(lens[i]) : p+int(lens[i])]
		p += int(lens[i])
	}
	return hex.EncodeToString(sum[:]), blobs, nil
}

// encodeBatchAnswer encodes the per-blob outcomes of a batch.
func encodeBatchAnswer(errs []error) []byte {
	out := make([]byte, 0, 3*len(errs))
	for _, err := range errs {
		st, msg := http.StatusNoContent, ""
		if err != nil {
			st, msg = statusOf(err), err.Error()
			if len(msg) > 1024 {
				msg = msg[:1024]
			}
		}
		out = binary.BigEndian.AppendUint16(out, uint16(st))
		out = binary.AppendUvarint(out, uint64(len(msg)))
		out = append(out, msg...)
	}
	return out
}

// decodeBatchAnswer parses an answer of k entries into per-blob errors
// (nil for stored), mapped back to the package's sentinels.
func decodeBatchAnswer(b []byte, k int, to NodeID) ([]error, error) {
	errs := make([]error, k)
	for i := range errs {
		if len(b) < 2 {
			return nil, fmt.Errorf("%w: PutBlobs answer from %v cut short", ErrRemote, to)
		}
		st := int(binary.BigEndian.Uint16(b))
		b = b[2:]
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return nil, fmt.Errorf("%w: PutBlobs answer from %v: bad message framing", ErrRemote, to)
		}
		msg := string(b[n : n+int(l)])
		b = b[n+int(l):]
		if st/100 != 2 {
			errs[i] = fmt.Errorf("%w: PutBlobs to node %v: %d %s: %s", sentinelOf(st), to, st, http.StatusText(st), msg)
		}
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: PutBlobs answer from %v: %d bytes after %d entries", ErrRemote, to, len(b), k)
	}
	return errs, nil
}

// PutBlobs implements Client: one POST carrying every blob. Without a ctx
// deadline, BlobTimeout bounds the call.
func (c *HTTPClient) PutBlobs(ctx context.Context, to NodeID, blobs []BlobPut) ([]error, error) {
	if len(blobs) == 0 {
		return nil, nil
	}
	base, err := c.addr(to)
	if err != nil {
		return nil, err
	}
	manifest, total := encodeManifest(blobs)
	parts := make(net.Buffers, 0, 1+len(blobs))
	parts = append(parts, manifest)
	for i := range blobs {
		if len(blobs[i].Data) > 0 {
			parts = append(parts, blobs[i].Data)
		}
	}
	// The body is read from a copy of the slice header list: reading
	// consumes it, and getBody may need it again.
	body := func() *net.Buffers { b := slices.Clone(parts); return &b }
	ctx, cancel := withDefault(ctx, c.cfg.Clock, c.cfg.BlobTimeout)
	defer cancel()
	resp, err := c.do(ctx, &call{
		to: to, base: base, method: http.MethodPost, uri: withMinIndexQuery(ctx, pathBlobs),
		content: hexDigest(manifest), body: body(), length: int64(len(manifest)) + total,
		getBody: func() (io.ReadCloser, error) { return io.NopCloser(body()), nil },
	})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, int64(len(blobs))*(2+2+1024)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: PutBlobs to %v: read answer: %w", ErrUnavailable, to, err)
	}
	return decodeBatchAnswer(out, len(blobs), to)
}

// servePutBlobs serves POST /_cairn/rpc/blobs.
func (s *Server) servePutBlobs(w http.ResponseWriter, r *http.Request, v verified) {
	if r.ContentLength > s.cfg.MaxBodyBytes {
		s.fail(w, r, fmt.Errorf("%w: %d bytes, limit %d", errBodyTooLarge, r.ContentLength, s.cfg.MaxBodyBytes))
		return
	}
	var body []byte
	if cl := r.ContentLength; cl >= 0 {
		body = make([]byte, cl)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			s.fail(w, r, fmt.Errorf("%w: read body: %w", ErrBadRequest, err))
			return
		}
	} else {
		b, err := io.ReadAll(io.LimitReader(r.Body, s.cfg.MaxBodyBytes+1))
		if err != nil {
			s.fail(w, r, fmt.Errorf("%w: read body: %w", ErrBadRequest, err))
			return
		}
		if int64(len(b)) > s.cfg.MaxBodyBytes {
			s.fail(w, r, fmt.Errorf("%w: limit %d", errBodyTooLarge, s.cfg.MaxBodyBytes))
			return
		}
		body = b
	}
	digest, blobs, err := decodeBatch(body, s.cfg.MaxBlobBytes)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if digest != v.content {
		s.fail(w, r, fmt.Errorf("%w: blob batch manifest does not match %s", errAuth, hdrContent))
		return
	}
	errs := checkAndPut(minIndexContext(r), s.h, v.from, blobs)
	out := encodeBatchAnswer(errs)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	_, _ = w.Write(out)
}

// checkAndPut checks each blob against its hash (ErrCorrupt for a
// mismatch; the others still go ahead) and stores the good ones on h.
func checkAndPut(ctx context.Context, h Handler, from NodeID, blobs []BlobPut) []error {
	errs := make([]error, len(blobs))
	good := blobs[:0:0]
	var idx []int
	for i := range blobs {
		if got := blob.Sum(blobs[i].Data); got != blobs[i].Hash {
			errs[i] = fmt.Errorf("%w: blob %s: got bytes of %s", ErrCorrupt, blobs[i].Hash, got)
			continue
		}
		good = append(good, blobs[i])
		idx = append(idx, i)
	}
	if len(good) == 0 {
		return errs
	}
	for j, err := range putBlobsVia(ctx, h, from, good) {
		errs[idx[j]] = err
	}
	return errs
}

// PutBlobs implements Client on the in-memory network: one routed call (op
// OpPutBlobs, one fault decision for the whole batch), the same hash check
// and the same per-blob status mapping as over HTTP.
func (c *memClient) PutBlobs(ctx context.Context, to NodeID, blobs []BlobPut) ([]error, error) {
	if len(blobs) == 0 {
		return nil, nil
	}
	var errs []error
	err := c.call(ctx, to, OpPutBlobs, func(hd Handler) error {
		cp := make([]BlobPut, len(blobs))
		for i := range blobs {
			cp[i] = BlobPut{Hash: blobs[i].Hash, Data: bytes.Clone(blobs[i].Data)}
		}
		errs = checkAndPut(ctx, hd, c.from, cp)
		for i, e := range errs {
			if e != nil {
				errs[i] = wireError(OpPutBlobs, to, e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}
