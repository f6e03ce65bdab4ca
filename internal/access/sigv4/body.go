package sigv4

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// MaxChunkSize is the largest aws-chunked chunk Body accepts: 16 MiB. SDKs
// send 8 KiB to 1 MiB chunks.
const MaxChunkSize = 16 << 20

// Limits of the aws-chunked framing Body accepts.
const (
	// maxLine bounds a chunk header or trailer line, line end included.
	maxLine = 4096
	// maxTrailerLines bounds the number of trailer lines.
	maxTrailerLines = 16
	// bodyBufferSize is the read buffer of a chunked body.
	bodyBufferSize = 16 << 10
)

// String-to-sign prefixes of chunk and trailer signatures.
const (
	chunkAlgorithm   = "AWS4-HMAC-SHA256-PAYLOAD"
	trailerAlgorithm = "AWS4-HMAC-SHA256-TRAILER"
	trailerSigName   = "x-amz-trailer-signature"
)

// Body reads a request's payload as Result.PayloadHash says it is encoded,
// decoding aws-chunked framing and checking every signature, hash, checksum
// and length on the way. It holds a 16 KiB buffer for a chunked body and
// never buffers the payload.
//
// Read returns io.EOF only after every check passed. An error is sticky:
// every later Read returns it. Bytes returned before an error have not all
// been verified (a chunk is checked when its last byte has been read, the
// payload hash and checksums at the end), so a caller must discard
// everything it read unless it saw io.EOF. A Body is not safe for
// concurrent use.
type Body struct {
	src io.Reader
	br  *bufio.Reader
	res *Result

	chunked  bool // aws-chunked framing
	signed   bool // chunk signatures
	trailers bool // a trailer section follows the final chunk

	// Plain body with a hex x-amz-content-sha256.
	payloadSHA hash.Hash
	wantSHA    []byte

	// Checksum of the decoded payload, from a header or a declared trailer.
	sum        hash.Hash
	sumAlg     string
	sumWant    []byte // from the header; nil for a trailer checksum
	trailerAlg string // declared in x-amz-trailer
	checksum   Checksum
	hasSum     bool

	// Chunked decoding.
	state     bodyState
	left      int64 // bytes of the current chunk still to read
	chunkSig  [sha256.Size]byte
	chunkHash hash.Hash
	mac       hash.Hash
	prevSig   string // hex signature the next one chains from
	nchunk    int
	decoded   int64
	wantLen   int64 // x-amz-decoded-content-length, -1 if absent

	err error
}

type bodyState uint8

const (
	stateHeader bodyState = iota // next: a chunk header line
	stateData                    // inside chunk data
	stateFinal                   // the final chunk was read; trailers and checks next
)

