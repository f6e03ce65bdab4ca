package sigv4

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"testing"
)

// TestNewChecksum checks each algorithm against its published check value
// (the digest of "123456789") and the header encoding.
func TestNewChecksum(t *testing.T) {
	for _, tc := range []struct {
		alg   string
		input string
		hex   string // the known digest
	}{
		{"crc32", "123456789", "cbf43926"},
		{"CRC32", "", "00000000"},
		{"crc32c", "123456789", "e3069283"},
		{"CRC32C", "a", "c1d04330"},
		{"crc64nvme", "123456789", "ae8b14860a799888"},
		{"CRC64NVME", "", "0000000000000000"},
		{"sha1", "123456789", "f7c3bc1d808e04732adf679965ccc34ca7ae3441"},
		{"sha256", "123456789", "15e2b0d3c33891ebb0f1ef609ec419420c20e320ce94c65fbc8c3312448eb225"},
		{"sha512", "abc", "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"},
		{"SHA256", "Hello world", "64ec88ca00b268e5ba1a35678a1b5316d212f4f366b2477232534a8aeca37f3c"},
	} {
		h, err := NewChecksum(tc.alg)
		if err != nil {
			t.Fatal(err)
		}
		h.Write([]byte(tc.input))
		if got := hex.EncodeToString(h.Sum(nil)); got != tc.hex {
			t.Errorf("%s(%q) = %s, want %s", tc.alg, tc.input, got, tc.hex)
		}
		want, _ := hex.DecodeString(tc.hex)
		if got := EncodeChecksum(h); got != base64.StdEncoding.EncodeToString(want) {
			t.Errorf("EncodeChecksum %s(%q) = %s", tc.alg, tc.input, got)
		}
	}
	// The example of the AWS SDK's aws-chunked documentation.
	h, _ := NewChecksum(ChecksumSHA256)
	h.Write([]byte("Hello world"))
	if got := EncodeChecksum(h); got != "ZOyIygCyaOW6GjVnihtTFtIS9PNmskdyMlNKiuyjfzw=" {
		t.Errorf("sha256 header value %s", got)
	}
	for _, alg := range []string{"md5", "crc16", "", "crc32 "} {
		if _, err := NewChecksum(alg); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("NewChecksum(%q): %v", alg, err)
		}
	}
}

func TestHeaderChecksum(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers map[string][]string
		want    Checksum
		ok      bool
		err     error
	}{
		{"none", nil, Checksum{}, false, nil},
		{"mode and type ignored", map[string][]string{"X-Amz-Checksum-Mode": {"ENABLED"}, "X-Amz-Checksum-Type": {"COMPOSITE"}}, Checksum{}, false, nil},
		{"crc32", map[string][]string{"X-Amz-Checksum-Crc32": {"y/Q5Jg=="}}, Checksum{"crc32", "y/Q5Jg=="}, true, nil},
		{"crc64nvme", map[string][]string{"X-Amz-Checksum-Crc64nvme": {"rosUhgp5mIg="}}, Checksum{"crc64nvme", "rosUhgp5mIg="}, true, nil},
		{"wrong size", map[string][]string{"X-Amz-Checksum-Sha256": {"y/Q5Jg=="}}, Checksum{}, false, ErrInvalidDigest},
		{"not base64", map[string][]string{"X-Amz-Checksum-Crc32c": {"????"}}, Checksum{}, false, ErrInvalidDigest},
		{"two algorithms", map[string][]string{"X-Amz-Checksum-Crc32": {"y/Q5Jg=="}, "X-Amz-Checksum-Crc32c": {"4waSgw=="}}, Checksum{}, false, ErrInvalidRequest},
		{"two values", map[string][]string{"X-Amz-Checksum-Crc32": {"y/Q5Jg==", "y/Q5Jg=="}}, Checksum{}, false, ErrInvalidRequest},
	} {
		got, ok, err := HeaderChecksum(http.Header(tc.headers))
		if got != tc.want || ok != tc.ok || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("%s: %+v, %v, %v", tc.name, got, ok, err)
		}
	}
}
