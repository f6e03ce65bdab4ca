package admin

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
)

// UIPath is where the node serves the admin page: UIPath and UIPath+"/"
// answer index.html, UIPath+"/NAME" the other files of ui/.
const UIPath = "/_cairn/ui"

//go:embed ui
var uiFiles embed.FS

// ContentSecurityPolicy is sent with every file of the page: only the
// page's own scripts and styles, fetches to its own origin, no frames, no
// form submission (the login form is handled by script, so a key can
// never end up in a URL even with scripts off), no base-URI changes.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// UIFiles returns the embedded files of the page (rooted at ui/).
func UIFiles() fs.FS {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return sub
}

// UIHandler serves the embedded page under UIPath without authentication:
// the page holds no data, every data call it makes needs the admin key.
// GET and HEAD only. Each answer carries ContentSecurityPolicy and
// Cache-Control: no-cache (revalidate, so a node upgrade shows at once).
func UIHandler() http.Handler {
	files := UIFiles()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr := w.Header()
		setSecurityHeaders(hdr)
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			hdr.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, UIPath), "/")
		if name == "" {
			name = "index.html"
		}
		if strings.Contains(name, "/") || strings.HasPrefix(name, ".") {
			http.NotFound(w, r)
			return
		}
		b, err := fs.ReadFile(files, name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		hdr.Set("Content-Type", contentType(name))
		hdr.Set("Cache-Control", "no-cache")
		hdr.Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			_, _ = w.Write(b)
		}
	})
}

// setSecurityHeaders sets the headers every answer of the page carries.
func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	return "application/octet-stream"
}
