package transport

import (
	"context"
	"crypto/rand"
	"errors"
	"net/url"
	"testing"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/minindex"
)

// TestPutBlobURI: the CRC and the minimum index travel as signed query
// parameters, and the server reads the CRC back; a malformed one is none.
func TestPutBlobURI(t *testing.T) {
	h := blob.Sum([]byte("x"))
	base := pathBlob + h.String()
	ctx := minindex.With(context.Background(), 42)
	for _, tc := range []struct {
		ctx  context.Context
		crc  cas.CRC
		want string
	}{
		{context.Background(), cas.CRC{}, base},
		{ctx, cas.CRC{}, base + "?min=42"},
		{context.Background(), cas.CRCOf(0x1a2b), base + "?crc=00001a2b"},
		{ctx, cas.CRCOf(0xdeadbeef), base + "?min=42&crc=deadbeef"},
	} {
		uri := putBlobURI(tc.ctx, BlobPut{Hash: h, CRC: tc.crc})
		if uri != tc.want {
			t.Errorf("putBlobURI = %q, want %q", uri, tc.want)
		}
		u, err := url.Parse(uri)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := queryCRC(u); got != tc.crc {
			t.Errorf("queryCRC(%q) = %v, want %v", uri, got, tc.crc)
		}
	}
	for _, q := range []string{"crc=", "crc=123", "crc=xyzxyzxy", "crc=123456789", "min=1"} {
		if c, ok := queryCRC(&url.URL{RawQuery: q}); ok {
			t.Errorf("queryCRC(%q) = %v, want none", q, c)
		}
	}
}

// TestPutBlobCRC: over node-to-node TLS a replica checks the CRC32C the
// writer sent with a blob instead of hashing it again, and refuses bytes
// that fail it (a sender's buffer changed after hashing); without a CRC
// (an older writer) or without TLS (where the body's SHA-256 is what
// authenticates it; an older replica does the same) it checks the SHA-256.
func TestPutBlobCRC(t *testing.T) {
	data := make([]byte, 300<<10)
	rand.Read(data)
	h, crc := cas.Sums(data)
	other := blob.Sum([]byte("another blob"))
	changed := append([]byte(nil), data...)
	changed[len(changed)/3] ^= 0x10
	ctx := context.Background()

	srvID, cliID := identity(t, testSecret, 2), identity(t, testSecret, 1)
	fh, addr, _ := tlsNode(t, 2, srvID, srvID)
	c := tlsClient(t, 1, cliID, map[NodeID]string{2: addr})
	plainH, plainAddr, _ := tlsNode(t, 3, nil, nil)
	plain := tlsClient(t, 1, nil, map[NodeID]string{3: plainAddr})

	for _, tc := range []struct {
		name   string
		c      *HTTPClient
		to     NodeID
		fh     *fakeHandler
		b      BlobPut
		stored bool
	}{
		{"tls, crc", c, 2, fh, BlobPut{Hash: h, Data: data, CRC: crc}, true},
		{"tls, crc, bytes changed after hashing", c, 2, fh, BlobPut{Hash: h, Data: changed, CRC: crc}, false},
		// The name is the writer's to vouch for: with a CRC over TLS the
		// replica does not hash (what this change saves); the CRC is of
		// the bytes sent, so they are accepted under the wrong name.
		{"tls, crc, no sha-256 pass", c, 2, fh, BlobPut{Hash: other, Data: data, CRC: crc}, true},
		{"tls, no crc, wrong name", c, 2, fh, BlobPut{Hash: h, Data: changed}, false},
		{"tls, no crc", c, 2, fh, BlobPut{Hash: h, Data: data}, true},
		{"no tls, crc, wrong name", plain, 3, plainH, BlobPut{Hash: other, Data: data, CRC: crc}, false},
		{"no tls, crc", plain, 3, plainH, BlobPut{Hash: h, Data: data, CRC: crc}, true},
	} {
		tc.fh.mu.Lock()
		clear(tc.fh.blobs)
		tc.fh.mu.Unlock()
		err := tc.c.PutBlob(ctx, tc.to, tc.b)
		tc.fh.mu.Lock()
		_, stored := tc.fh.blobs[tc.b.Hash]
		tc.fh.mu.Unlock()
		switch {
		case tc.stored && (err != nil || !stored):
			t.Errorf("%s: PutBlob = %v, stored %v; want stored", tc.name, err, stored)
		case !tc.stored && (!errors.Is(err, ErrCorrupt) || stored):
			t.Errorf("%s: PutBlob = %v, stored %v; want ErrCorrupt, not stored", tc.name, err, stored)
		}
	}
}

// TestMemPutBlobCRC: the in-memory network checks a CRC when one is sent,
// the hash otherwise, as node-to-node TLS does.
func TestMemPutBlobCRC(t *testing.T) {
	q := &queue{}
	net := NewMemNetwork(MemConfig{Seed: 1, Schedule: q.schedule})
	net.Register(2, "http://node2", newFakeHandler())
	c := net.Client(1, nil)
	data := []byte("some bytes")
	h, crc := cas.Sums(data)
	ctx := context.Background()
	if err := c.PutBlob(ctx, 2, BlobPut{Hash: h, Data: []byte("some bytez"), CRC: crc}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("PutBlob with bytes failing the CRC = %v, want ErrCorrupt", err)
	}
	if err := c.PutBlob(ctx, 2, BlobPut{Hash: h, Data: []byte("some bytez")}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("PutBlob with bytes failing the hash = %v, want ErrCorrupt", err)
	}
	if err := c.PutBlob(ctx, 2, BlobPut{Hash: h, Data: data, CRC: crc}); err != nil {
		t.Fatalf("PutBlob = %v", err)
	}
}