// Body returns a reader of r's decoded payload, for a Result that Verify
// returned for r:
//
//   - a hex SHA-256 payload hash: the body as is; at its end the SHA-256 is
//     compared (ErrContentSHA256Mismatch);
//   - UnsignedPayload: the body as is;
//   - StreamingPayload: aws-chunked decoded, every chunk signature checked
//     in a chain from Result.Signature (ErrSignatureDoesNotMatch);
//   - StreamingPayloadTrailer: the same, then the trailers and their
//     signature;
//   - StreamingUnsignedTrailer: aws-chunked without signatures, then the
//     trailers.
//
// A checksum named by x-amz-trailer, or sent in an x-amz-checksum-ALG
// header, is compared with the decoded payload at its end (ErrBadDigest).
// For a chunked body, the decoded length must equal
// x-amz-decoded-content-length if present (ErrIncompleteBody). Body fails
// at once for headers it cannot honour: an unknown or second checksum
// (ErrInvalidRequest), a malformed checksum value (ErrInvalidDigest), a bad
// x-amz-decoded-content-length (ErrInvalidArgument).
//
// Body does not check Content-MD5: a front end that computes the MD5 for
// the ETag anyway compares it. The returned Body reads r.Body, so call Body
// once per request; it does not close r.Body (net/http does).
func (res *Result) Body(r *http.Request) (*Body, error) {
	src := r.Body
	if src == nil {
		src = http.NoBody
	}
	b := &Body{src: src, res: res, wantLen: -1}
	switch ph := res.PayloadHash; ph {
	case UnsignedPayload:
	case StreamingPayload:
		b.chunked, b.signed = true, true
	case StreamingPayloadTrailer:
		b.chunked, b.signed, b.trailers = true, true, true
	case StreamingUnsignedTrailer:
		b.chunked, b.trailers = true, true
	default:
		if !isHexSHA256(ph) {
			return nil, ErrInvalidArgument.with("x-amz-content-sha256 %q is not supported", ph)
		}
		b.wantSHA, _ = hex.DecodeString(ph)
		b.payloadSHA = sha256.New()
	}

	if names := r.Header.Values("X-Amz-Trailer"); len(names) > 0 {
		if !b.trailers {
			return nil, ErrInvalidRequest.with("x-amz-trailer is set but x-amz-content-sha256 is %q; trailers need %s or %s",
				res.PayloadHash, StreamingUnsignedTrailer, StreamingPayloadTrailer)
		}
		for _, list := range names {
			for name := range strings.SplitSeq(list, ",") {
				name = strings.ToLower(strings.TrimSpace(name))
				if name == "" {
					continue
				}
				alg, ok := strings.CutPrefix(name, ChecksumHeaderPrefix)
				if !ok || checksumSize(alg) == 0 {
					return nil, ErrInvalidRequest.with("x-amz-trailer %q is not supported; only x-amz-checksum-crc32, -crc32c, -crc64nvme, -sha1, -sha256 and -sha512 are", name)
				}
				if b.trailerAlg != "" {
					return nil, ErrInvalidRequest.with("expecting a single x-amz-checksum- trailer; x-amz-trailer names %q", strings.Join(names, ","))
				}
				b.trailerAlg = alg
			}
		}
	}
	hc, ok, err := HeaderChecksum(r.Header)
	if err != nil {
		return nil, err
	}
	if ok {
		if b.trailerAlg != "" {
			return nil, ErrInvalidRequest.with("expecting a single checksum: x-amz-checksum-%s header and x-amz-checksum-%s trailer", hc.Algorithm, b.trailerAlg)
		}
		b.sumAlg, b.checksum = hc.Algorithm, hc
		b.sumWant, _ = decodeChecksum(hc.Algorithm, hc.Value)
	} else if b.trailerAlg != "" {
		b.sumAlg = b.trailerAlg
	}
	if b.sumAlg != "" {
		b.sum, _ = NewChecksum(b.sumAlg)
	}

	if b.chunked {
		if v := r.Header.Get("X-Amz-Decoded-Content-Length"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return nil, ErrInvalidArgument.with("x-amz-decoded-content-length %q is not a non-negative integer", v)
			}
			b.wantLen = n
		}
		b.br = bufio.NewReaderSize(src, bodyBufferSize)
	}
	if b.signed {
		b.mac = hmac.New(sha256.New, res.key)
		b.chunkHash = sha256.New()
		b.prevSig = res.Signature
	}
	return b, nil
}

// TakePayloadHash hands the check of a hex x-amz-content-sha256 to the
// caller, for a caller that computes the payload's SHA-256 anyway (a
// content-addressed store): Body stops hashing the payload and returns the
// 32-byte SHA-256 it must have. The caller must then compare it with the
// SHA-256 of every byte Read returned, and refuse the request when they
// differ, as Body would with ErrContentSHA256Mismatch; until it has, the
// payload is unverified. ok is false, and Body keeps checking, for any
// other payload hash (UNSIGNED-PAYLOAD, STREAMING-*) or once Read has been
// called. Every other check (length, x-amz-checksum-*) stays Body's.
func (b *Body) TakePayloadHash() (want []byte, ok bool) {
	if b.payloadSHA == nil || b.decoded != 0 || b.err != nil {
		return nil, false
	}
	b.payloadSHA = nil
	return b.wantSHA, true
}

// Checksum returns the checksum the client sent (header or trailer) and
// Body verified. ok is false until Read has returned io.EOF, or if the
// request carried no checksum.
func (b *Body) Checksum() (c Checksum, ok bool) {
	if b.err != io.EOF || !b.hasSum {
		return Checksum{}, false
	}
	return b.checksum, true
}

// Read reads decoded payload bytes; see Body for its guarantees.
func (b *Body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !b.chunked {
		return b.readPlain(p)
	}
	for {
		switch b.state {
		case stateHeader:
			if err := b.readChunkHeader(); err != nil {
				return 0, b.fail(err)
			}
		case stateData:
			if b.left == 0 {
				if err := b.endChunk(); err != nil {
					return 0, b.fail(err)
				}
				continue
			}
			n := len(p)
			if int64(n) > b.left {
				n = int(b.left)
			}
			n, err := b.br.Read(p[:n])
			b.left -= int64(n)
			if cerr := b.consume(p[:n]); cerr != nil {
				return n, b.fail(cerr)
			}
			if err == io.EOF {
				return n, b.fail(ErrIncompleteBody.with("the body ended inside chunk %d with %d bytes of it missing", b.nchunk, b.left))
			}
			if err != nil {
				return n, b.fail(sourceError(err))
			}
			if n > 0 {
				return n, nil
			}
		case stateFinal:
			if err := b.finishChunked(); err != nil {
				return 0, b.fail(err)
			}
			b.err = io.EOF
			return 0, io.EOF
		}
	}
}

