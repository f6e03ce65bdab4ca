package e2e

import (
	"bufio"
	"fmt"
	"io"
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

// lockClient is a process running testdata/lockclient.py: the test sends
// it one command at a time and reads its answer, so that processes on
// several nodes' mounts lock in a known order.
type lockClient struct {
	t     *testing.T
	name  string
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
}

func python3(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed for the lock tests: ", err)
	}
	return p
}

func startLockClient(t *testing.T, name string) *lockClient {
	t.Helper()
	cmd := exec.Command(python3(t), "testdata/lockclient.py")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &lockClient{t: t, name: name, cmd: cmd, in: in, lines: make(chan string, 16)}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			c.lines <- s.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() { c.in.Close(); c.cmd.Process.Kill(); c.cmd.Wait() })
	return c
}

// send sends a command without waiting for its answer.
func (c *lockClient) send(cmd string) {
	c.t.Helper()
	if _, err := fmt.Fprintln(c.in, cmd); err != nil {
		c.t.Fatalf("%s: send %q: %v", c.name, cmd, err)
	}
}

// answer waits up to d for the answer to the last command.
func (c *lockClient) answer(d time.Duration) (string, bool) {
	select {
	case l, ok := <-c.lines:
		return l, ok
	case <-time.After(d):
		return "", false
	}
}

// do sends cmd and returns its answer (20 s at most).
func (c *lockClient) do(cmd string) string {
	c.t.Helper()
	c.send(cmd)
	a, ok := c.answer(20 * time.Second)
	if !ok {
		c.t.Fatalf("%s: no answer to %q", c.name, cmd)
	}
	return a
}

// must sends cmd and fails unless the answer is want.
func (c *lockClient) must(cmd, want string) {
	c.t.Helper()
	if a := c.do(cmd); a != want {
		c.t.Fatalf("%s: %q answered %q, want %q", c.name, cmd, a, want)
	}
}

// startLockCluster starts n nodes mounting bucket "web" with mount
// options opts (e.g. "handles") and the extra server args.
func startLockCluster(t *testing.T, n int, opts string, extra ...string) ([]*server, []string) {
	t.Helper()
	return startMountClusterWith(t, n, opts, extra...)
}

