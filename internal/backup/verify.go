package backup

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
)

// verifier reads exactly size bytes of r and checks their SHA-256 before
// it hands over the last byte: the last byte is read on its own, and when
// the digest (or the length) is wrong, Read returns ErrDigest
// (io.ErrUnexpectedEOF for a short source) instead of it. So whatever
// consumes a verifier — a file being written, a PUT's body — never sees
// the whole of a wrong content, and fails. An empty want accepts any
// content and records its digest (Sum).
//
// A verifier is not safe for concurrent use.
type verifier struct {
	r    io.Reader
	h    hash.Hash
	want string
	size int64
	n    int64 // bytes handed over
	done bool  // the last byte was handed over (or size is 0 and checked)
	err  error // sticky
	// onRead, if set, is called with the count of each read handed over
	// (progress).
	onRead func(int)
}

func newVerifier(r io.Reader, want string, size int64) *verifier {
	return &verifier{r: r, h: sha256.New(), want: want, size: size}
}

// Sum is the hex SHA-256 of the bytes read so far (of the whole content
// once Read returned io.EOF).
func (v *verifier) Sum() string { return hex.EncodeToString(v.h.Sum(nil)) }

func (v *verifier) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if v.done {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	left := v.size - v.n
	if left > 1 {
		// All but the last byte: pass through.
		if int64(len(p)) > left-1 {
			p = p[:left-1]
		}
		m, err := v.r.Read(p)
		v.h.Write(p[:m])
		v.n += int64(m)
		v.progress(m)
		if errors.Is(err, io.EOF) {
			return m, v.fail(fmt.Errorf("%w: the content ended at %d of %d bytes", io.ErrUnexpectedEOF, v.n, v.size))
		}
		if err != nil {
			return m, v.fail(err)
		}
		return m, nil
	}
	// The last byte (none for an empty content), then the check.
	var last [1]byte
	if left == 1 {
		if _, err := io.ReadFull(v.r, last[:]); err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: the content ended at %d of %d bytes", io.ErrUnexpectedEOF, v.n, v.size)
			}
			return 0, v.fail(err)
		}
		v.h.Write(last[:])
	}
	var extra [1]byte
	if m, _ := io.ReadFull(v.r, extra[:]); m > 0 {
		return 0, v.fail(fmt.Errorf("%w: the content is longer than its %d bytes", ErrDigest, v.size))
	}
	if got := v.Sum(); v.want != "" && got != v.want {
		return 0, v.fail(fmt.Errorf("%w: got %s, want %s", ErrDigest, short(got), short(v.want)))
	}
	v.done = true
	if left == 1 {
		p[0] = last[0]
		v.n++
		v.progress(1)
		return 1, nil
	}
	return 0, io.EOF
}

func (v *verifier) progress(n int) {
	if v.onRead != nil && n > 0 {
		v.onRead(n)
	}
}

func (v *verifier) fail(err error) error {
	v.err = err
	return err
}

// readVerified reads the whole content of r (size bytes, expected digest
// want: "" accepts any) into memory, checked; it returns the content and
// its digest.
func readVerified(r io.Reader, want string, size int64, onRead func(int)) ([]byte, string, error) {
	v := newVerifier(r, want, size)
	v.onRead = onRead
	buf := make([]byte, 0, size+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		m, err := v.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, v.Sum(), nil
		}
		if err != nil {
			return nil, "", err
		}
	}
}

// short abbreviates a hex digest for messages.
func short(h string) string {
	if len(h) > 16 {
		return h[:16] + "…"
	}
	return h
}

// sha256Raw is the SHA-256 of data.
func sha256Raw(data []byte) []byte {
	s := sha256.Sum256(data)
	return s[:]
}
