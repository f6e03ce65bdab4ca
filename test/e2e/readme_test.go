package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The README's commands are run as written, so that a README change that
// no longer works breaks a test. Each tested block is the ```sh block
// after a line "<!-- readme_test: NAME ... -->" in README.md. Only what
// cannot run unchanged on a test machine is substituted (readmeScript
// fails if a substituted text is no longer in the block):
//
//   - bin/cairn becomes the binary this test built (TestMain), so the
//     tree under test is what runs, not a stale bin/;
//   - the fixed ports 8080, 8081, 8082 become free ones;
//   - absolute paths (/etc/cairn, /var/lib/cairn, /var/log/cairn,
//     /tmp/readme.md) and the dev cluster's data/ move under a temporary
//     directory; /var/log/cairn is not created first, as on a fresh
//     machine;
//   - the block runs under bash with errexit, nounset and pipefail, and
//     curl is wrapped to fail on an HTTP error status (-f) and to retry a
//     few times, since a read through another node may come a moment
//     before that node has applied the write (a person typing never sees
//     that window).
//
// The blocks run from the repository root, as the README assumes.

// readmeBlock returns the command block of README.md marked NAME.
func readmeBlock(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- readme_test: " + regexp.QuoteMeta(name) + "[ -][^\n]*\n```sh\n(.*?)```")
	m := re.FindSubmatch(b)
	if m == nil {
		t.Fatalf("README.md has no ```sh block after <!-- readme_test: %s -->", name)
	}
	return string(m[1])
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// readmeScript applies the substitutions (old, new pairs) to block, each
// of which must occur in it, and adds the strict shell preamble.
func readmeScript(t *testing.T, block string, subst ...string) string {
	t.Helper()
	for i := 0; i < len(subst); i += 2 {
		if !strings.Contains(block, subst[i]) {
			t.Fatalf("the README block no longer contains %q; update the substitutions in readme_test.go:\n%s", subst[i], block)
		}
	}
	return "set -euo pipefail\n" +
		`curl() { command curl -fsS --retry 10 --retry-all-errors --retry-delay 1 "$@"; }` + "\n" +
		strings.NewReplacer(subst...).Replace(block)
}

// freePortBlock returns a port P such that P..P+n-1 (TCP) and their
// gossip ports P+100.. (TCP and UDP) can be bound now.
func freePortBlock(t *testing.T, n int) int {
	t.Helper()
	for try := 0; try < 100; try++ {
		_, ps, _ := net.SplitHostPort(freeAddr(t))
		p, _ := strconv.Atoi(ps)
		if p+100+n > 65535 {
			continue
		}
		ok := true
		var closers []func() error
		for i := 0; i < n && ok; i++ {
			for _, a := range []struct {
				network string
				port    int
			}{{"tcp", p + i}, {"tcp", p + 100 + i}, {"udp", p + 100 + i}} {
				addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(a.port))
				if a.network == "udp" {
					c, err := net.ListenPacket("udp", addr)
					if ok = err == nil; !ok {
						break
					}
					closers = append(closers, c.Close)
				} else {
					l, err := net.Listen("tcp", addr)
					if ok = err == nil; !ok {
						break
					}
					closers = append(closers, l.Close)
				}
			}
		}
		for _, c := range closers {
			c()
		}
		if ok {
			return p
		}
	}
	t.Fatal("no block of free ports")
	return 0
}

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startScript runs script under bash in its own process group from the
// repository root; the channel is closed when bash exits, and the cleanup
// stops the whole group.
func startScript(t *testing.T, script string, env []string) (*lockedBuffer, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = repoRoot(t)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	return out, done
}

// envWithout returns the environment without the named variables, so the
// README's commands see what a fresh shell has.
func envWithout(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || k == n
		}
		if !drop {
			env = append(env, kv)
		}
	}
	return env
}

