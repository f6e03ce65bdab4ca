package cas

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/crc32"
)

// MaxSize is the largest blob: files are cut into blobs of at most 4 MiB.
const MaxSize = 4 << 20

// Hash names a blob: the SHA-256 of its bytes.
type Hash [32]byte

// Blob is a blob's bytes with its name: Hash is Sum(Data), as the sender
// vouches (a node that stores it checks). It is one blob of a write,
// handed from the store through replication to the transport. CRC, when
// set, is the CRC32C of Data computed in the same pass as Hash (Sums): a
// replica that receives the blob over an authenticated channel checks it
// instead of hashing the bytes again with SHA-256.
type Blob struct {
	Hash Hash
	Data []byte
	CRC  CRC
}

// Sum returns the Hash of b.
func Sum(b []byte) Hash { return Hash(sha256.Sum256(b)) }

// castagnoli is the CRC32C table (hardware-accelerated where the CPU has
// the instruction).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC is an optional CRC32C (Castagnoli) of a blob's bytes. The zero CRC
// is absent: a sender that has none (an older node, a path that did not
// compute one) sends none, and the receiver hashes with SHA-256.
type CRC struct {
	sum uint32
	set bool
}

// CRCOf returns the CRC with value sum (a CRC32C).
func CRCOf(sum uint32) CRC { return CRC{sum: sum, set: true} }

// Value returns the CRC32C, and whether there is one.
func (c CRC) Value() (uint32, bool) { return c.sum, c.set }

// CRC32C returns the CRC32C (Castagnoli) of b.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// sumsChunk is how much of a blob Sums feeds each function in turn: small
// enough to stay in the CPU's cache between the two.
const sumsChunk = 32 << 10

// Sums returns b's Hash and its CRC32C in one pass over b: each chunk of
// it is hashed and then checksummed while it is in the cache, so the CRC
// costs no second read of the bytes from memory. The CRC attests the same
// bytes as the Hash: a buffer changed afterwards fails it.
func Sums(b []byte) (Hash, CRC) {
	d := sha256.New()
	var c uint32
	for len(b) > 0 {
		n := min(len(b), sumsChunk)
		d.Write(b[:n])
		c = crc32.Update(c, castagnoli, b[:n])
		b = b[n:]
	}
	var h Hash
	d.Sum(h[:0])
	return h, CRCOf(c)
}

// String returns the lowercase hex form of h.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// ParseHash parses the hex form produced by String.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 64 {
		return h, fmt.Errorf("blob: bad hash %q", s)
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("blob: bad hash %q: %w", s, err)
	}
	return h, nil
}
