// Package e2e runs the real cairn binary on loopback with real clients. It
// proves the wiring; the package tests prove correctness.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

var cairnBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cairn-e2e-bin")
	if err != nil {
		panic(err)
	}
	cairnBin = filepath.Join(dir, "cairn")
	build := exec.Command("go", "build", "-o", cairnBin, "github.com/cairn-fs/cairn/cmd/cairn")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build cairn:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const adminKey = "e2e-admin-key-0123456789"

type server struct {
	t    *testing.T
	dir  string
	addr string
	url  string
	cmd  *exec.Cmd
	logs *bytes.Buffer
}

// freeAddr returns a free loopback address for a server to listen on. The
// port is below Linux's ephemeral range (32768-60999), so no outgoing
// connection of another test takes it between this check and the server's
// bind (that happened with ports the kernel picked: "address already in
// use"). Each port is handed out once per test binary.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 1000 {
		p := 20000 + int(portSeq.Add(1)*7919%12000)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ln.Close()
		return ln.Addr().String()
	}
	t.Fatal("no free port in 20000-31999")
	return ""
}

// portSeq numbers the ports freeAddr hands out (a stride through the
// range, starting at a per-process offset).
var portSeq = func() *atomic.Int64 {
	var v atomic.Int64
	v.Store(int64(os.Getpid()))
	return &v
}()

func startServer(t *testing.T, dir, addr string, extra ...string) *server {
	t.Helper()
	s := &server{t: t, dir: dir, addr: addr, url: "http://" + addr, logs: &bytes.Buffer{}}
	args := append([]string{"server", "--data", dir, "--listen", addr, "--access-log", filepath.Join(dir, "access.log")}, extra...)
	s.cmd = exec.Command(cairnBin, args...)
	s.cmd.Env = append(os.Environ(), "CAIRN_ADMIN_KEY="+adminKey)
	s.cmd.Stdout = s.logs
	s.cmd.Stderr = s.logs
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.url + "/_cairn/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			s.cmd.Process.Kill()
			t.Fatalf("server did not become healthy: %v\n%s", err, s.logs)
		}
		time.Sleep(50 * time.Millisecond) // polling a process we do not control
	}
	t.Cleanup(func() { s.stop() })
	return s
}

func (s *server) stop() {
	if s.cmd.ProcessState == nil {
		s.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			s.cmd.Process.Kill()
			<-done
		}
	}
}

func (s *server) kill() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	s.cmd.Wait()
}

func (s *server) cli(args ...string) (string, error) {
	cmd := exec.Command(cairnBin, args...)
	cmd.Env = append(os.Environ(), "CAIRN_ADMIN_KEY="+adminKey, "CAIRN_SERVER="+s.url)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

var httpc = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 120 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func do(t *testing.T, method, url string, body []byte, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := httpc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, url, err)
	}
	return resp, b
}

func auth() []string { return []string{"Authorization", "Bearer " + adminKey} }

func expect(t *testing.T, resp *http.Response, body []byte, status int) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d: %s", resp.Request.Method, resp.Request.URL, resp.StatusCode, status, body)
	}
}

func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = strings.ReplaceAll(url.PathEscape(s), "+", "%2B")
	}
	return strings.Join(parts, "/")
}

// randomSize returns sizes from 0 B to maxSize, most of them small.
func randomSize(rng *rand.Rand, maxSize int) int {
	switch r := rng.Float64(); {
	case r < 0.05:
		return 0
	case r < 0.75:
		return rng.Intn(64 << 10)
	case r < 0.95:
		return rng.Intn(2 << 20)
	default:
		return rng.Intn(maxSize + 1)
	}
}

var names = []string{"index.html", "photo.jpg", "ünïcödé.txt", "日本語.txt", "with space.bin", "emoji-🪨.dat", "a+b=c.css", "semi;colon.js", "percent%41.txt"}

func TestEndToEnd(t *testing.T) { runEndToEnd(t) }

// TestEndToEndNetHTTP runs the same checks with every request served by
// net/http (the GET fast path off), so both paths are proven on the binary.
func TestEndToEndNetHTTP(t *testing.T) { runEndToEnd(t, "--disable-fast-path") }

