package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// raceOp is one exclusive operation: prepare makes what side s of the
// race needs for name i (in its own mount m), take tries to take the
// name through mount m.
type raceOp struct {
	name    string
	prepare func(m string, side, i int) error
	take    func(m, dir string, side, i int) error
}

var raceOps = []raceOp{
	{name: "mkdir", take: func(m, dir string, side, i int) error {
		return syscall.Mkdir(filepath.Join(m, dir, "n"+strconv.Itoa(i)), 0o755)
	}},
	{name: "O_EXCL", take: func(m, dir string, side, i int) error {
		fd, err := syscall.Open(filepath.Join(m, dir, "n"+strconv.Itoa(i)), syscall.O_CREAT|syscall.O_EXCL|syscall.O_WRONLY, 0o644)
		if err == nil {
			syscall.Write(fd, []byte(strconv.Itoa(side)))
			syscall.Close(fd)
		}
		return err
	}},
	{name: "link", prepare: func(m string, side, i int) error {
		if i > 0 {
			return nil
		}
		return os.WriteFile(filepath.Join(m, "src-link", strconv.Itoa(side)), []byte(strconv.Itoa(side)), 0o644)
	}, take: func(m, dir string, side, i int) error {
		return syscall.Link(filepath.Join(m, "src-link", strconv.Itoa(side)), filepath.Join(m, dir, "n"+strconv.Itoa(i)))
	}},
	{name: "symlink", take: func(m, dir string, side, i int) error {
		return syscall.Symlink("side"+strconv.Itoa(side), filepath.Join(m, dir, "n"+strconv.Itoa(i)))
	}},
	{name: "mknod", take: func(m, dir string, side, i int) error {
		// A FIFO, a socket, a character device, a block device in turn.
		kinds := []uint32{syscall.S_IFIFO, syscall.S_IFSOCK, syscall.S_IFCHR, syscall.S_IFBLK}
		return syscall.Mknod(filepath.Join(m, dir, "n"+strconv.Itoa(i)), kinds[i%4]|0o640, int(unix.Mkdev(1, uint32(side))))
	}},
	{name: "RENAME_NOREPLACE", prepare: func(m string, side, i int) error {
		return os.WriteFile(filepath.Join(m, "src-rename", fmt.Sprintf("%d-%d", side, i)), []byte(strconv.Itoa(side)), 0o644)
	}, take: func(m, dir string, side, i int) error {
		return unix.Renameat2(unix.AT_FDCWD, filepath.Join(m, "src-rename", fmt.Sprintf("%d-%d", side, i)),
			unix.AT_FDCWD, filepath.Join(m, dir, "n"+strconv.Itoa(i)), unix.RENAME_NOREPLACE)
	}},
}

