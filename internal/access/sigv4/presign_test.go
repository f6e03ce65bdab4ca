package sigv4

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestPresignMatchesSDK compares Presign's signature with the AWS SDK's
// for the same URL, time and expiry, and verifies the result.
func TestPresignMatchesSDK(t *testing.T) {
	at := signTime()
	for _, key := range trickyKeys() {
		for _, q := range []string{"", "versionId=a%2Bb", "response-content-type=text%2Fplain&x-id=GetObject"} {
			for _, method := range []string{http.MethodGet, http.MethodPut} {
				r := newKeyRequest(t, method, "s3.example.com:9000", key, q, nil)
				raw := r.URL.String()
				got, err := Presign(method, raw, testAKID, testSecret, testRegion, at, 90*time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				want := sdkPresign(t, r, testSecret, at, 90*time.Minute)
				if g, w := queryParam1(t, got, qSignature), queryParam1(t, want, qSignature); g != w {
					t.Fatalf("%s %s: signature %s, SDK %s\n got  %s\n want %s", method, raw, g, w, got, want)
				}
				v := newTestVerifier(t, at.Add(89*time.Minute))
				res, err := v.Verify(httptest.NewRequest(method, got, nil))
				if err != nil {
					t.Fatalf("%s %s: %v", method, got, err)
				}
				if !res.Presigned || !res.Expires.Equal(at.Add(90*time.Minute)) {
					t.Fatalf("result %+v", res)
				}
				v = newTestVerifier(t, at.Add(91*time.Minute))
				_, err = v.Verify(httptest.NewRequest(method, got, nil))
				wantErr(t, "expired", err, ErrAccessDenied)
			}
		}
	}
}

func queryParam1(t *testing.T, rawURL, name string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get(name)
}

// TestPresignServer sends presigned requests through a real client and
// server, with a default port that clients leave out of the Host header.
func TestPresignServer(t *testing.T) {
	v := newTestVerifier(t, signTime())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, err := v.Verify(r)
		if err == nil {
			var b *Body
			if b, err = res.Body(r); err == nil {
				var data []byte
				if data, err = io.ReadAll(b); err == nil {
					w.Write(data)
					return
				}
			}
		}
		http.Error(w, err.Error(), http.StatusForbidden)
	}))
	defer srv.Close()
	for _, key := range trickyKeys() {
		r := newKeyRequest(t, http.MethodPut, strings.TrimPrefix(srv.URL, "http://"), key, "", nil)
		u, err := Presign(http.MethodPut, r.URL.String(), testAKID, testSecret, testRegion, signTime(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodPut, u, strings.NewReader("payload"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != "payload" {
			t.Fatalf("key %q: %s %s", key, resp.Status, body)
		}
	}

	// The default port is dropped from the signed host and the URL.
	u, err := Presign(http.MethodGet, "https://s3.example.com:443/b/k", testAKID, testSecret, testRegion, signTime(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(u, "https://s3.example.com/b/k?") {
		t.Fatalf("URL %s kept the default port", u)
	}
	if _, err := v.Verify(httptest.NewRequest(http.MethodGet, u, nil)); err != nil {
		t.Fatal(err)
	}
	u, err = Presign(http.MethodGet, "http://[::1]:80/b/k", testAKID, testSecret, testRegion, signTime(), time.Minute)
	if err != nil || !strings.HasPrefix(u, "http://[::1]/b/k?") {
		t.Fatalf("IPv6 default port: %s, %v", u, err)
	}
}

func TestPresignErrors(t *testing.T) {
	at := signTime()
	for _, tc := range []struct {
		name                        string
		method, url, id, secret, rg string
		expires                     time.Duration
	}{
		{"relative", "GET", "/b/k", testAKID, testSecret, testRegion, time.Minute},
		{"no host", "GET", "http:///b/k", testAKID, testSecret, testRegion, time.Minute},
		{"userinfo", "GET", "http://u:p@h/b/k", testAKID, testSecret, testRegion, time.Minute},
		{"auth param present", "GET", "http://h/b/k?X-Amz-Signature=x", testAKID, testSecret, testRegion, time.Minute},
		{"empty method", "", "http://h/b/k", testAKID, testSecret, testRegion, time.Minute},
		{"empty id", "GET", "http://h/b/k", "", testSecret, testRegion, time.Minute},
		{"empty secret", "GET", "http://h/b/k", testAKID, "", testRegion, time.Minute},
		{"empty region", "GET", "http://h/b/k", testAKID, testSecret, "", time.Minute},
		{"expiry too short", "GET", "http://h/b/k", testAKID, testSecret, testRegion, time.Millisecond},
		{"expiry too long", "GET", "http://h/b/k", testAKID, testSecret, testRegion, 8 * 24 * time.Hour},
		{"bad url", "GET", "http://h/b/k%zz", testAKID, testSecret, testRegion, time.Minute},
	} {
		if _, err := Presign(tc.method, tc.url, tc.id, tc.secret, tc.rg, at, tc.expires); !errors.Is(err, ErrBadPresign) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
