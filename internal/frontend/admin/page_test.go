package admin

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func TestUIHandlerServesWithCSP(t *testing.T) {
	h := UIHandler()
	for _, tc := range []struct {
		path, ctype string
		status      int
	}{
		{"/_cairn/ui", "text/html", 200},
		{"/_cairn/ui/", "text/html", 200},
		{"/_cairn/ui/app.js", "text/javascript", 200},
		{"/_cairn/ui/style.css", "text/css", 200},
		{"/_cairn/ui/nope.js", "", 404},
		{"/_cairn/ui/../ui.go", "", 404},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", tc.path, nil))
		if rec.Code != tc.status {
			t.Errorf("%s: status %d, want %d", tc.path, rec.Code, tc.status)
		}
		if csp := rec.Header().Get("Content-Security-Policy"); csp != ContentSecurityPolicy {
			t.Errorf("%s: CSP %q", tc.path, csp)
		}
		if tc.status == 200 && !strings.HasPrefix(rec.Header().Get("Content-Type"), tc.ctype) {
			t.Errorf("%s: Content-Type %q", tc.path, rec.Header().Get("Content-Type"))
		}
		if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", tc.path)
		}
	}
	for _, must := range []string{"default-src 'none'", "script-src 'self'", "form-action 'none'", "frame-ancestors 'none'"} {
		if !strings.Contains(ContentSecurityPolicy, must) {
			t.Errorf("CSP lacks %s", must)
		}
	}
	if strings.Contains(ContentSecurityPolicy, "unsafe-") {
		t.Error("the CSP allows unsafe-inline or unsafe-eval")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/_cairn/ui", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", rec.Code)
	}
}

// TestUIFilesSelfContained: the embedded page loads nothing from elsewhere
// (no CDN, no web fonts), has no inline script or style for the CSP to
// block, and never puts the key in a URL.
func TestUIFilesSelfContained(t *testing.T) {
	files := UIFiles()
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|@import|url\(`)
	n := 0
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		b, err := fs.ReadFile(files, p)
		if err != nil {
			return err
		}
		s := string(b)
		if m := external.FindString(s); m != "" {
			t.Errorf("%s refers to an external resource: %q", p, m)
		}
		if strings.HasSuffix(p, ".html") {
			if regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`).MatchString(s) || strings.Contains(s, "<style") ||
				regexp.MustCompile(`\son[a-z]+=`).MatchString(s) || strings.Contains(s, "style=") {
				t.Errorf("%s has inline script or style (blocked by the CSP)", p)
			}
		}
		if strings.HasSuffix(p, ".js") && regexp.MustCompile(`[?&](key|token|auth)=`).MatchString(s) {
			t.Errorf("%s builds a URL with a key parameter", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 3 {
		t.Errorf("embedded %d files, want index.html, app.js and style.css", n)
	}
}