var cairnEnv = []string{"CAIRN_ADMIN_KEY", "CAIRN_CLUSTER_SECRET", "CAIRN_SERVER", "CAIRN_DATA", "CAIRN_LISTEN", "CAIRN_ACCESS_LOG", "CAIRN_SECRET_FILE", "CAIRN_JOIN", "CAIRN_CONFIG", "CAIRN_ACCESS_KEY_ID", "CAIRN_SECRET_ACCESS_KEY"}

// TestReadmeOneNode runs the README's one-node example: it makes an admin
// key, starts a node on 0.0.0.0 with an access log in a directory that
// does not exist yet, prints a loopback URL, and serves a PUT and a GET
// with that key.
func TestReadmeOneNode(t *testing.T) {
	tmp := t.TempDir()
	_, port, _ := net.SplitHostPort(freeAddr(t))
	script := readmeScript(t, readmeBlock(t, "one-node"),
		"bin/cairn", cairnBin,
		"0.0.0.0:8080", "0.0.0.0:"+port,
		"/etc/cairn", tmp+"/etc/cairn",
		"/var/lib/cairn", tmp+"/var/lib/cairn",
		"/var/log/cairn", tmp+"/var/log/cairn")
	out, exited := startScript(t, script, envWithout(cairnEnv...))
	url := "http://127.0.0.1:" + port
	deadline := time.After(30 * time.Second)
	for !strings.Contains(out.String(), "cairn: serving ") {
		select {
		case <-exited:
			t.Fatalf("the README's one-node example exited:\n%s", out)
		case <-deadline:
			t.Fatalf("the README's one-node example does not serve after 30 s:\n%s", out)
		case <-time.After(20 * time.Millisecond): // polling output of a process we do not control
		}
	}
	if want := "cairn: serving " + url; !strings.Contains(out.String(), want) {
		t.Fatalf("the node does not print %q (a URL one can open):\n%s", want, out)
	}
	key, err := os.ReadFile(filepath.Join(tmp, "etc/cairn/admin.key"))
	if err != nil || len(strings.TrimSpace(string(key))) < 16 {
		t.Fatalf("admin key %q, %v", key, err)
	}
	bearer := []string{"Authorization", "Bearer " + strings.TrimSpace(string(key))}
	resp, body := do(t, "POST", url+"/_cairn/buckets", []byte(`{"name":"www","public":true}`), bearer...)
	expect(t, resp, body, 201)
	page := []byte("<h1>hello from the README</h1>\n")
	resp, body = do(t, "PUT", url+"/www/index.html", page, bearer...)
	expect(t, resp, body, 201)
	resp, body = do(t, "GET", url+"/www/index.html", nil)
	expect(t, resp, body, 200)
	if !bytes.Equal(body, page) {
		t.Fatalf("GET returned %q", body)
	}
	logPath := filepath.Join(tmp, "var/log/cairn/access.log")
	waitFor(t, 10*time.Second, "the access log to record the GET", func() bool {
		b, _ := os.ReadFile(logPath)
		return bytes.Contains(b, []byte("GET /www/index.html"))
	})
}