func (b *Body) fail(err error) error {
	b.err = err
	return err
}

// sourceError maps an error from the request body: a body cut short is
// ErrIncompleteBody, anything else (a network error, a size limit) is
// passed on wrapped.
func sourceError(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return ErrIncompleteBody.with("the body ended early: %v", err)
	}
	return fmt.Errorf("sigv4: reading the request body: %w", err)
}

func (b *Body) readPlain(p []byte) (int, error) {
	n, err := b.src.Read(p)
	if n > 0 {
		if b.payloadSHA != nil {
			b.payloadSHA.Write(p[:n])
		}
		if b.sum != nil {
			b.sum.Write(p[:n])
		}
		b.decoded += int64(n)
	}
	switch {
	case err == io.EOF:
		if b.payloadSHA != nil {
			if got := b.payloadSHA.Sum(nil); subtle.ConstantTimeCompare(got, b.wantSHA) != 1 {
				return n, b.fail(ErrContentSHA256Mismatch.with("x-amz-content-sha256 is %s but the %d-byte body hashes to %x",
					b.res.PayloadHash, b.decoded, got))
			}
		}
		if err := b.checkSum(); err != nil {
			return n, b.fail(err)
		}
		b.err = io.EOF
		return n, io.EOF
	case err != nil:
		return n, b.fail(sourceError(err))
	}
	return n, nil
}

// consume accounts for decoded bytes.
func (b *Body) consume(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	b.decoded += int64(len(p))
	if b.wantLen >= 0 && b.decoded > b.wantLen {
		return ErrIncompleteBody.with("the decoded body is longer than x-amz-decoded-content-length %d", b.wantLen)
	}
	if b.signed {
		b.chunkHash.Write(p)
	}
	if b.sum != nil {
		b.sum.Write(p)
	}
	return nil
}

// readLine reads a line up to and including '\n'. At the end of the body
// it returns what is left (possibly nothing) with io.EOF.
func (b *Body) readLine() ([]byte, error) {
	line, err := b.br.ReadSlice('\n')
	if len(line) > maxLine || err == bufio.ErrBufferFull {
		return nil, ErrMalformedChunk.with("a chunk header or trailer line is longer than %d bytes", maxLine)
	}
	if err != nil && err != io.EOF {
		return nil, sourceError(err)
	}
	return line, err
}

// quote renders a line for an error message, shortened.
func quote(line []byte) string {
	if len(line) > 80 {
		return strconv.Quote(string(line[:80])) + "..."
	}
	return strconv.Quote(string(line))
}

// readChunkHeader reads "SIZE;chunk-signature=SIG\r\n" (signed) or
// "SIZE\r\n" (unsigned) and moves to stateData, or to stateFinal after a
// zero-size chunk.
func (b *Body) readChunkHeader() error {
	line, err := b.readLine()
	if err == io.EOF {
		if b.nchunk == 0 && len(line) == 0 {
			return ErrIncompleteBody.with("the aws-chunked body is empty; it needs at least the final zero-size chunk")
		}
		return ErrIncompleteBody.with("the body ended after chunk %d, before the final zero-size chunk", b.nchunk)
	}
	if err != nil {
		return err
	}
	b.nchunk++
	body, ok := bytes.CutSuffix(line, []byte("\r\n"))
	if !ok {
		return ErrMalformedChunk.with("chunk %d header %s does not end in CRLF", b.nchunk, quote(line))
	}
	size, sig, err := parseChunkHeader(body, b.signed)
	if err != nil {
		return ErrMalformedChunk.with("chunk %d header %s: %v", b.nchunk, quote(line), err)
	}
	b.left, b.chunkSig = size, sig
	if size > 0 {
		b.state = stateData
		return nil
	}
	if b.signed {
		if err := b.verifyChunk(); err != nil {
			return err
		}
	}
	b.state = stateFinal
	return nil
}