func runEndToEnd(t *testing.T, extra ...string) {
	dir := t.TempDir()
	s := startServer(t, dir, freeAddr(t), extra...)

	// Buckets through the CLI.
	if out, err := s.cli("bucket", "create", "pub", "--public", "--checksum-sidecars"); err != nil {
		t.Fatalf("bucket create: %v\n%s", err, out)
	}
	if out, err := s.cli("bucket", "create", "priv"); err != nil {
		t.Fatalf("bucket create: %v\n%s", err, out)
	}
	if out, err := s.cli("bucket", "create", "Bad_Name"); err == nil {
		t.Fatalf("bucket with a bad name accepted: %s", out)
	}
	if out, err := s.cli("bucket", "create", "mirrored", "--replicas", "mirror"); err != nil || !strings.Contains(out, "replicas=mirror") {
		t.Fatalf("bucket create --replicas mirror: %v\n%s", err, out)
	}
	if out, err := s.cli("bucket", "set", "mirrored", "replicas=3", "write-quorum=5"); err == nil {
		t.Fatalf("write quorum above replicas accepted: %s", out)
	}
	if out, err := s.cli("bucket", "set", "mirrored", "replicas=3", "write-quorum=2"); err != nil || !strings.Contains(out, "replicas=3 write-quorum=2") {
		t.Fatalf("bucket set replicas: %v\n%s", err, out)
	}
	out, err := s.cli("bucket", "list")
	if err != nil || !strings.Contains(out, "pub") || !strings.Contains(out, "priv") {
		t.Fatalf("bucket list: %v\n%s", err, out)
	}

	// A few hundred files of random sizes, nested paths, Unicode names.
	rng := rand.New(rand.NewSource(42))
	nfiles := 300
	maxSize := 20 << 20
	if testing.Short() {
		nfiles, maxSize = 80, 5<<20
	}
	files := map[string][]byte{}
	for i := 0; i < nfiles; i++ {
		depth := rng.Intn(4)
		var p []string
		for d := 0; d < depth; d++ {
			p = append(p, fmt.Sprintf("d%d", rng.Intn(5)))
		}
		p = append(p, fmt.Sprintf("%03d-%s", i, names[rng.Intn(len(names))]))
		data := make([]byte, randomSize(rng, maxSize))
		rng.Read(data)
		files[strings.Join(p, "/")] = data
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	errs := make(chan error, len(files))
	for p, data := range files {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			req, _ := http.NewRequest("PUT", s.url+"/pub/"+escapePath(p), bytes.NewReader(data))
			req.Header.Set("Authorization", "Bearer "+adminKey)
			resp, err := httpc.Do(req)
			if err != nil {
				errs <- err
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 201 {
				errs <- fmt.Errorf("PUT %s: %d", p, resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Read back byte for byte, with headers.
	for p, data := range files {
		resp, body := do(t, "GET", s.url+"/pub/"+escapePath(p), nil)
		expect(t, resp, body, 200)
		if !bytes.Equal(body, data) {
			t.Fatalf("GET %s: content differs (%d vs %d bytes)", p, len(body), len(data))
		}
		sum := sha256.Sum256(data)
		if got := resp.Header.Get("Repr-Digest"); !strings.Contains(got, "sha-256=:") {
			t.Fatalf("GET %s: Repr-Digest %q", p, got)
		}
		if resp.Header.Get("ETag") == "" || resp.Header.Get("Last-Modified") == "" || resp.Header.Get("Accept-Ranges") != "bytes" {
			t.Fatalf("GET %s: missing headers %v", p, resp.Header)
		}
		_ = sum
	}

	// Pick one big-ish file for ranges and conditionals.
	var bigPath string
	for p, d := range files {
		if len(d) > 100_000 && (bigPath == "" || p < bigPath) {
			bigPath = p
		}
	}
	big := files[bigPath]
	u := s.url + "/pub/" + escapePath(bigPath)
	resp, body := do(t, "GET", u, nil, "Range", "bytes=10-99")
	expect(t, resp, body, 206)
	if !bytes.Equal(body, big[10:100]) || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 10-99/%d", len(big)) {
		t.Fatalf("range: %q %v", resp.Header.Get("Content-Range"), len(body))
	}
	resp, body = do(t, "GET", u, nil, "Range", "bytes=-50")
	expect(t, resp, body, 206)
	if !bytes.Equal(body, big[len(big)-50:]) {
		t.Fatal("suffix range differs")
	}
	resp, body = do(t, "GET", u, nil, "Range", fmt.Sprintf("bytes=%d-", len(big)+10))
	expect(t, resp, body, 416)
	etag := resp.Header.Get("ETag")
	resp, body = do(t, "HEAD", u, nil)
	expect(t, resp, body, 200)
	etag = resp.Header.Get("ETag")
	if resp.ContentLength != int64(len(big)) || len(body) != 0 {
		t.Fatalf("HEAD: length %d body %d", resp.ContentLength, len(body))
	}
	resp, body = do(t, "GET", u, nil, "If-None-Match", etag)
	expect(t, resp, body, 304)
	resp, body = do(t, "GET", u, nil, "If-Modified-Since", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
	expect(t, resp, body, 304)
	resp, body = do(t, "GET", u, nil, "If-Match", `"nope"`)
	expect(t, resp, body, 412)

	// Checksum sidecars.
	resp, body = do(t, "GET", u+".sha256", nil)
	expect(t, resp, body, 200)
	sum := sha256.Sum256(big)
	base := bigPath[strings.LastIndex(bigPath, "/")+1:]
	if string(body) != hex.EncodeToString(sum[:])+"  "+base+"\n" {
		t.Fatalf("sidecar: %q", body)
	}

	// Listing.
	resp, body = do(t, "GET", s.url+"/pub/?recursive=1&limit=10000", nil, "Accept", "application/json")
	expect(t, resp, body, 200)
	var lr struct {
		Entries []struct {
			Path string `json:"path"`
			Size int64  `json:"size"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(body, &lr); err != nil {
		t.Fatal(err)
	}
	if len(lr.Entries) != len(files) {
		t.Fatalf("recursive listing: %d entries, want %d", len(lr.Entries), len(files))
	}
	for i, e := range lr.Entries {
		if i > 0 && lr.Entries[i-1].Path >= e.Path {
			t.Fatalf("listing not in S3 order: %q before %q", lr.Entries[i-1].Path, e.Path)
		}
		if int64(len(files[e.Path])) != e.Size {
			t.Fatalf("listing: %s size %d", e.Path, e.Size)
		}
	}
	resp, body = do(t, "GET", s.url+"/pub/", nil)
	expect(t, resp, body, 200)
	if !strings.Contains(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("HTML listing content type %q", resp.Header.Get("Content-Type"))
	}

	// Auth refusals.
	resp, body = do(t, "PUT", s.url+"/pub/noauth.txt", []byte("x"))
	expect(t, resp, body, 401)
	resp, body = do(t, "PUT", s.url+"/pub/badauth.txt", []byte("x"), "Authorization", "Bearer wrong")
	expect(t, resp, body, 403)
	resp, body = do(t, "PUT", s.url+"/priv/secret.txt", []byte("secret"), auth()...)
	expect(t, resp, body, 201)
	resp, body = do(t, "GET", s.url+"/priv/secret.txt", nil)
	expect(t, resp, body, 401)
	resp, body = do(t, "GET", s.url+"/priv/secret.txt", nil, auth()...)
	expect(t, resp, body, 200)

	// Bad paths: 4xx and nothing stored.
	for _, raw := range []string{"/pub/a/../b", "/pub/a//b", "/pub/%00x", "/pub/%ff%fe", "/pub/" + strings.Repeat("n", 256), "/pub/" + strings.Repeat("d/", 2100) + "f"} {
		status := rawRequest(t, s.addr, "PUT", raw, "x")
		if status < 400 || status >= 500 {
			t.Fatalf("PUT %.60s: status %d, want 4xx", raw, status)
		}
	}
	// Body shorter than its Content-Length: nothing visible.
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "PUT /pub/short.bin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 1000\r\n\r\nonly a few bytes", adminKey)
	conn.(*net.TCPConn).CloseWrite()
	io.Copy(io.Discard, conn)
	conn.Close()
	resp, body = do(t, "HEAD", s.url+"/pub/short.bin", nil)
	expect(t, resp, body, 404)

	// Deletes.
	resp, body = do(t, "DELETE", u, nil, auth()...)
	expect(t, resp, body, 204)
	resp, body = do(t, "GET", u, nil)
	expect(t, resp, body, 404)
	delete(files, bigPath)

	// Metrics: requests by method and status, fsync latency, node gauges.
	resp, body = do(t, "GET", s.url+"/_cairn/metrics", nil)
	expect(t, resp, body, 200)
	for _, want := range []string{`cairn_http_requests_total{code="201",method="PUT"}`, "cairn_fsync_duration_seconds_count",
		"cairn_http_request_duration_seconds_bucket", "cairn_node_blobs", "cairn_node_volumes", "cairn_node_disk_free_bytes"} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("metrics lack %s", want)
		}
	}
	if strings.Contains(string(body), "cairn_fsync_duration_seconds_count 0\n") {
		t.Fatal("no fsync observed after writes")
	}

	// The access log is written in the combined format.
	s.stop()
	alog, err := os.ReadFile(filepath.Join(dir, "access.log"))
	if err != nil || !strings.Contains(string(alog), `"GET /pub/`) {
		t.Fatalf("access log: %v %.200s", err, alog)
	}

	// Restart on the same data: everything still there.
	s2 := startServer(t, dir, s.addr, extra...)
	for p, data := range files {
		resp, body := do(t, "GET", s2.url+"/pub/"+escapePath(p), nil)
		expect(t, resp, body, 200)
		if !bytes.Equal(body, data) {
			t.Fatalf("after restart GET %s differs", p)
		}
	}
}

func rawRequest(t *testing.T, addr, method, path, body string) int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", method, path, adminKey, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %.60s: %v", method, path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestCrashDuringWrites SIGKILLs the server in the middle of a write loop,
// three times, and checks after each restart that every acknowledged write
// is intact: each path holds its last acknowledged version, or the version
// that was in flight when the server died — never an older one, never a
// partial file.
func TestCrashDuringWrites(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	s := startServer(t, dir, addr)
	resp, body := do(t, "POST", s.url+"/_cairn/buckets", []byte(`{"name":"crash","public":true}`), auth()...)
	expect(t, resp, body, 201)

	var mu sync.Mutex
	acked := map[string][32]byte{}
	inflight := map[string][32]byte{}
	for cycle := 0; cycle < 3; cycle++ {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		var wg sync.WaitGroup
		killAt := 100 + 100*cycle
		var reached sync.WaitGroup
		reached.Add(1)
		var once sync.Once
		n := 0
		for w := 0; w < 6; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewSource(int64(cycle*100 + w)))
				for i := 0; i < 5000 && ctx.Err() == nil; i++ {
					// Overwrite paths so replaced files are checked too;
					// a few files span several blobs.
					p := fmt.Sprintf("w%d/f%d", w, rng.Intn(200))
					size := rng.Intn(300 << 10)
					if rng.Intn(30) == 0 {
						size = 4<<20 + rng.Intn(6<<20)
					}
					data := make([]byte, size)
					rng.Read(data)
					sum := sha256.Sum256(data)
					mu.Lock()
					inflight[p] = sum
					mu.Unlock()
					req, _ := http.NewRequestWithContext(ctx, "PUT", s.url+"/crash/"+p, bytes.NewReader(data))
					req.Header.Set("Authorization", "Bearer "+adminKey)
					resp, err := httpc.Do(req)
					if err != nil {
						return // the server is gone; p stays in flight
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					mu.Lock()
					delete(inflight, p)
					if resp.StatusCode == 200 || resp.StatusCode == 201 {
						acked[p] = sum
						n++
						if n >= killAt {
							once.Do(reached.Done)
						}
					}
					mu.Unlock()
				}
				once.Do(reached.Done)
			}()
		}
		reached.Wait()
		s.kill()
		cancel()
		wg.Wait()
		if n < killAt {
			t.Fatalf("cycle %d: only %d writes acknowledged before the kill", cycle, n)
		}

		s = startServer(t, dir, addr)
		bad := 0
		for p, sum := range acked {
			resp, body := do(t, "GET", s.url+"/crash/"+p, nil)
			if resp.StatusCode != 200 {
				t.Errorf("cycle %d: acknowledged %s: status %d after crash", cycle, p, resp.StatusCode)
				bad++
				continue
			}
			got := sha256.Sum256(body)
			if got == sum {
				continue
			}
			if alt, ok := inflight[p]; ok && alt == got {
				acked[p] = got // the in-flight write landed; it is now the version to keep
				continue
			}
			t.Errorf("cycle %d: %s holds neither its acknowledged nor its in-flight version", cycle, p)
			bad++
		}
		if bad > 0 {
			t.Fatalf("cycle %d: %d acknowledged writes lost", cycle, bad)
		}
		clear(inflight)
	}
	// The restarted server takes writes.
	resp, body = do(t, "PUT", s.url+"/crash/after", []byte("ok"), auth()...)
	expect(t, resp, body, 201)
}
