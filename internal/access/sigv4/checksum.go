package sigv4

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"net/http"
	"strings"
)

// The checksum algorithms of S3's x-amz-checksum-ALG headers and trailers,
// by the lowercase name that follows "x-amz-checksum-".
const (
	// ChecksumCRC32 is CRC-32 (IEEE), 4 bytes.
	ChecksumCRC32 = "crc32"
	// ChecksumCRC32C is CRC-32C (Castagnoli), 4 bytes.
	ChecksumCRC32C = "crc32c"
	// ChecksumCRC64NVME is CRC-64/NVME, 8 bytes.
	ChecksumCRC64NVME = "crc64nvme"
	// ChecksumSHA1 is SHA-1, 20 bytes.
	ChecksumSHA1 = "sha1"
	// ChecksumSHA256 is SHA-256, 32 bytes.
	ChecksumSHA256 = "sha256"
	// ChecksumSHA512 is SHA-512, 64 bytes (newer SDKs offer it).
	ChecksumSHA512 = "sha512"
)

// ChecksumHeaderPrefix starts the name of every checksum header and trailer.
const ChecksumHeaderPrefix = "x-amz-checksum-"

// checksumAlgorithms lists the algorithms in a fixed order, to scan headers.
func checksumAlgorithms() [6]string {
	return [...]string{ChecksumCRC32, ChecksumCRC32C, ChecksumCRC64NVME, ChecksumSHA1, ChecksumSHA256, ChecksumSHA512}
}

// crc64NVMEPoly is the reversed polynomial of CRC-64/NVME
// (0xAD93D23594C93659 in normal form). Go's crc64 uses the reflected
// algorithm with initial value and final xor all ones, which is what
// CRC-64/NVME specifies.
const crc64NVMEPoly = 0x9a6c9329ac4bc9b5

// Checksum is a verified checksum: the algorithm (one of the Checksum*
// names) and the base64 value the client sent for it.
type Checksum struct {
	// Algorithm is ChecksumCRC32, ChecksumCRC32C, ChecksumCRC64NVME,
	// ChecksumSHA1, ChecksumSHA256 or ChecksumSHA512.
	Algorithm string
	// Value is the standard base64 of the big-endian digest.
	Value string
}

// NewChecksum returns a new hash for a checksum algorithm named as in
// x-amz-checksum-ALG or x-amz-sdk-checksum-algorithm (case-insensitive:
// "crc32", "CRC32C", "crc64nvme", "sha1", "sha256", "sha512"). Sum returns the
// big-endian digest; its standard base64 is the header value, see
// EncodeChecksum. An unknown name is an ErrInvalidRequest error.
//
// For CRC-64/NVME, the hash is hash/crc64 with the table of
// 0x9a6c9329ac4bc9b5; its check value ("123456789") is 0xAE8B14860A799888.
func NewChecksum(alg string) (hash.Hash, error) {
	switch strings.ToLower(alg) {
	case ChecksumCRC32:
		return crc32.NewIEEE(), nil
	case ChecksumCRC32C:
		return crc32.New(crc32.MakeTable(crc32.Castagnoli)), nil
	case ChecksumCRC64NVME:
		return crc64.New(crc64.MakeTable(crc64NVMEPoly)), nil
	case ChecksumSHA1:
		return sha1.New(), nil
	case ChecksumSHA256:
		return sha256.New(), nil
	case ChecksumSHA512:
		return sha512.New(), nil
	}
	return nil, ErrInvalidRequest.with("checksum algorithm %q is not supported; use CRC32, CRC32C, CRC64NVME, SHA1, SHA256 or SHA512", alg)
}

// EncodeChecksum returns the header form of h's digest: the standard
// base64 of h.Sum(nil).
func EncodeChecksum(h hash.Hash) string {
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// checksumSize returns the digest size of an algorithm (lowercase name).
func checksumSize(alg string) int {
	switch alg {
	case ChecksumCRC32, ChecksumCRC32C:
		return 4
	case ChecksumCRC64NVME:
		return 8
	case ChecksumSHA1:
		return sha1.Size
	case ChecksumSHA256:
		return sha256.Size
	case ChecksumSHA512:
		return sha512.Size
	}
	return 0
}

// decodeChecksum decodes a base64 checksum value of algorithm alg, or fails
// with ErrInvalidDigest.
func decodeChecksum(alg, value string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(value))
	if err != nil || len(b) != checksumSize(alg) {
		return nil, ErrInvalidDigest.with("the x-amz-checksum-%s value %q is not the base64 of a %d-byte digest", alg, value, checksumSize(alg))
	}
	return b, nil
}

// HeaderChecksum returns the checksum a request carries in an
// x-amz-checksum-ALG header (for a plain, non-chunked upload): ok is false
// if it carries none. More than one checksum header is an ErrInvalidRequest
// error, a value that is not the base64 of a digest of the right size an
// ErrInvalidDigest error. Headers that are not checksum values
// (x-amz-checksum-mode, x-amz-checksum-type) are ignored.
func HeaderChecksum(h http.Header) (c Checksum, ok bool, err error) {
	for _, alg := range checksumAlgorithms() {
		v := h.Values(ChecksumHeaderPrefix + alg)
		if len(v) == 0 {
			continue
		}
		if ok || len(v) > 1 {
			return Checksum{}, false, ErrInvalidRequest.with("expecting a single x-amz-checksum- header; multiple checksum types are not allowed")
		}
		if _, err := decodeChecksum(alg, v[0]); err != nil {
			return Checksum{}, false, err
		}
		c, ok = Checksum{Algorithm: alg, Value: strings.TrimSpace(v[0])}, true
	}
	return c, ok, nil
}
