package transport

import (
	"context"
	"net/http"
	"strconv"
)

// A blob write may carry a minimum applied index: the receiving node must
// have applied the namespace log at least that far before it stores the
// blob. The uploader sets it to the index its upload started from, so any
// reap the upload saw is applied on the receiver (and its deletion queued
// there) before the receiver decides that a copy it already holds will do
// (see store.Local.GuardReplicaPut). A repair hand-off confirms copies with
// HasBlobs under the same rule. Over HTTP it travels as the signed query
// parameter "min" of PutBlob, PutBlobs and HasBlobs; in memory, in the
// context.

type minIndexKey struct{}

// WithMinIndex returns ctx carrying index as the minimum applied index of
// the blob writes made with it (0: none).
func WithMinIndex(ctx context.Context, index uint64) context.Context {
	if index == 0 {
		return ctx
	}
	return context.WithValue(ctx, minIndexKey{}, index)
}

// MinIndex returns the minimum applied index ctx carries, or 0.
func MinIndex(ctx context.Context) uint64 {
	v, _ := ctx.Value(minIndexKey{}).(uint64)
	return v
}

// withMinIndexQuery appends ctx's minimum applied index to uri.
func withMinIndexQuery(ctx context.Context, uri string) string {
	if mi := MinIndex(ctx); mi > 0 {
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
		return WithMinIndex(ctx, v)
	}
	return ctx
}