// race runs op on every mount of mnts at once for names 0..n-1 in
// directory dir: each side takes the names in the same order, starting
// together. It returns, per name, the sides that won, and fails on an
// error other than EEXIST.
func race(t *testing.T, nodes []*server, mnts []string, dir string, op raceOp, n int) [][]int {
	t.Helper()
	for s, m := range mnts {
		if op.prepare == nil {
			break
		}
		for i := range n {
			if err := op.prepare(m, s, i); err != nil {
				t.Fatalf("%s: prepare side %d name %d: %v", op.name, s, i, err)
			}
		}
	}
	wins := make([][]int, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, len(mnts))
	for s, m := range mnts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range n {
				err := op.take(m, dir, s, i)
				switch {
				case err == nil:
					mu.Lock()
					wins[i] = append(wins[i], s)
					mu.Unlock()
				case errors.Is(err, syscall.EEXIST):
				default:
					errs <- fmt.Errorf("%s: side %d name %d: %w", op.name, s, i, err)
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		dumpWarnings(t, nodes)
		t.Fatal(err)
	}
	return wins
}

// dumpWarnings logs the nodes' warnings and errors.
func dumpWarnings(t *testing.T, nodes []*server) {
	for _, s := range nodes {
		for _, ln := range strings.Split(s.logs.String(), "\n") {
			if strings.Contains(ln, "WARN") || strings.Contains(ln, "ERROR") {
				t.Logf("%s: %s", s.addr, ln)
			}
		}
	}
}

// TestMountExclusiveRace (RACE_OPS=mkdir,link runs only those): processes on two nodes (and, with fewer names,
// three) race for the same names with mkdir, O_CREAT|O_EXCL, link,
// symlink, mknod and RENAME_NOREPLACE: every name has exactly one winner, the
// others get EEXIST, and every name is there afterwards on every node.
func TestMountExclusiveRace(t *testing.T) {
	needFuse(t)
	nodes, mnts := startMountCluster(t, 3)
	for _, d := range []string{"src-link", "src-rename"} {
		if err := os.Mkdir(filepath.Join(mnts[0], d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		mnts []string
		n    int
	}{{[]string{mnts[0], mnts[2]}, 2000}, {mnts, 500}} {
		for _, op := range raceOps {
			if os.Getenv("RACE_OPS") != "" && !strings.Contains(os.Getenv("RACE_OPS"), op.name) {
				continue
			}
			dir := fmt.Sprintf("race-%s-%d", op.name, len(tc.mnts))
			if err := os.Mkdir(filepath.Join(mnts[1], dir), 0o755); err != nil {
				t.Fatal(err)
			}
			// Every node sees the directory before the race.
			for _, m := range tc.mnts {
				waitFor(t, 10*time.Second, dir+" on "+m, func() bool {
					_, err := os.Stat(filepath.Join(m, dir))
					return err == nil
				}, nodes...)
			}
			began := time.Now()
			wins := race(t, nodes, tc.mnts, dir, op, tc.n)
			took := time.Since(began)
			double, none := 0, 0
			for i, w := range wins {
				switch {
				case len(w) > 1:
					if double < 5 {
						t.Errorf("%s on %d nodes: name %d won by sides %v", op.name, len(tc.mnts), i, w)
					}
					double++
				case len(w) == 0:
					if none < 5 {
						t.Errorf("%s on %d nodes: name %d won by nobody", op.name, len(tc.mnts), i)
					}
					none++
				}
			}
			if double > 0 || none > 0 {
				dumpWarnings(t, nodes)
			}
			t.Logf("%s on %d nodes, %d names: %d won twice, %d by nobody, in %v (%v a name)",
				op.name, len(tc.mnts), tc.n, double, none, took.Round(time.Millisecond), (took / time.Duration(tc.n)).Round(time.Microsecond))
			// Nothing lost: every node lists every name once published.
			for _, m := range mnts {
				d, err := os.Open(filepath.Join(m, dir))
				if err != nil {
					t.Fatal(err)
				}
				d.Sync() // the mount's queue is published (fsync of a directory)
				d.Close()
			}
			for _, m := range mnts {
				waitFor(t, 10*time.Second, fmt.Sprintf("%d names of %s on %s", tc.n, dir, m), func() bool {
					es, err := os.ReadDir(filepath.Join(m, dir))
					return err == nil && len(es) == tc.n
				}, nodes...)
			}
		}
	}
}

// TestMountRmdirCreateRace: node 1 creates a file in a directory while
// node 3 removes the directory, for 300 directories: either the rmdir
// fails (ENOTEMPTY) and the file is there, or the create fails (ENOENT)
// and the directory is gone. Never both, so no file is lost. Then two
// nodes move two directories into each other at once, 100 times: one
// move fails, and no cycle is made.
func TestMountRmdirCreateRace(t *testing.T) {
	needFuse(t)
	nodes, mnts := startMountCluster(t, 3)
	a, b := mnts[0], mnts[2]
	maker := mnts[1] // node 2 makes the directories: neither racer owns them
	const n = 300
	if err := os.Mkdir(filepath.Join(maker, "rc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := os.Mkdir(filepath.Join(maker, "rc", strconv.Itoa(i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []string{a, b} {
		waitFor(t, 10*time.Second, "the directories on "+m, func() bool {
			es, err := os.ReadDir(filepath.Join(m, "rc"))
			return err == nil && len(es) == n
		}, nodes...)
	}
	created := make([]error, n)
	removed := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		<-start
		for i := range n {
			created[i] = os.WriteFile(filepath.Join(a, "rc", strconv.Itoa(i), "f"), []byte("kept"), 0o644)
		}
	}()
	go func() {
		defer wg.Done()
		<-start
		for i := range n {
			removed[i] = syscall.Rmdir(filepath.Join(b, "rc", strconv.Itoa(i)))
		}
	}()
	close(start)
	wg.Wait()
	for _, m := range mnts {
		d, _ := os.Open(filepath.Join(m, "rc"))
		d.Sync()
		d.Close()
	}
	both, kept, gone := 0, 0, 0
	for i := range n {
		c, r := created[i], removed[i]
		switch {
		case c == nil && r == nil:
			both++
			t.Errorf("dir %d: the create and the rmdir both succeeded: the file is lost", i)
		case c == nil:
			if !errors.Is(r, syscall.ENOTEMPTY) {
				t.Errorf("dir %d: rmdir failed with %v, want ENOTEMPTY", i, r)
			}
			kept++
		case r == nil:
			if !errors.Is(c, syscall.ENOENT) {
				t.Errorf("dir %d: create failed with %v, want ENOENT", i, c)
			}
			gone++
		default:
			t.Errorf("dir %d: both failed: create %v, rmdir %v", i, c, r)
		}
	}
	t.Logf("rmdir against create, %d directories: %d files kept (rmdir ENOTEMPTY), %d directories removed (create ENOENT), %d both", n, kept, gone, both)
	for _, m := range mnts {
		waitFor(t, 10*time.Second, "every kept file on "+m, func() bool {
			for i := range n {
				_, err := os.Stat(filepath.Join(m, "rc", strconv.Itoa(i), "f"))
				if (created[i] == nil) != (err == nil) {
					return false
				}
			}
			return true
		}, nodes...)
	}

	// Cross renames: node 1 moves x into y while node 3 moves y into x.
	const pairs = 100
	for i := range pairs {
		for _, d := range []string{"x", "y"} {
			if err := os.MkdirAll(filepath.Join(maker, "cr", strconv.Itoa(i), d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, m := range []string{a, b} {
		waitFor(t, 10*time.Second, "the pairs on "+m, func() bool {
			es, err := os.ReadDir(filepath.Join(m, "cr", strconv.Itoa(pairs-1)))
			return err == nil && len(es) == 2
		}, nodes...)
	}
	ab := make([]error, pairs)
	ba := make([]error, pairs)
	start = make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		<-start
		for i := range pairs {
			p := filepath.Join(a, "cr", strconv.Itoa(i))
			ab[i] = os.Rename(filepath.Join(p, "x"), filepath.Join(p, "y", "x"))
		}
	}()
	go func() {
		defer wg.Done()
		<-start
		for i := range pairs {
			p := filepath.Join(b, "cr", strconv.Itoa(i))
			ba[i] = os.Rename(filepath.Join(p, "y"), filepath.Join(p, "x", "y"))
		}
	}()
	close(start)
	wg.Wait()
	moved := [2]int{}
	for i := range pairs {
		if ab[i] == nil && ba[i] == nil {
			t.Errorf("pair %d: both moves succeeded", i)
			continue
		}
		if ab[i] == nil {
			moved[0]++
		} else if ba[i] == nil {
			moved[1]++
		}
		// Whatever happened, the pair is a tree on every node: one of x
		// and y at the top, the other inside it (or both at the top).
		for _, m := range mnts {
			waitFor(t, 10*time.Second, fmt.Sprintf("pair %d a tree on %s", i, m), func() bool {
				p := filepath.Join(m, "cr", strconv.Itoa(i))
				es, err := os.ReadDir(p)
				if err != nil {
					return false
				}
				switch {
				case len(es) == 2:
					return ab[i] != nil && ba[i] != nil
				case len(es) != 1:
					return false
				}
				top, other := es[0].Name(), map[string]string{"x": "y", "y": "x"}[es[0].Name()]
				_, err = os.Stat(filepath.Join(p, top, other))
				return err == nil
			}, nodes...)
		}
	}
	t.Logf("cross renames, %d pairs: node 1's move won %d, node 3's %d", pairs, moved[0], moved[1])

	// PHP's upload: a file written to a temporary name, then renamed into
	// place (a rename the mount decides itself when the file is not
	// published yet); one onto an existing name is renamed in the log.
	if err := os.Mkdir(filepath.Join(a, "up"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a, "up", "taken"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	const uploads = 50
	for i := range uploads {
		tmp := filepath.Join(a, "up", fmt.Sprintf(".tmp-%d", i))
		if err := os.WriteFile(tmp, []byte(fmt.Sprintf("upload %d", i)), 0o644); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(a, "up", fmt.Sprintf("u%d", i))
		if i == uploads-1 {
			dst = filepath.Join(a, "up", "taken")
		}
		if err := os.Rename(tmp, dst); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := os.Open(filepath.Join(a, "up")); err == nil {
		if err := d.Sync(); err != nil {
			t.Fatalf("fsync of the upload directory: %v", err)
		}
		d.Close()
	}
	for _, m := range []string{a, b} {
		waitFor(t, 10*time.Second, "the uploads on "+m, func() bool {
			es, err := os.ReadDir(filepath.Join(m, "up"))
			if err != nil || len(es) != uploads {
				return false
			}
			for i := range uploads {
				name := fmt.Sprintf("u%d", i)
				if i == uploads-1 {
					name = "taken"
				}
				got, err := os.ReadFile(filepath.Join(m, "up", name))
				if err != nil || string(got) != fmt.Sprintf("upload %d", i) {
					return false
				}
			}
			return true
		}, nodes...)
	}
}

// TestMountSpecialFiles: a FIFO, a socket and devices made on one node's
// mount are the same names, kinds, modes and device numbers on another's;
// a FIFO carries data between processes of one node (each node's kernel
// makes its own pipe); mknod of a regular file makes an empty file; and
// none of them has content over HTTP.
func TestMountSpecialFiles(t *testing.T) {
	needFuse(t)
	nodes, mnts := startMountCluster(t, 2)
	d0, d1 := filepath.Join(mnts[0], "special"), filepath.Join(mnts[1], "special")
	if err := os.Mkdir(d0, 0o755); err != nil {
		t.Fatal(err)
	}
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	for _, c := range []struct {
		name string
		mode uint32
		dev  uint64
	}{
		{"fifo", syscall.S_IFIFO | 0o620, 0},
		{"sock", syscall.S_IFSOCK | 0o755, 0},
		{"null", syscall.S_IFCHR | 0o666, unix.Mkdev(1, 3)},
		{"loop", syscall.S_IFBLK | 0o660, unix.Mkdev(7, 0)},
		{"plain", syscall.S_IFREG | 0o644, 0},
	} {
		if err := syscall.Mknod(filepath.Join(d0, c.name), c.mode, int(c.dev)); err != nil {
			t.Fatalf("mknod %s: %v", c.name, err)
		}
		if err := syscall.Mknod(filepath.Join(d0, c.name), c.mode, int(c.dev)); !errors.Is(err, syscall.EEXIST) {
			t.Fatalf("mknod %s twice: %v, want EEXIST", c.name, err)
		}
		want := c.mode &^ 0o022
		waitFor(t, 10*time.Second, c.name+" on node 2", func() bool {
			var st syscall.Stat_t
			err := syscall.Lstat(filepath.Join(d1, c.name), &st)
			return err == nil && st.Mode == want && st.Rdev == c.dev && st.Size == 0
		}, nodes...)
	}
	// A FIFO works between two processes of node 2.
	fifo := filepath.Join(d1, "fifo")
	got := make(chan string, 1)
	go func() {
		b, err := os.ReadFile(fifo)
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		got <- string(b)
	}()
	if err := os.WriteFile(fifo, []byte("through the pipe"), 0); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != "through the pipe" {
			t.Fatalf("read from the FIFO: %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing came out of the FIFO")
	}
	// No content over HTTP; the regular file is an empty one.
	for name, want := range map[string]int{"fifo": 404, "null": 404, "plain": 200} {
		if resp, _ := do(t, "GET", nodes[1].url+"/web/special/"+name, nil, auth()...); resp.StatusCode != want {
			t.Errorf("GET special/%s: %d, want %d", name, resp.StatusCode, want)
		}
	}
	// Removed like any name.
	if err := os.Remove(filepath.Join(d1, "null")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "null gone on node 1", func() bool {
		_, err := os.Lstat(filepath.Join(d0, "null"))
		return errors.Is(err, os.ErrNotExist)
	}, nodes...)
}
