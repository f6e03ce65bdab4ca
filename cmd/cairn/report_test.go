package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFileCommandsReport: put, get and rm say on stdout what they did, one
// line each, and nothing with -q; get to stdout prints only the content.
func TestFileCommandsReport(t *testing.T) {
	srv := newFakeServer(t)
	cliMustRun(t, srv, "bucket", "create", "site")
	dir := t.TempDir()
	local := filepath.Join(dir, "README.md")
	if err := os.WriteFile(local, []byte("# hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("output %q, want %q", got, want)
		}
	}
	out := cliMustRun(t, srv, "put", local, "site/docs/")
	if !strings.HasPrefix(out, "uploaded "+local+" -> site/docs/README.md (8 bytes, etag ") {
		t.Errorf("put output %q", out)
	}
	check(cliMustRun(t, srv, "put", "-q", local, "site/Makefile"), "")

	dest := filepath.Join(dir, "readme.md")
	check(cliMustRun(t, srv, "get", "site/docs/README.md", dest), "downloaded site/docs/README.md -> "+dest+" (8 bytes)\n")
	check(cliMustRun(t, srv, "get", "site/docs/README.md", dir), "downloaded site/docs/README.md -> "+local+" (8 bytes)\n")
	check(cliMustRun(t, srv, "get", "--quiet", "site/docs/README.md", dest), "")
	check(cliMustRun(t, srv, "get", "site/docs/README.md", "-"), "# hello\n")

	check(cliMustRun(t, srv, "rm", "site/Makefile"), "removed site/Makefile\n")
	cliMustRun(t, srv, "put", "-q", local, "site/a")
	check(cliMustRun(t, srv, "rm", "-q", "site/a"), "")
	check(cliMustRun(t, srv, "rm", "-r", "site/docs"), "site/docs: deleted 1 files, 1 directories\n")
}
