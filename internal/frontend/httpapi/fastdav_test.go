package httpapi

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/frontend/httpapi/fastpath"
	"github.com/cairn-fs/cairn/internal/store"
)

// davMarker is a WebDAV handler that answers every request with a status
// of its own, so that a test sees who answered.
type davMarker struct{}

func (davMarker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header()["Content-Length"] = []string{"4"}
	w.WriteHeader(299)
	_, _ = io.WriteString(w, "dav\n")
}

// agentS3 is an S3 front end that claims the requests of an S3 tool's
// User-Agent ("rclone/"), and answers them with a status of its own.
type agentS3 struct{}

func (agentS3) ServeHTTP(w http.ResponseWriter, r *http.Request) { w.WriteHeader(298) }
func (agentS3) Match(_, _, _, ua string) bool                    { return strings.HasPrefix(ua, "rclone/") }
func (agentS3) Presigned(string, string, string, string) (access.Principal, bool) {
	return access.Principal{}, false
}
func (agentS3) HostBucket(string) string { return "" }
func (agentS3) PlanSigned(*fastpath.Request, *fastpath.Plan) (store.Object, bool) {
	return nil, false
}

// TestFastDAV: the fast path answers a WebDAV GET or HEAD of a file as the
// native one, and hands everything else about WebDAV to the WebDAV
// handler: directories, errors, preconditions, and requests S3's Match
// claims (rclone's WebDAV backend sends an S3 tool's User-Agent), which
// the front door gives to WebDAV first.
func TestFastDAV(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.DAV, c.S3 = davMarker{}, agentS3{} })
	e.put("/pub/f.txt", "hello world")
	addr := serveReal(t, e)
	for _, tc := range []struct {
		name, raw string
		status    int
		fast      bool
	}{
		{"file", "GET /_dav/pub/f.txt HTTP/1.1\r\nHost: x\r\n\r\n", 200, true},
		{"head file", "HEAD /_dav/pub/f.txt HTTP/1.1\r\nHost: x\r\n\r\n", 200, true},
		{"range", "GET /_dav/pub/f.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1\r\n\r\n", 206, true},
		{"directory", "GET /_dav/pub/ HTTP/1.1\r\nHost: x\r\n\r\n", 299, false},
		{"root", "GET /_dav/ HTTP/1.1\r\nHost: x\r\n\r\n", 299, false},
		{"missing", "GET /_dav/pub/nope HTTP/1.1\r\nHost: x\r\n\r\n", 299, false},
		{"precondition", "GET /_dav/pub/f.txt HTTP/1.1\r\nHost: x\r\nIf-Match: \"x\"\r\n\r\n", 299, false},
		{"not modified", "GET /_dav/pub/f.txt HTTP/1.1\r\nHost: x\r\nIf-None-Match: *\r\n\r\n", 299, false},
		{"consistent", "GET /_dav/pub/f.txt?consistent=1 HTTP/1.1\r\nHost: x\r\n\r\n", 299, false},
		{"an S3 tool's agent", "GET /_dav/pub/f.txt HTTP/1.1\r\nHost: x\r\nUser-Agent: rclone/v1.68\r\n\r\n", 299, false},
		{"S3, not WebDAV", "GET /pub/f.txt HTTP/1.1\r\nHost: x\r\nUser-Agent: rclone/v1.68\r\n\r\n", 298, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.s.fast.Counts()
			c := dial(t, addr)
			_, err := io.WriteString(c, tc.raw)
			must(t, err)
			method, _, _ := strings.Cut(tc.raw, " ")
			resp, _ := readResp(t, bufio.NewReader(c), method)
			c.Close()
			after := e.s.fast.Counts()
			if resp.StatusCode != tc.status || (after.Served-before.Served == 1) != tc.fast ||
				(after.HandedOff-before.HandedOff == 1) == tc.fast {
				t.Errorf("status %d, fast path answered %d, handed off %d; want %d, fast=%v",
					resp.StatusCode, after.Served-before.Served, after.HandedOff-before.HandedOff, tc.status, tc.fast)
			}
		})
	}
}
