package cas

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// MaxSize is the largest blob: files are cut into blobs of at most 4 MiB.
const MaxSize = 4 << 20

// Hash names a blob: the SHA-256 of its bytes.
type Hash [32]byte

// Blob is a blob's bytes with its name: Hash is Sum(Data), as the sender
// vouches (a node that stores it checks). It is one blob of a batched
// write, handed from the store through replication to the transport.
type Blob struct {
	Hash Hash
	Data []byte
}

// Sum returns the Hash of b.
func Sum(b []byte) Hash { return Hash(sha256.Sum256(b)) }

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
