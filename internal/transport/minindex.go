package transport

import (
	"context"
	"net/http"
	"strconv"

	"github.com/cairn-fs/cairn/internal/minindex"
)

// A blob write may carry a minimum applied index (internal/minindex): the
// receiving node must have applied the namespace log at least that far
// before it stores the blob. Over HTTP it travels as the signed query
// parameter "min" of PutBlob, PutBlobs and HasBlobs; in memory, in the
// context.

// withMinIndexQuery appends ctx's minimum applied index to uri.
func withMinIndexQuery(ctx context.Context, uri string) string {
	if mi := minindex.From(ctx); mi > 0 {
		return uri + "?min=" + strconv.FormatUint(mi, 10)
	}
	return uri
}

// minIndexContext returns r's context carrying the request's "min" query
// parameter; a malformed value is ignored (the signature covers it, so it
// came from a peer: a newer one, perhaps).
func minIndexContext(r *http.Request) context.Context {
	ctx := r.Context()
	if r.URL.RawQuery == "" {
		return ctx
	}
	if v, err := strconv.ParseUint(r.URL.Query().Get("min"), 10, 64); err == nil {
		return minindex.With(ctx, v)
	}
	return ctx
}