// TestReadmeTour runs the README's tour, every command of it, against a
// dev cluster (`cairn dev`, as `make run` starts) on free ports, and checks
// what the commands left.
func TestReadmeTour(t *testing.T) {
	tmp := t.TempDir()
	p := freePortBlock(t, 3)
	dev := exec.Command(cairnBin, "dev", "--data", filepath.Join(tmp, "data"), "--port", strconv.Itoa(p))
	dev.Env = envWithout(cairnEnv...)
	devOut := &lockedBuffer{}
	dev.Stdout, dev.Stderr = devOut, devOut
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dev.Process.Signal(syscall.SIGTERM)
		dev.Wait()
	})
	url := func(i int) string { return "http://127.0.0.1:" + strconv.Itoa(p+i) }

	// Wait as a person would for `make run`'s banner, and for the cluster
	// to have its three voters.
	var key string
	waitFor(t, 60*time.Second, "the dev cluster", func() bool {
		if !strings.Contains(devOut.String(), "Cairn dev cluster") {
			return false
		}
		b, err := os.ReadFile(filepath.Join(tmp, "data", "admin.key"))
		if err != nil {
			return false
		}
		key = strings.TrimSpace(string(b))
		status, body, _, err := timed("GET", url(0)+"/_cairn/nodes", nil, "Authorization", "Bearer "+key)
		var v clusterView
		if err != nil || status != 200 || json.Unmarshal(body, &v) != nil || v.Leader == "0" || len(v.Nodes) != 3 {
			return false
		}
		for _, n := range v.Nodes {
			if n.Role != "voter" {
				return false
			}
		}
		return true
	})

	script := readmeScript(t, readmeBlock(t, "tour"),
		"bin/cairn", cairnBin,
		"127.0.0.1:8080", "127.0.0.1:"+strconv.Itoa(p),
		"127.0.0.1:8082", "127.0.0.1:"+strconv.Itoa(p+2),
		"data/admin.key", filepath.Join(tmp, "data", "admin.key"),
		"/tmp/readme.md", filepath.Join(tmp, "readme.md"))
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = repoRoot(t)
	cmd.Env = envWithout(cairnEnv...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's tour failed: %v\n%s\ndev cluster:\n%s", err, out, devOut)
	}

	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}

	// Keys, signed links and rules, in the same cluster.
	script = readmeScript(t, readmeBlock(t, "access"),
		"bin/cairn", cairnBin,
		"127.0.0.1:8080", "127.0.0.1:"+strconv.Itoa(p),
		"127.0.0.1:8082", "127.0.0.1:"+strconv.Itoa(p+2),
		"/tmp/badbot.html", filepath.Join(tmp, "badbot.html"))
	cmd = exec.Command("bash", "-c", script)
	cmd.Dir = repoRoot(t)
	// The tour's exports, as in the same terminal.
	cmd.Env = append(envWithout(cairnEnv...), "CAIRN_SERVER="+url(0), "CAIRN_ADMIN_KEY="+key)
	aout, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's access block failed: %v\n%s\ndev cluster:\n%s", err, aout, devOut)
	}
	for _, want := range []string{
		"# Cairn",                               // the signed link served the private file
		"<h1>Please use the download page</h1>", // the badbot page
		"deploy",                                // key list
		"bucket=site all-clients rate 50/s burst 100", // rule list
	} {
		if !bytes.Contains(aout, []byte(want)) {
			t.Errorf("the access block's output lacks %q:\n%s", want, aout)
		}
	}
	if bytes.Contains(aout, []byte("AccessDenied")) || bytes.Contains(aout, []byte(`"error"`)) {
		t.Errorf("the access block hit an error:\n%s", aout)
	}
	serves := func(u string, want []byte) {
		t.Helper()
		waitFor(t, 10*time.Second, u+" to serve its file", func() bool {
			status, body, _, err := timed("GET", u, nil, "Authorization", "Bearer "+key)
			return err == nil && status == 200 && bytes.Equal(body, want)
		})
	}
	mk, _ := os.ReadFile(filepath.Join(repoRoot(t), "Makefile"))
	serves(url(1)+"/site/uploads/Makefile", mk)

	if got, err := os.ReadFile(filepath.Join(tmp, "readme.md")); err != nil || !bytes.Equal(got, readme) {
		t.Fatalf("cairn get wrote %d bytes (%v), want README.md", len(got), err)
	}
	for _, want := range []string{
		"uploaded README.md -> site/docs/README.md (",
		fmt.Sprintf("downloaded site/docs/README.md -> %s (%d bytes)", filepath.Join(tmp, "readme.md"), len(readme)),
		"removed site/Makefile",
	} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("the tour's output lacks %q:\n%s", want, out)
		}
	}
	// Another node may apply the last writes a moment after node 1.
	serves(url(2)+"/demo/README.md", readme)
	cli, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	serves(url(1)+"/site/docs/cli.md", cli)  // cairn sync
	serves(url(1)+"/site/docs2/cli.md", cli) // tar | curl ?extract=tar
	resp, body := do(t, "GET", url(0)+"/site/Makefile", nil)
	expect(t, resp, body, 404) // cairn rm, through the node it went to
}
