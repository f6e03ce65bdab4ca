package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/cairn-fs/cairn/internal/store"
)

// A file whose body cannot be read (its blob has no reachable replica),
// small or large, is answered 503 on both paths, never 200 with a cut
// body, and the connection stays usable.
func TestUnreadableSmallBodyIsAnError(t *testing.T) {
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.DisableFastPath = !fast })
			e.put("/pub/ok.txt", "fine")
			e.put("/pub/gone.txt", strings.Repeat("x", 5000))
			e.put("/pub/gone.bin", strings.Repeat("y", 300<<10)) // past fastpath.MaxBody
			e.fs.mu.Lock()
			e.fs.files["pub"]["gone.txt"].readErr = fmt.Errorf("%w: blob has no replica", store.ErrUnavailable)
			e.fs.files["pub"]["gone.bin"].readErr = fmt.Errorf("%w: blob has no replica", store.ErrUnavailable)
			e.fs.mu.Unlock()
			addr := serveReal(t, e)
			c := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
			defer c.CloseIdleConnections()
			get := func(path string) (int, string) {
				t.Helper()
				resp, err := c.Get("http://" + addr + path)
				if err != nil {
					t.Fatalf("GET %s: %v", path, err)
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatalf("GET %s: status %d then body error %v (a cut body)", path, resp.StatusCode, err)
				}
				return resp.StatusCode, string(b)
			}
			for _, p := range []string{"/pub/gone.txt", "/pub/gone.bin"} {
				if code, body := get(p); code != http.StatusServiceUnavailable || !strings.Contains(body, "Unavailable") {
					t.Fatalf("unreadable file %s: %d %q, want 503 Unavailable", p, code, body)
				}
			}
			if code, body := get("/pub/ok.txt"); code != 200 || body != "fine" {
				t.Fatalf("next request: %d %q", code, body)
			}
		})
	}
}