// TestMountLocks: flock, fcntl and OFD locks through the mounts of three
// nodes hold across the cluster; a waiter gets the lock in FIFO order,
// with what the last holder wrote; an interrupted wait answers EINTR; a
// cross-node deadlock answers EDEADLK; a node killed while holding a lock
// releases it within the lease plus 1 s.
func TestMountLocks(t *testing.T) {
	needFuse(t)
	const lease = 3 * time.Second
	nodes, mnts := startLockCluster(t, 3, "handles", "--lock-lease", lease.String())
	f := func(i int, name string) string { return filepath.Join(mnts[i], name) }
	if err := os.WriteFile(f(0, "lockfile"), []byte("0"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFile(t, 5*time.Second, f(1, "lockfile"), []byte("0"), nodes...)
	waitFile(t, 5*time.Second, f(2, "lockfile"), []byte("0"), nodes...)

	t.Run("flock", func(t *testing.T) {
		a, b, c := startLockClient(t, "a@1"), startLockClient(t, "b@2"), startLockClient(t, "c@3")
		a.must("open "+f(0, "lockfile"), "ok")
		b.must("open "+f(1, "lockfile"), "ok")
		c.must("open "+f(2, "lockfile"), "ok")
		// Mutual exclusion.
		a.must("flock ex", "ok")
		b.must("flock ex nb", "EAGAIN")
		b.must("flock sh nb", "EAGAIN")
		// FIFO: b waits, then c; a's release wakes b, with what a wrote.
		b.send("flock ex")
		time.Sleep(300 * time.Millisecond)
		c.send("flock ex")
		time.Sleep(300 * time.Millisecond)
		if l, ok := b.answer(0); ok {
			t.Fatalf("b got %q while a holds the lock", l)
		}
		a.must("write written-by-a", "ok")
		a.must("flock un", "ok")
		if l, ok := b.answer(10 * time.Second); !ok || l != "ok" {
			t.Fatalf("b after a's unlock: %q %v", l, ok)
		}
		if l, ok := c.answer(500 * time.Millisecond); ok {
			t.Fatalf("c got %q while b holds the lock (not FIFO)", l)
		}
		b.must("read", "ok written-by-a")
		b.must("write written-by-b", "ok")
		b.must("close", "ok") // the last close of b's file releases its flock
		if l, ok := c.answer(10 * time.Second); !ok || l != "ok" {
			t.Fatalf("c after b's close: %q %v", l, ok)
		}
		c.must("read", "ok written-by-b")
		c.must("flock un", "ok")
		// Shared with shared, not with exclusive.
		a.must("flock sh", "ok")
		c.must("flock sh nb", "ok")
		b.must("open "+f(1, "lockfile"), "ok")
		b.must("flock ex nb", "EAGAIN")
		a.must("flock un", "ok")
		c.must("flock un", "ok")
		b.must("flock ex nb", "ok")
		b.must("flock un", "ok")
	})

	t.Run("fcntl", func(t *testing.T) {
		a, b := startLockClient(t, "a@1"), startLockClient(t, "b@3")
		a.must("open "+f(0, "lockfile"), "ok")
		b.must("open "+f(2, "lockfile"), "ok")
		pid := strings.TrimPrefix(a.do("pid"), "ok ")
		a.must("lock w 0 10", "ok")
		b.must("lock w 10 10", "ok")              // disjoint ranges
		b.must("lock r 5 10 nb", "EAGAIN")        // overlaps a's
		b.must("getlk w 0 100", "ok w 0 10 "+pid) // F_GETLK names the holder
		a.must("lock r 0 5", "ok")                // a splits its own lock
		b.must("getlk r 0 5", "ok unlocked")      // reads share
		b.must("getlk r 5 1", "ok w 5 5 "+pid)
		// A wait is interrupted by a signal: EINTR, and it leaves the queue.
		b.send("lock w 0 1")
		time.Sleep(500 * time.Millisecond)
		b.cmd.Process.Signal(syscall.SIGUSR1)
		if l, ok := b.answer(10 * time.Second); !ok || l != "EINTR" {
			t.Fatalf("interrupted wait: %q %v", l, ok)
		}
		// Deadlock across nodes: b waits for a, a then for b.
		b.send("lock w 0 1")
		time.Sleep(500 * time.Millisecond)
		a.must("lock w 10 1", "EDEADLOCK") // EDEADLK: Python names errno 35 so
		// Closing any descriptor of the file releases a's POSIX locks.
		a.must("close", "ok")
		if l, ok := b.answer(10 * time.Second); !ok || l != "ok" {
			t.Fatalf("b after a's close: %q %v", l, ok)
		}
		b.must("close", "ok")
		// OFD locks conflict with POSIX ones and go with their description.
		a.must("open "+f(0, "lockfile"), "ok")
		a.must("ofd w 0 0", "ok")
		b.must("open "+f(2, "lockfile"), "ok")
		b.must("lock r 100 1 nb", "EAGAIN")
		a.must("close", "ok")
		waitFor(t, 5*time.Second, "a's OFD lock released at close", func() bool { return b.do("lock r 100 1 nb") == "ok" }, nodes...)
		b.must("close", "ok")
	})

	t.Run("dead holder", func(t *testing.T) {
		// A process holds a lock under its node's cached lock right and
		// writes under it; its node stops (SIGSTOP) before it publishes,
		// so the recalls of the waiters on the two other nodes go
		// unanswered, and is then SIGKILLed. One waiter gets the lock
		// within the lease plus 1 s; neither reads, nor does HTTP serve,
		// what the dead node had not published.
		// The holder is on a node that does not lead (the leader expires
		// sessions: killing it would add an election).
		v := waitMembers(t, nodes[0], 3, nodes...)
		idx := -1
		for i, s := range nodes {
			for _, vn := range v.Nodes {
				if strings.HasSuffix(vn.URL, s.addr) && !vn.Leader {
					idx = i
				}
			}
		}
		if idx < 0 {
			t.Fatalf("no follower in %+v", v)
		}
		others := []int{(idx + 1) % 3, (idx + 2) % 3}
		if err := os.WriteFile(f(others[0], "deadfile"), []byte("published"), 0o644); err != nil {
			t.Fatal(err)
		}
		for i := range nodes {
			waitFile(t, 5*time.Second, f(i, "deadfile"), []byte("published"), nodes...)
		}
		before := lockMetrics(t, nodes[idx])
		h := startLockClient(t, "holder")
		h.must("open "+f(idx, "deadfile"), "ok")
		h.must("lock w 0 0", "ok") // takes the file's lock right
		h.must("lock u 0 0", "ok")
		h.must("lock w 0 0", "ok") // granted under it: no commit
		if m := lockMetrics(t, nodes[idx]); m["local_grants_total"] <= before["local_grants_total"] || m["rights"] < 1 {
			t.Fatalf("the holder's node holds no cached lock right: %v, before %v", m, before)
		}
		h.must("write unpublished under the lock", "ok")
		nodes[idx].cmd.Process.Signal(syscall.SIGSTOP)
		ws := []*lockClient{startLockClient(t, "waiter-a"), startLockClient(t, "waiter-b")}
		for i, w := range ws {
			w.must("open "+f(others[i], "deadfile"), "ok")
			w.send("lock w 0 0")
		}
		time.Sleep(500 * time.Millisecond)
		killed := time.Now()
		nodes[idx].kill()
		syscall.Unmount(mnts[idx], syscall.MNT_DETACH)
		got := make(chan int, 2)
		for i, w := range ws {
			go func() {
				if l, ok := w.answer(lease + 5*time.Second); ok && l == "ok" {
					got <- i
				} else {
					got <- -1
				}
			}()
		}
		first := <-got
		took := time.Since(killed)
		if first < 0 {
			t.Fatalf("no waiter got the lock after the holder's node died")
		}
		t.Logf("a waiter on another node got the lock of a SIGKILLed node's process %v after the kill (lease %v)", took, lease)
		if took > lease+time.Second {
			t.Fatalf("the lock came %v after the kill: more than the lease (%v) + 1 s", took, lease)
		}
		ws[first].must("read", "ok published")
		getOK(t, nodes[others[1-first]].url+"/web/deadfile", []byte("published"), nodes...)
		// The other waiter gets it at the first one's release.
		ws[first].must("lock u 0 0", "ok")
		if i := <-got; i != 1-first {
			t.Fatalf("the second waiter did not get the lock after the first's release")
		}
		ws[1-first].must("read", "ok published")
	})
}

// TestMountLocksCounter: hand-overs under load. Four processes on three
// nodes increment a counter in a file under flock, and four more another
// counter under fcntl (a POSIX lock of the whole file), all at once; no
// increment is lost (each lock hands over what the last holder wrote).
func TestMountLocksCounter(t *testing.T) {
	needFuse(t)
	nodes, mnts := startLockCluster(t, 3, "handles")
	const per, procs = 40, 4
	kinds := []string{"flock", "fcntl"}
	// Each file exists on every node first: two creates of one name on two
	// nodes at once are two files, the last one committed wins.
	for _, k := range kinds {
		if err := os.WriteFile(filepath.Join(mnts[0], "counter-"+k), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(mnts); i++ {
			waitFile(t, 5*time.Second, filepath.Join(mnts[i], "counter-"+k), []byte{}, nodes...)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan string, procs*len(kinds))
	start := time.Now()
	for _, k := range kinds {
		for i := range procs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := exec.Command(python3(t), "testdata/lockclient.py", "counter", filepath.Join(mnts[i%len(mnts)], "counter-"+k), strconv.Itoa(per), k).CombinedOutput()
				if err != nil || strings.TrimSpace(string(out)) != "ok" {
					errs <- fmt.Sprintf("%s counter %d: %v %s", k, i, err, out)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	t.Logf("%d increments under flock and %d under fcntl, %d processes on %d nodes: %v", procs*per, procs*per, procs*len(kinds), len(mnts), time.Since(start))
	// The last increment may have been made on another node: node 1 reads
	// it once it has applied that publish (committed is not yet applied on
	// every node), within the propagation bound.
	for _, k := range kinds {
		waitFor(t, 5*time.Second, fmt.Sprintf("the %s counter at %d on node 1", k, procs*per), func() bool {
			got, err := os.ReadFile(filepath.Join(mnts[0], "counter-"+k))
			return err == nil && strings.TrimSpace(string(got)) == strconv.Itoa(procs*per)
		}, nodes...)
	}
	// The cost shows in each node's lock metrics: node 1's processes
	// took (at least) their 2 x 40 x 2 locks, each a commit or a grant
	// under node 1's cached lock right of the file.
	m := lockMetrics(t, nodes[0])
	if m["grants_total"] < 2*per*2 || m["commits_total"]+m["local_grants_total"] < 2*per*2 {
		t.Errorf("node 1's lock metrics %v: want at least %d grants, and as many commits and local grants", m, 2*per*2)
	}
	t.Logf("node 1's lock metrics: %v", m)
}

// lockMetrics reads s's cairn_locks_* counters (without the prefix).
func lockMetrics(t *testing.T, s *server) map[string]int {
	t.Helper()
	_, metrics := do(t, "GET", s.url+"/_cairn/metrics", nil)
	out := map[string]int{}
	for _, name := range []string{"grants_total", "commits_total", "local_grants_total", "recalls_total", "returns_total", "rights", "waits_total"} {
		out[name], _ = strconv.Atoi(regexpFind(t, string(metrics), `\ncairn_locks_`+name+` ([0-9]+)\n`))
	}
	return out
}

// TestMountSQLite: two writers on two nodes each insert 2,000 rows into
// one SQLite database on the mounts (rollback journal, default locking,
// no-open mode). The database is whole and holds exactly 4,000 rows.
// CAIRN_SQLITE_NOLOCKS=1 runs the same on mounts with locking off
// (kernel locks, local to each node), to show the damage (not in CI).
func TestMountSQLite(t *testing.T) {
	needFuse(t)
	opts := "flush" // fcntl locks: not the default noflush mode
	if os.Getenv("CAIRN_SQLITE_NOLOCKS") == "1" {
		opts = "nolocks"
	}
	rows := 2000
	if v, err := strconv.Atoi(os.Getenv("CAIRN_SQLITE_ROWS")); err == nil && v > 0 {
		rows = v
	}
	nodes, mnts := startLockCluster(t, 2, opts)
	db := func(i int) string { return filepath.Join(mnts[i], "app.db") }
	// The application creates its database once, then both nodes write.
	if out, err := exec.Command(python3(t), "testdata/lockclient.py", "sqlite", db(0), "0", "init").CombinedOutput(); err != nil {
		t.Fatalf("create the database: %v %s", err, out)
	}
	waitFor(t, 10*time.Second, "the database on node 2", func() bool {
		fi, err := os.Stat(db(1))
		return err == nil && fi.Size() > 0
	}, nodes...)
	start := time.Now()
	var wg sync.WaitGroup
	outs := make([]string, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := exec.Command(python3(t), "testdata/lockclient.py", "sqlite", db(i), strconv.Itoa(rows), fmt.Sprint("node", i+1)).CombinedOutput()
			outs[i] = fmt.Sprintf("%s (%v)", strings.TrimSpace(string(out)), err)
		}()
	}
	wg.Wait()
	t.Logf("two writers of %d rows each: %v; %q", rows, time.Since(start).Round(time.Millisecond), outs)
	check := `import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print(c.execute("PRAGMA integrity_check").fetchone()[0], c.execute("SELECT count(*) FROM t").fetchone()[0])`
	for i := range 2 {
		out, err := exec.Command(python3(t), "-c", check, db(i)).CombinedOutput()
		got := strings.TrimSpace(string(out))
		t.Logf("node %d: integrity_check and rows: %s (%v)", i+1, got, err)
		if want := fmt.Sprint("ok ", 2*rows); got != want {
			t.Errorf("node %d: integrity_check and row count %q (%v), want %q; writers: %q", i+1, got, err, want, outs)
		}
	}
}
