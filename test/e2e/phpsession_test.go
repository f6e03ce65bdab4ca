package e2e

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// phpFPM returns the php-fpm binary, or skips (fails under CI=true).
func phpFPM(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"php-fpm", "php-fpm8.4", "php-fpm8.3", "php-fpm8.2"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
		if _, err := os.Stat("/usr/sbin/" + p); err == nil {
			return "/usr/sbin/" + p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("php-fpm is missing (make test installs it as root with apt-get)")
	}
	t.Skip("php-fpm is missing")
	return ""
}

// startPHPFPM runs php-fpm on addr with sessions saved in sessDir and
// the scripts of docRoot.
func startPHPFPM(t *testing.T, bin, dir, addr, sessDir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`[global]
error_log = %[1]s/fpm.log
daemonize = no
pid = %[1]s/fpm.pid
[www]
user = root
group = root
listen = %[2]s
pm = static
pm.max_children = 4
catch_workers_output = yes
php_admin_value[session.save_handler] = files
php_admin_value[session.save_path] = %[3]s
php_admin_value[session.use_strict_mode] = 0
php_admin_value[error_log] = %[1]s/php.log
`, dir, addr, sessDir)
	cf := filepath.Join(dir, "fpm.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-n", "-F", "-R", "-y", cf)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	// Its workers are killed with it (they hold the mount busy and the
	// output pipe open).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "fpm.log"))
			p, _ := os.ReadFile(filepath.Join(dir, "php.log"))
			t.Logf("php-fpm %s:\n%s%s%s", addr, logs.String(), b, p)
		}
	})
	waitFor(t, 10*time.Second, "php-fpm on "+addr, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// fcgiGet runs script with query through the FastCGI server at addr and
// returns the body of its answer (a minimal FastCGI client: one request
// per connection).
func fcgiGet(addr, script, query string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	w := bufio.NewWriter(c)
	record := func(typ byte, content []byte) {
		h := []byte{1, typ, 0, 1, 0, 0, 0, 0}
		binary.BigEndian.PutUint16(h[4:], uint16(len(content)))
		w.Write(h)
		w.Write(content)
	}
	record(1, []byte{0, 1, 0, 0, 0, 0, 0, 0}) // BEGIN_REQUEST, responder, no keep-alive
	var params []byte
	for _, kv := range [][2]string{{"SCRIPT_FILENAME", script}, {"REQUEST_METHOD", "GET"},
		{"QUERY_STRING", query}, {"SERVER_PROTOCOL", "HTTP/1.1"}, {"GATEWAY_INTERFACE", "CGI/1.1"}} {
		params = append(params, byte(len(kv[0])), byte(len(kv[1])))
		params = append(params, kv[0]...)
		params = append(params, kv[1]...)
	}
	record(4, params) // PARAMS
	record(4, nil)
	record(5, nil) // STDIN, empty
	if err := w.Flush(); err != nil {
		return "", err
	}
	var out, errOut bytes.Buffer
	r := bufio.NewReader(c)
	for {
		h := make([]byte, 8)
		if _, err := io.ReadFull(r, h); err != nil {
			return "", fmt.Errorf("fastcgi answer: %w (so far %q %q)", err, out.String(), errOut.String())
		}
		n, pad := binary.BigEndian.Uint16(h[4:]), h[6]
		body := make([]byte, int(n)+int(pad))
		if _, err := io.ReadFull(r, body); err != nil {
			return "", err
		}
		switch h[1] {
		case 6:
			out.Write(body[:n])
		case 7:
			errOut.Write(body[:n])
		case 3: // END_REQUEST
			_, b, _ := strings.Cut(out.String(), "\r\n\r\n")
			if errOut.Len() > 0 {
				return b, fmt.Errorf("php: %s", errOut.String())
			}
			return b, nil
		}
	}
}

// TestPHPSessionsAcrossNodes: php-fpm on two nodes keeps its sessions in
// one directory of the mounts (PHP's files handler flocks the session
// file from session_start to session_write_close). Concurrent requests of
// one session, through both nodes, each increment a counter in it: none
// is lost. Then sticky routing: the requests of another session, all
// through node 1, cost no lock commit after the first (node 1 takes the
// session file's lock right and grants its flocks itself).
func TestPHPSessionsAcrossNodes(t *testing.T) {
	needFuse(t)
	bin := phpFPM(t)
	nodes, mnts := startLockCluster(t, 2, "handles")
	if err := os.MkdirAll(filepath.Join(mnts[0], "sessions"), 0o755); err != nil {
		t.Fatal(err)
	}
	scripts := t.TempDir()
	script := filepath.Join(scripts, "count.php")
	if err := os.WriteFile(script, []byte(`<?php
session_id($_GET['id']);
session_start();
$_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1;
usleep(5000);
echo $_SESSION['n'];
session_write_close();
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for i := range 2 {
		sess := filepath.Join(mnts[i], "sessions")
		waitFor(t, 10*time.Second, "the sessions directory on node "+strconv.Itoa(i+1), func() bool { _, err := os.Stat(sess); return err == nil })
		addr := freeAddr(t)
		startPHPFPM(t, bin, filepath.Join(scripts, fmt.Sprint("fpm", i)), addr, sess)
		addrs = append(addrs, addr)
	}
	const id, workers, per = "cairnsession0001", 4, 25
	if _, err := fcgiGet(addrs[0], script, "id="+id); err != nil { // creates the session
		t.Fatal(err)
	}
	// The session's file exists on both nodes before its next request: two
	// nodes creating one new name at the same moment make two files (see
	// docs/operations.md, "File locks").
	waitFor(t, 10*time.Second, "the session file on node 2", func() bool {
		b, err := os.ReadFile(filepath.Join(mnts[1], "sessions", "sess_"+id))
		return err == nil && len(b) > 0
	})
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, workers*per)
	var mu sync.Mutex
	seen := map[string][]string{} // counter value → who answered it
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				node := (w + i) % 2
				v, err := fcgiGet(addrs[node], script, "id="+id)
				if err != nil {
					errs <- err
				}
				mu.Lock()
				seen[v] = append(seen[v], fmt.Sprintf("node %d at %v", node+1, time.Since(start).Round(time.Millisecond)))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	took := time.Since(start)
	got, err := fcgiGet(addrs[1], script, "id="+id)
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.Itoa(1 + workers*per + 1)
	t.Logf("%d requests of one session through two nodes in %v; counter %s", workers*per, took.Round(time.Millisecond), got)
	if strings.TrimSpace(got) != want {
		for v, who := range seen {
			if len(who) > 1 {
				t.Logf("counter %s answered twice: %v", v, who)
			}
		}
		t.Fatalf("session counter %q, want %s: increments were lost", got, want)
	}

	// Sticky: one session's requests through one node.
	const sticky, n = "cairnsession0002", 50
	before := lockMetrics(t, nodes[0])
	start = time.Now()
	for i := range n {
		v, err := fcgiGet(addrs[0], script, "id="+sticky)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(v) != strconv.Itoa(i+1) {
			t.Fatalf("sticky session: request %d answered %q", i+1, v)
		}
	}
	after := lockMetrics(t, nodes[0])
	commits, local := after["commits_total"]-before["commits_total"], after["local_grants_total"]-before["local_grants_total"]
	t.Logf("sticky session: %d requests through node 1 in %v: %d lock commits, %d locks granted under its lock right",
		n, time.Since(start).Round(time.Millisecond), commits, local)
	if commits > 1 || local < n-1 {
		t.Errorf("sticky session: %d lock commits and %d local grants for %d requests, want at most 1 commit (the first, which takes the lock right)", commits, local, n)
	}
}
