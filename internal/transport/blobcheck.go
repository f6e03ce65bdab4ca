package transport

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/minindex"
)

// A PutBlob may carry the CRC32C of its bytes, computed by the writer in
// the same pass as their SHA-256 (cas.Sums), as the signed query
// parameter "crc" (8 lowercase hex digits). See doc.go, "Blob checks".

// putBlobURI is the URI of a PutBlob of b: its path, then the signed
// query parameters "min" (ctx's minimum applied index) and "crc" when
// there are any.
func putBlobURI(ctx context.Context, b BlobPut) string {
	uri := pathBlob + b.Hash.String()
	sep := "?"
	if mi := minindex.From(ctx); mi > 0 {
		uri += sep + "min=" + strconv.FormatUint(mi, 10)
		sep = "&"
	}
	if c, ok := b.CRC.Value(); ok {
		uri += sep + "crc=" + fmt.Sprintf("%08x", c)
	}
	return uri
}

// queryCRC returns the "crc" query parameter of u. A malformed one counts
// as absent (the signature covers it, so it came from a peer, perhaps a
// newer one): the body is then checked against its SHA-256.
func queryCRC(u *url.URL) (cas.CRC, bool) {
	if u.RawQuery == "" {
		return cas.CRC{}, false
	}
	s := u.Query().Get("crc")
	if len(s) != 8 {
		return cas.CRC{}, false
	}
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil {
		return cas.CRC{}, false
	}
	return cas.CRCOf(uint32(v)), true
}

// checkBlob checks that data are blob h as a receiver does: when crc is
// set and the bytes came over an authenticated channel (node-to-node TLS,
// or the in-memory network), by their CRC32C against crc; otherwise by
// their SHA-256 against h. A mismatch is ErrCorrupt.
func checkBlob(h blob.Hash, data []byte, crc cas.CRC, authenticated bool) error {
	if want, ok := crc.Value(); ok && authenticated {
		if got := cas.CRC32C(data); got != want {
			return fmt.Errorf("%w: blob %s: bytes with CRC32C %08x, sent with %08x", ErrCorrupt, h, got, want)
		}
		return nil
	}
	if got := blob.Sum(data); got != h {
		return fmt.Errorf("%w: blob %s: got bytes of %s", ErrCorrupt, h, got)
	}
	return nil
}
