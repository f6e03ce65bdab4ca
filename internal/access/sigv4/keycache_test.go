package sigv4

import (
	"bytes"
	"fmt"
	"testing"
)

// TestSigningKeyCache: a cached key is the one the derivation gives, for
// each secret, day, region and service apart, and the cache stays bounded.
func TestSigningKeyCache(t *testing.T) {
	derive := func(secret, date, region, svc string) []byte {
		k := hmacSHA256([]byte("AWS4"+secret), date)
		k = hmacSHA256(k, region)
		k = hmacSHA256(k, svc)
		return hmacSHA256(k, scopeTerminator)
	}
	for _, c := range [][4]string{
		{"s1", "20261127", "us-east-1", "s3"},
		{"s1", "20261128", "us-east-1", "s3"},
		{"s2", "20261127", "us-east-1", "s3"},
		{"s1", "20261127", "eu-west-1", "s3"},
	} {
		for range 2 { // derived, then cached
			if got := signingKey(c[0], c[1], c[2], c[3]); !bytes.Equal(got, derive(c[0], c[1], c[2], c[3])) {
				t.Fatalf("signing key of %v differs from its derivation", c)
			}
		}
	}
	for i := range 2 * maxCachedKeys {
		signingKey(fmt.Sprint("secret", i), "20261127", "us-east-1", "s3")
	}
	keys.mu.Lock()
	n := len(keys.m)
	keys.mu.Unlock()
	if n > maxCachedKeys {
		t.Fatalf("%d cached keys, bound %d", n, maxCachedKeys)
	}
}

func BenchmarkSigningKey(b *testing.B) {
	for range b.N {
		signingKey("secret", "20261127", "us-east-1", "s3")
	}
}