// parseChunkHeader parses a chunk header line without its CRLF.
func parseChunkHeader(line []byte, signed bool) (size int64, sig [sha256.Size]byte, err error) {
	sizeHex := line
	if signed {
		const ext = ";chunk-signature="
		i := bytes.IndexByte(line, ';')
		if i < 0 || !bytes.HasPrefix(line[i:], []byte(ext)) {
			return 0, sig, errors.New("want SIZE;chunk-signature=SIGNATURE")
		}
		sizeHex = line[:i]
		s := line[i+len(ext):]
		if len(s) != 2*sha256.Size {
			return 0, sig, errors.New("the chunk signature is not 64 hex digits")
		}
		if _, err := hex.Decode(sig[:], s); err != nil {
			return 0, sig, errors.New("the chunk signature is not 64 hex digits")
		}
	}
	if len(sizeHex) == 0 || len(sizeHex) > 16 {
		return 0, sig, errors.New("the chunk size is not 1 to 16 hex digits")
	}
	for _, c := range sizeHex {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, sig, errors.New("the chunk size is not hex")
		}
		size = size<<4 | int64(d)
		if size > MaxChunkSize {
			return 0, sig, fmt.Errorf("the chunk size exceeds the %d-byte limit", MaxChunkSize)
		}
	}
	return size, sig, nil
}

// endChunk reads the CRLF after a chunk's data and checks its signature.
func (b *Body) endChunk() error {
	var crlf [2]byte
	if _, err := io.ReadFull(b.br, crlf[:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return ErrIncompleteBody.with("the body ended after the data of chunk %d, before its CRLF", b.nchunk)
		}
		return sourceError(err)
	}
	if crlf != [2]byte{'\r', '\n'} {
		return ErrMalformedChunk.with("the data of chunk %d is not followed by CRLF (the chunk is longer than its size says)", b.nchunk)
	}
	if b.signed {
		if err := b.verifyChunk(); err != nil {
			return err
		}
	}
	b.state = stateHeader
	return nil
}

// verifyChunk checks the signature of the chunk just read:
//
//	AWS4-HMAC-SHA256-PAYLOAD \n DATE \n SCOPE \n PREVIOUS-SIGNATURE \n hex(sha256("")) \n hex(sha256(DATA))
func (b *Body) verifyChunk() error {
	var sum [sha256.Size]byte
	b.chunkHash.Sum(sum[:0])
	b.chunkHash.Reset()
	var hx [2 * sha256.Size]byte
	hex.Encode(hx[:], sum[:])
	m := b.mac
	m.Reset()
	b.writeSigPrefix(chunkAlgorithm)
	m.Write([]byte(EmptySHA256 + "\n"))
	m.Write(hx[:])
	if !b.checkSig(b.chunkSig) {
		return ErrSignatureDoesNotMatch.with("the signature of chunk %d does not match its data", b.nchunk)
	}
	return nil
}

// writeSigPrefix writes "ALG\nDATE\nSCOPE\nPREVIOUS\n" to the reset mac.
func (b *Body) writeSigPrefix(alg string) {
	m := b.mac
	m.Write([]byte(alg))
	m.Write([]byte{'\n'})
	m.Write([]byte(b.res.amzDate))
	m.Write([]byte{'\n'})
	m.Write([]byte(b.res.scope))
	m.Write([]byte{'\n'})
	m.Write([]byte(b.prevSig))
	m.Write([]byte{'\n'})
}

// checkSig compares the mac's signature with want in constant time and
// makes it the previous signature of the chain.
func (b *Body) checkSig(want [sha256.Size]byte) bool {
	var got [sha256.Size]byte
	b.mac.Sum(got[:0])
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		return false
	}
	b.prevSig = hex.EncodeToString(got[:])
	return true
}

// finishChunked reads what follows the final chunk, then runs the checks
// that need the whole payload.
func (b *Body) finishChunked() error {
	if b.trailers {
		if err := b.readTrailers(); err != nil {
			return err
		}
	} else {
		// Only an optional CRLF may follow the final chunk.
		line, err := b.readLine()
		switch {
		case err == io.EOF && len(line) == 0:
		case err == nil && string(line) == "\r\n":
			if err := b.expectEOF(); err != nil {
				return err
			}
		case err != nil && err != io.EOF:
			return err
		default:
			return ErrMalformedChunk.with("unexpected data %s after the final chunk", quote(line))
		}
	}
	if b.wantLen >= 0 && b.decoded != b.wantLen {
		return ErrIncompleteBody.with("the decoded body has %d bytes but x-amz-decoded-content-length is %d", b.decoded, b.wantLen)
	}
	return b.checkSum()
}

