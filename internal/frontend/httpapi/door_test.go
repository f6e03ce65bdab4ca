package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/frontend/httpapi/fastpath"
	"github.com/cairn-fs/cairn/internal/store"
)

// queryS3 is an S3Handler that, like the S3 front end, takes a request
// signed with SigV4 or with an S3 query key (here only prefix=).
type queryS3 struct{ http.Handler }

func (queryS3) Match(host, authorization, rawQuery, userAgent string) bool {
	return strings.HasPrefix(authorization, "AWS4-HMAC-SHA256") || strings.HasPrefix(rawQuery, "prefix=")
}
func (queryS3) Presigned(method, host, path, rawQuery string) (access.Principal, bool) {
	return access.Principal{}, false
}
func (queryS3) HostBucket(string) string { return "" }
func (queryS3) PlanSigned(*fastpath.Request, *fastpath.Plan) (store.Object, bool) {
	return nil, false
}

// TestFrontDoorNodeQuery: an S3 query key sends a bucket's request to S3,
// not a node endpoint's (GET /_cairn/trash/B?prefix=P is the admin API);
// a signature still does.
func TestFrontDoorNodeQuery(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.S3 = queryS3{http.NotFoundHandler()} })
	for _, tc := range []struct {
		path, query, auth string
		want              door
	}{
		{"/web/dir/", "prefix=a", "", doorS3},
		{"/_cairn/trash/web", "prefix=a", "", doorNode},
		{"/_cairn", "prefix=a", "", doorNode},
		{"/_cairn/trash/web", "prefix=a", "AWS4-HMAC-SHA256 Credential=x", doorS3},
		{"/web/dir/", "", "", doorNative},
	} {
		if got, _ := e.s.frontDoor(&entrance{path: tc.path, rawQuery: tc.query, authorization: tc.auth, hasAuthorization: tc.auth != ""}); got != tc.want {
			t.Errorf("%s?%s (auth %q): door %d, want %d", tc.path, tc.query, tc.auth, got, tc.want)
		}
	}
}
