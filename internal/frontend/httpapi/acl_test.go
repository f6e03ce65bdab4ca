package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/access/rules"
	"github.com/cairn-fs/cairn/internal/frontend/httpapi/fastpath"
	"github.com/cairn-fs/cairn/internal/store"
)

// TestNativeObjectACLsAndUploads: the native API (fast path and net/http)
// refuses an object made private by its S3 ACL in a public or
// authenticated-read bucket, and hides unfinished S3 uploads.
func TestNativeObjectACLsAndUploads(t *testing.T) {
	st := realStore(t)
	ctx := context.Background()
	must(t, st.CreateBucket(ctx, store.BucketInfo{Name: "auth", ACL: "authenticated-read"}))
	put := func(bucket, path string, x map[string][]byte) {
		_, _, err := st.Put(ctx, bucket, path, bytes.NewReader([]byte("secret")), store.PutOptions{Size: 6, Xattrs: x})
		must(t, err)
	}
	private := map[string][]byte{xattrS3ACL: []byte("private")}
	put("pub", "open.txt", nil)
	put("pub", "closed.txt", private)
	put("auth", "open.txt", nil)
	put("auth", "closed.txt", private)
	put("pub", uploadsDir+"/0123/upload.json", nil)

	auth, err := access.New(access.Config{AdminKey: testKey})
	must(t, err)
	g, _ := access.ParseGrant("other", access.DefaultActions)
	k, _ := access.NewKey("k", []access.Grant{g}, time.Now(), time.Time{})
	auth.SetKeys([]access.Key{k})
	for _, fast := range []bool{true, false} {
		base := realServer(t, st, func(c *Config) { c.Auth = auth; c.DisableFastPath = !fast }, nil)
		get := func(path, bearer string) int {
			req, err := http.NewRequest(http.MethodGet, "http://"+base+path, nil)
			must(t, err)
			if bearer != "" {
				req.Header.Set("Authorization", "Bearer "+bearer)
			}
			resp, err := http.DefaultClient.Do(req)
			must(t, err)
			resp.Body.Close()
			return resp.StatusCode
		}
		keyAuth := k.ID + ":" + k.Secret
		for _, tc := range []struct {
			path, bearer string
			want         int
		}{
			{"/pub/open.txt", "", 200},
			{"/pub/closed.txt", "", 401},
			{"/pub/closed.txt", testKey, 200},
			{"/auth/open.txt", keyAuth, 200},
			{"/auth/closed.txt", keyAuth, 403},
			{"/pub/" + uploadsDir + "/0123/upload.json", "", 404},
			{"/pub/" + uploadsDir + "/0123/upload.json", testKey, 200},
		} {
			if got := get(tc.path, tc.bearer); got != tc.want {
				t.Errorf("fast=%v GET %s (key %v): %d, want %d", fast, tc.path, tc.bearer != "", got, tc.want)
			}
		}
	}
}

// hostS3 is an S3 front end that claims nothing but names the bucket of
// virtual-hosted hosts.
type hostS3 struct{}

func (hostS3) ServeHTTP(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }
func (hostS3) Match(string, string, string, string) bool        { return false }
func (hostS3) Presigned(string, string, string, string) (access.Principal, bool) {
	return access.Principal{}, false
}
func (hostS3) HostBucket(host string) string {
	if strings.HasSuffix(host, ".s3.test") {
		return strings.TrimSuffix(host, ".s3.test")
	}
	return ""
}
func (hostS3) PlanSigned(*fastpath.Request, *fastpath.Plan) (store.Object, bool) {
	return nil, false
}

// TestRulesVirtualHost: a bucket rule applies to the bucket a virtual
// host names, not to the first segment of the path.
func TestRulesVirtualHost(t *testing.T) {
	st := realStore(t)
	eng, err := rules.New(rules.DefaultConfig())
	must(t, err)
	must(t, eng.Load([]rules.Rule{{ID: "r1", Bucket: "pub", PathPrefix: "private/", Deny: 451}}))
	for _, fast := range []bool{true, false} {
		base := realServer(t, st, func(c *Config) { c.Rules, c.S3, c.DisableFastPath = eng, hostS3{}, !fast }, nil)
		for _, tc := range []struct {
			host, path string
			want       int
		}{
			{"", "/pub/private/a", 451},
			{"pub.s3.test", "/private/a", 451},
			{"pub.s3.test", "/other", 404},
		} {
			req, err := http.NewRequest(http.MethodGet, "http://"+base+tc.path, nil)
			must(t, err)
			if tc.host != "" {
				req.Host = tc.host
			}
			resp, err := http.DefaultClient.Do(req)
			must(t, err)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("fast=%v %s%s: %d, want %d", fast, tc.host, tc.path, resp.StatusCode, tc.want)
			}
		}
	}
}