// expectEOF fails unless the body has ended.
func (b *Body) expectEOF() error {
	_, err := b.br.ReadByte()
	switch {
	case err == io.EOF:
		return nil
	case err != nil:
		return sourceError(err)
	}
	return ErrMalformedChunk.with("data follows the end of the aws-chunked payload")
}

// readTrailers reads the trailer lines "name:value\r\n" up to an empty
// line (or the end of the body, as some clients omit the last CRLF),
// checks the trailer signature of a signed payload:
//
//	AWS4-HMAC-SHA256-TRAILER \n DATE \n SCOPE \n PREVIOUS-SIGNATURE \n hex(sha256("name:value\n" ...))
//
// and records the declared checksum.
func (b *Body) readTrailers() error {
	var signedPart []byte // the trailer lines as sent, each ending in "\n"
	var value string
	var haveValue, haveSig bool
	var sig [sha256.Size]byte
	for i := 0; ; i++ {
		line, err := b.readLine()
		if err != nil && err != io.EOF {
			return err
		}
		eof := err == io.EOF
		text, ok := bytes.CutSuffix(line, []byte("\n"))
		text, _ = bytes.CutSuffix(text, []byte("\r"))
		if !ok && !eof {
			return ErrMalformedTrailer.with("trailer line %s does not end in CRLF", quote(line))
		}
		if len(text) == 0 {
			if eof {
				break
			}
			if err := b.expectEOF(); err != nil {
				return err
			}
			break
		}
		if haveSig {
			return ErrMalformedTrailer.with("trailer %s follows %s, which must come last", quote(text), trailerSigName)
		}
		if i >= maxTrailerLines {
			return ErrMalformedTrailer.with("more than %d trailer lines", maxTrailerLines)
		}
		n, v, ok := bytes.Cut(text, []byte(":"))
		if !ok {
			return ErrMalformedTrailer.with("trailer line %s is not name:value", quote(text))
		}
		name := strings.ToLower(strings.TrimSpace(string(n)))
		switch {
		case b.signed && name == trailerSigName:
			s := bytes.TrimSpace(v)
			if len(s) != 2*sha256.Size {
				return ErrMalformedTrailer.with("%s %s is not 64 hex digits", trailerSigName, quote(s))
			}
			if _, err := hex.Decode(sig[:], s); err != nil {
				return ErrMalformedTrailer.with("%s %s is not 64 hex digits", trailerSigName, quote(s))
			}
			haveSig = true
		case b.trailerAlg != "" && name == ChecksumHeaderPrefix+b.trailerAlg:
			if haveValue {
				return ErrMalformedTrailer.with("trailer %s appears twice", name)
			}
			value, haveValue = strings.TrimSpace(string(v)), true
			signedPart = append(append(signedPart, text...), '\n')
		default:
			return ErrMalformedTrailer.with("trailer %q was not declared in x-amz-trailer", name)
		}
		if eof {
			break
		}
	}
	if b.signed {
		if !haveSig {
			return ErrMalformedTrailer.with("the trailer has no %s", trailerSigName)
		}
		sum := sha256.Sum256(signedPart)
		var hx [2 * sha256.Size]byte
		hex.Encode(hx[:], sum[:])
		b.mac.Reset()
		b.writeSigPrefix(trailerAlgorithm)
		b.mac.Write(hx[:])
		if !b.checkSig(sig) {
			return ErrSignatureDoesNotMatch.with("the trailer signature does not match the trailers")
		}
	}
	if b.trailerAlg != "" {
		if !haveValue {
			return ErrMalformedTrailer.with("the declared trailer %s%s is missing", ChecksumHeaderPrefix, b.trailerAlg)
		}
		want, err := decodeChecksum(b.trailerAlg, value)
		if err != nil {
			return err
		}
		b.sumWant = want
		b.checksum = Checksum{Algorithm: b.trailerAlg, Value: value}
	}
	return nil
}

// checkSum compares the checksum of the decoded payload with the one sent.
func (b *Body) checkSum() error {
	if b.sum == nil {
		return nil
	}
	got := b.sum.Sum(nil)
	if subtle.ConstantTimeCompare(got, b.sumWant) != 1 {
		return ErrBadDigest.with("the x-amz-checksum-%s you specified (%s) did not match the computed checksum of the %d-byte payload (%s)",
			b.sumAlg, b.checksum.Value, b.decoded, EncodeChecksum(b.sum))
	}
	b.hasSum = true
	return nil
}
