package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The package test: `make package`'s .deb installed in a fresh Debian 12
// root that boots systemd as its PID 1 in a container (systemd-nspawn, so
// that it runs on a machine whose own PID 1 is not systemd, and on cgroup
// v1 or v2), then the README's "Install from a package" block, the
// unit's readiness, watchdog and mount, and a purge. The .rpm is read
// with rpm (no RPM distribution is booted).
//
// The Debian root is made once with debootstrap from the machine's apt
// mirror and kept in $CAIRN_TEST_CACHE or ~/.cache/cairn-test (about
// 260 MB, a minute to make); each run boots an overlay of it, so it stays
// clean. Needs root, /dev/fuse, overlayfs, debootstrap, systemd-nspawn
// (Debian: systemd-container), nsenter and rpm: `make pkg-tools`
// installs the packages as root. Without them the test skips, except
// under CI=true, where a missing tool fails it; a machine that cannot do
// it at all (not Linux, not root, no /dev/fuse) skips it even there, and
// says why.

// pkgIncludes are the packages the test's Debian root gets beyond
// minbase: systemd to boot, adduser for the package's Depends, curl for
// the README. Not fuse3: the node mounts without fusermount3.
var pkgIncludes = []string{"systemd", "systemd-sysv", "dbus", "adduser", "curl", "ca-certificates"}

const pkgSuite = "bookworm"

func TestPackage(t *testing.T) {
	switch {
	case runtime.GOOS != "linux":
		t.Skip("package test: needs Linux (systemd, dpkg)")
	case os.Geteuid() != 0:
		t.Skip("package test: needs root (debootstrap, an overlay mount, systemd-nspawn); run as root, as CI does")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("package test: this machine has no /dev/fuse, which the mount step needs:", err)
	}
	var missing []string
	for _, tool := range []string{"debootstrap", "systemd-nspawn", "nsenter", "rpm", "make"} {
		if _, err := lookTool(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("package test: %s not installed (make pkg-tools installs them as root with apt-get)", strings.Join(missing, ", "))
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	start := time.Now()
	dist := t.TempDir()
	deb, rpm := makePackage(t, dist)
	t.Logf("make package: %v", time.Since(start).Round(time.Millisecond))
	checkVersion(t, deb)
	checkRPM(t, rpm, deb)

	lower := debianRoot(t)
	t.Logf("Debian root ready: %v", time.Since(start).Round(time.Millisecond))
	c := bootContainer(t, lower, dist)
	t.Logf("container booted: %v", time.Since(start).Round(time.Millisecond))

	// The README's block, as root (sudo is the identity there): install,
	// first start, a first file.
	out := c.mustRun(t, 2*time.Minute, readmePackageScript(t))
	for _, want := range []string{"Nothing runs yet", "/var/lib/cairn/admin.key (made now", "systemctl enable --now cairn", "installed: disabled inactive",
		"cluster.secret", "ok", "NAME=\"Debian GNU/Linux\"", "serving http://127.0.0.1:8080"} {
		if !strings.Contains(out, want) {
			t.Errorf("the README's package block: its output lacks %q:\n%s", want, out)
		}
	}
	key := strings.TrimSpace(c.mustRun(t, 10*time.Second, "cat /var/lib/cairn/admin.key"))
	if len(key) < 16 || strings.Contains(out, key) {
		t.Errorf("admin key %q: shorter than 16 bytes, or printed by the install or to the journal", key)
	}
	if j := c.mustRun(t, 10*time.Second, "journalctl -u cairn --no-pager"); strings.Contains(j, key) {
		t.Errorf("the admin key is in the journal:\n%s", j)
	}

	// What the install made, and that it enabled nothing by itself (the
	// README enabled the service: the preset state is what dpkg left).
	got := c.mustRun(t, 10*time.Second, `getent passwd cairn | cut -d: -f6,7
stat -c '%n %U:%G %a' /var/lib/cairn /var/log/cairn /var/lib/cairn/admin.key /etc/cairn/cairn.toml
dpkg-query -W -f='${Conffiles}\n' cairn | awk 'NF {print "conffile", $1}'
ls /usr/share/bash-completion/completions/cairn /usr/share/zsh/vendor-completions/_cairn /usr/share/fish/vendor_completions.d/cairn.fish /usr/share/man/man1/cairn-server.1.gz /usr/share/cairn/systemd/mount.conf
cairn version
systemd-analyze verify --man=no cairn.service && echo verified`)
	for _, want := range []string{"/var/lib/cairn:/usr/sbin/nologin", "/var/lib/cairn cairn:cairn 750", "/var/log/cairn cairn:cairn 750",
		"/var/lib/cairn/admin.key cairn:cairn 600", "/etc/cairn/cairn.toml root:root 644", "conffile /etc/cairn/cairn.toml",
		"/usr/share/man/man1/cairn-server.1.gz", "commit " + headCommit(t), "verified"} {
		if !strings.Contains(got, want) {
			t.Errorf("installed: lacks %q:\n%s", want, got)
		}
	}

	// Type=notify: after `systemctl restart` returns the node answers at
	// once (no retry), and the unit shows its status line.
	// `systemctl reload` (SIGHUP: the TLS certificate) keeps the process.
	got = c.mustRun(t, time.Minute, `systemctl restart cairn
curl -fsS http://127.0.0.1:8080/_cairn/health; echo
pid=$(systemctl show -P MainPID cairn)
systemctl reload cairn
[ "$(systemctl show -P MainPID cairn)" = "$pid" ] && echo "same process after reload"
systemctl show -p ActiveState -p SubState -p StatusText -p WatchdogUSec -p NRestarts cairn`)
	for _, want := range []string{"ok\n", "same process after reload", "ActiveState=active", "SubState=running", "StatusText=serving http://127.0.0.1:8080", "WatchdogUSec=30s", "NRestarts=0"} {
		if !strings.Contains(got, want) {
			t.Errorf("after systemctl restart: lacks %q:\n%s", want, got)
		}
	}
	t.Logf("README block and restart: %v", time.Since(start).Round(time.Millisecond))

	packageMount(t, c)
	t.Logf("mount: %v", time.Since(start).Round(time.Millisecond))
	packageWatchdog(t, c)
	t.Logf("watchdog: %v", time.Since(start).Round(time.Millisecond))

	// An upgrade (here the same package again) keeps the edited config
	// file and leaves the running node alone: it is restarted by hand,
	// one node of a cluster at a time.
	got = c.mustRun(t, time.Minute, `systemctl start cairn
pid=$(systemctl show -P MainPID cairn)
dpkg -i /pkg/cairn_*.deb
[ "$(systemctl show -P MainPID cairn)" = "$pid" ] && echo "same process after the upgrade"
grep -c '^mount = ' /etc/cairn/cairn.toml`)
	for _, want := range []string{"goes on with the old binary until it is restarted", "same process after the upgrade", "\n1\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("upgrade: lacks %q:\n%s", want, got)
		}
	}

	// A purge stops the service (and so unmounts) and deletes the
	// package's files and the logs, never the data.
	got = c.mustRun(t, time.Minute, `dpkg --purge cairn
systemctl is-active cairn || true
findmnt /srv/www >/dev/null && echo "left: the mount"
ls /var/lib/cairn
for f in /usr/bin/cairn /usr/lib/systemd/system/cairn.service /etc/cairn/cairn.toml /var/log/cairn /etc/systemd/system/multi-user.target.wants/cairn.service; do
	[ -e "$f" ] || [ -L "$f" ] && echo "left: $f"
done
for p in /proc/[0-9]*; do [ "$(cat "$p/comm" 2>/dev/null)" = cairn ] && echo "still running: ${p#/proc/}"; done; true`)
	for _, want := range []string{"data in /var/lib/cairn", "inactive", "admin.key", "blobs", "meta"} {
		if !strings.Contains(got, want) {
			t.Errorf("after dpkg --purge: lacks %q:\n%s", want, got)
		}
	}
	for _, bad := range []string{"left: ", "still running"} {
		if strings.Contains(got, bad) {
			t.Errorf("after dpkg --purge: %q:\n%s", bad, got)
		}
	}
	t.Logf("total: %v", time.Since(start).Round(time.Millisecond))
}

// packageMount: with a mount in cairn.toml and no drop-in, the start fails
// and says what to install; with the drop-in installed as its comment
// says, the mount is seen outside the service (in the machine's mount
// namespace), works, and `systemctl stop` unmounts it.
func packageMount(t *testing.T, c *container) {
	got := c.mustRun(t, time.Minute, `install -d -o cairn -g cairn /srv/www
echo 'mount = ["web:/srv/www"]' >> /etc/cairn/cairn.toml
systemctl restart cairn && echo "started without the drop-in" || true
journalctl -u cairn --no-pager -n 20 | grep -o 'mount.conf' | head -1
systemctl stop cairn; systemctl reset-failed cairn || true`)
	if strings.Contains(got, "started without the drop-in") || !strings.Contains(got, "mount.conf") {
		t.Errorf("a mount under the hardened unit without the drop-in: want a failed start that names mount.conf:\n%s", got)
	}
	// The install lines of mount.conf's own comment.
	dropIn := c.mustRun(t, 10*time.Second, `sed -n 's/^#   \(install -D .*\|systemctl daemon-reload .*\)$/\1/p' /usr/share/cairn/systemd/mount.conf`)
	if strings.Count(dropIn, "\n") != 2 {
		t.Fatalf("mount.conf's comment no longer gives the two install lines:\n%s", dropIn)
	}
	got = c.mustRun(t, time.Minute, dropIn+`findmnt -n -o FSTYPE,OPTIONS /srv/www
echo hello > /srv/www/hello.txt
sync /srv/www
curl -fsS -H "Authorization: Bearer $(cat /var/lib/cairn/admin.key)" http://127.0.0.1:8080/web/hello.txt
systemctl stop cairn
systemctl show -p Result -p ExecMainStatus cairn
findmnt /srv/www >/dev/null && echo "still mounted" || echo "unmounted"
ls -A /srv/www | wc -l`)
	for _, want := range []string{"fuse.cairn", "allow_other", "hello\n", "Result=success", "ExecMainStatus=0", "unmounted\n0\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("the mount under systemd: lacks %q:\n%s", want, got)
		}
	}
}

// packageWatchdog: with a short WatchdogSec the node's pings keep it
// running (systemd records each), and a node that stops answering (here
// stopped outright, SIGSTOP) is killed and restarted by the watchdog,
// mount and all.
func packageWatchdog(t *testing.T, c *container) {
	c.mustRun(t, time.Minute, `printf '[Service]\nWatchdogSec=2s\nTimeoutAbortSec=2s\nRestartSec=1s\n' > /etc/systemd/system/cairn.service.d/test-watchdog.conf
systemctl daemon-reload
systemctl start cairn`)
	prop := func(p string) string {
		return strings.TrimSpace(c.mustRun(t, 10*time.Second, "systemctl show -P "+p+" cairn"))
	}
	pid := prop("MainPID")
	seen := map[string]bool{}
	waitUntil(t, 20*time.Second, "three watchdog pings", func() bool {
		seen[prop("WatchdogTimestampMonotonic")] = true
		return len(seen) >= 4 // the start's, then three pings
	})
	if n, p := prop("NRestarts"), prop("MainPID"); n != "0" || p != pid {
		t.Fatalf("a node that pings was restarted: NRestarts=%s, MainPID %s then %s", n, pid, p)
	}
	c.mustRun(t, 10*time.Second, "kill -STOP "+pid)
	waitUntil(t, 30*time.Second, "the watchdog's restart", func() bool {
		return prop("NRestarts") == "1" && prop("ActiveState") == "active" && prop("MainPID") != pid
	})
	got := c.mustRun(t, time.Minute, `journalctl -u cairn --no-pager | grep -c 'Watchdog timeout' || true
grep -q '"GET /_cairn/health HTTP/1.1" 200 .*"cairn-watchdog"' /var/log/cairn/access.log && echo "checks in the access log"
findmnt -n -o FSTYPE /srv/www
systemctl stop cairn
rm /etc/systemd/system/cairn.service.d/test-watchdog.conf
systemctl daemon-reload`)
	if !strings.Contains(got, "fuse.cairn") || strings.HasPrefix(got, "0\n") || !strings.Contains(got, "checks in the access log") {
		t.Errorf("after the watchdog's restart: want a 'Watchdog timeout' in the journal, the liveness checks in the access log and the mount back:\n%s", got)
	}
}

// waitUntil polls cond every 200 ms for at most bound.
func waitUntil(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", bound, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// readmePackageScript is the README's "package" block with the .deb's
// path in the container, sudo as the identity (the test is root) and a
// curl that fails on an error status and does not retry: the block runs
// right after `systemctl enable --now`, which must return only once the
// node serves.
func readmePackageScript(t *testing.T) string {
	t.Helper()
	block := readmeBlock(t, "package")
	// Before the first start: the install enabled and started nothing.
	subst := []string{"./dist/cairn_*_amd64.deb", "/pkg/cairn_*.deb",
		"sudo systemctl enable --now cairn", "echo \"installed: $(systemctl is-enabled cairn || true) $(systemctl is-active cairn || true)\"\nsudo systemctl enable --now cairn"}
	for i := 0; i < len(subst); i += 2 {
		if !strings.Contains(block, subst[i]) {
			t.Fatalf("the README's package block no longer contains %q; update package_test.go:\n%s", subst[i], block)
		}
	}
	return "set -euo pipefail\nsudo() { \"$@\"; }\ncurl() { command curl -fsS \"$@\"; echo; }\nexport DEBIAN_FRONTEND=noninteractive\n" +
		strings.NewReplacer(subst...).Replace(block)
}

// makePackage runs `make package` into dist and returns the .deb and the .rpm.
func makePackage(t *testing.T, dist string) (deb, rpm string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "package", "DIST="+dist)
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make package: %v\n%s", err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(dist, "cairn_*.deb"))
	rpms, _ := filepath.Glob(filepath.Join(dist, "cairn-*.rpm"))
	if len(debs) != 1 || len(rpms) != 1 {
		t.Fatalf("make package made %q and %q: want one .deb and one .rpm", debs, rpms)
	}
	return debs[0], rpms[0]
}

// checkVersion: the .deb's version is the binary's release, a
// pre-release (0.22.0-dev) as 0.22.0~dev.COMMIT-TIME+gCOMMIT, which sorts
// before the release and orders dev builds by commit time.
func checkVersion(t *testing.T, deb string) {
	t.Helper()
	out, err := exec.Command(cairnBin, "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ Release string }
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	version := strings.Split(filepath.Base(deb), "_")[1]
	want := regexp.QuoteMeta(v.Release) + "$"
	if core, pre, ok := strings.Cut(v.Release, "-"); ok {
		want = regexp.QuoteMeta(core+"~"+pre) + `\.\d{14}\+g` + headCommit(t) + `(\.dirty)?$`
	}
	if !regexp.MustCompile("^" + want).MatchString(version) {
		t.Errorf("package version %q for release %q: want %s", version, v.Release, want)
	}
}

// checkRPM reads the .rpm: same version as the .deb, the files, the
// config file marked noreplace, the scripts that make the user with
// useradd, and shadow-utils required.
func checkRPM(t *testing.T, rpm, deb string) {
	t.Helper()
	q := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("rpm", append([]string{"-qp"}, append(args, rpm)...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("rpm -qp %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	debVersion := strings.Split(strings.TrimSuffix(filepath.Base(deb), ".deb"), "_")[1]
	if v := q("--qf", "%{VERSION}"); v != debVersion {
		t.Errorf("rpm version %q, deb version %q", v, debVersion)
	}
	files := q("--qf", "[%{FILEMODES:perms} %{FILEUSERNAME}:%{FILEGROUPNAME} %{FILEFLAGS:fflags} %{FILENAMES}\n]")
	for _, want := range []string{"-rwxr-xr-x root:root  /usr/bin/cairn", "-rw-r--r-- root:root cn /etc/cairn/cairn.toml",
		" /usr/lib/systemd/system/cairn.service", " /usr/share/zsh/site-functions/_cairn", " /usr/share/man/man1/cairn-server.1.gz"} {
		if !strings.Contains(files, want) {
			t.Errorf("rpm files: lacks %q:\n%s", want, files)
		}
	}
	if s := q("--scripts"); !strings.Contains(s, "useradd --system") || !strings.Contains(s, "postuninstall scriptlet") {
		t.Errorf("rpm scripts:\n%s", s)
	}
	if r := q("--requires"); !strings.Contains(r, "shadow-utils") {
		t.Errorf("rpm requires:\n%s", r)
	}
}

// headCommit is the repository's HEAD, as `cairn version` shows it (12
// hex digits, the package being built from the work tree).
func headCommit(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "-C", repoRoot(t), "rev-parse", "HEAD").Output()
	if err != nil || len(out) < 12 {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	return string(out[:12])
}

func lookTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} { // not on a user's PATH
		if p := filepath.Join(dir, name); isExec(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// debianRoot returns the cached Debian root, making it with debootstrap
// when it is missing (under a lock: parallel runs wait for one another).
func debianRoot(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("CAIRN_TEST_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		cache = filepath.Join(home, ".cache", "cairn-test")
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(pkgSuite + " minbase " + strings.Join(pkgIncludes, ",")))
	name := pkgSuite + "-" + hex.EncodeToString(sum[:6])
	dir := filepath.Join(cache, name)
	lock, err := os.OpenFile(filepath.Join(cache, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(filepath.Join(dir, ".cairn-test-root")); err == nil {
		return dir
	}
	// Roots made for another package list are not used again.
	if old, _ := filepath.Glob(filepath.Join(cache, pkgSuite+"-*")); len(old) > 0 {
		for _, o := range old {
			os.RemoveAll(o)
		}
	}
	mirror := debianMirror()
	tmp := dir + ".tmp"
	debootstrap, _ := lookTool("debootstrap")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, debootstrap, "--variant=minbase", "--include="+strings.Join(pkgIncludes, ","), pkgSuite, tmp, mirror)
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		msg := fmt.Sprintf("debootstrap %s from %s (CAIRN_TEST_DEBIAN_MIRROR sets another mirror): %v\n%s", pkgSuite, mirror, err, tail(out, 30))
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("package test: cannot make the Debian root: " + msg)
	}
	if err := os.WriteFile(filepath.Join(tmp, ".cairn-test-root"), []byte(mirror+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
	t.Logf("made the Debian root %s from %s in %v", dir, mirror, time.Since(start).Round(time.Second))
	return dir
}

// debianMirror is $CAIRN_TEST_DEBIAN_MIRROR, or the first Debian archive
// (not the security one) in the machine's apt sources, or Debian's CDN.
func debianMirror() string {
	if m := os.Getenv("CAIRN_TEST_DEBIAN_MIRROR"); m != "" {
		return m
	}
	files, _ := filepath.Glob("/etc/apt/sources.list.d/*")
	files = append([]string{"/etc/apt/sources.list"}, files...)
	uri := regexp.MustCompile(`(?:^deb(?:\s+\[[^]]*\])?\s+|^URIs:\s*)(https?://\S+/debian)/?(?:\s|$)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if m := uri.FindStringSubmatch(strings.TrimSpace(sc.Text())); m != nil {
				return m[1]
			}
		}
	}
	return "http://deb.debian.org/debian"
}

func tail(b []byte, lines int) string {
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(ls[max(0, len(ls)-lines):], "\n")
}

// container is a Debian root booted by systemd-nspawn, systemd its PID 1,
// on an overlay of the cached root, with loopback as its only network
// and /dev/fuse.
type container struct {
	nspawn  *exec.Cmd
	pid1    int
	console *lockedBuffer
}

// bootContainer boots an overlay of lower with dist at /pkg (read-only),
// and waits for systemd to finish booting. Its cleanup shuts it down and
// removes the overlay.
func bootContainer(t *testing.T, lower, dist string) *container {
	t.Helper()
	dir := t.TempDir()
	upper, work, merged := filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "root")
	for _, d := range []string{upper, work, merged} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mount("overlay", merged, "overlay", 0, "lowerdir="+lower+",upperdir="+upper+",workdir="+work); err != nil {
		t.Skip("package test: this machine cannot mount an overlay file system:", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(merged, 0); err != nil {
			t.Logf("unmount %s: %v; detaching it", merged, err)
			syscall.Unmount(merged, syscall.MNT_DETACH)
		}
	})
	nspawn, _ := lookTool("systemd-nspawn")
	c := &container{console: &lockedBuffer{}}
	// --register=no, --keep-unit: no systemd (machined, a bus) needed on
	// this machine.
	c.nspawn = exec.Command(nspawn, "--quiet", "--register=no", "--keep-unit", "--console=pipe",
		"--private-network", "--bind=/dev/fuse", "--bind-ro="+dist+":/pkg",
		"--machine=cairn-test-"+strconv.Itoa(os.Getpid()), "-D", merged, "-b")
	c.nspawn.Stdout, c.nspawn.Stderr = c.console, c.console
	// If this test process dies, the container shuts down.
	c.nspawn.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := c.nspawn.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.nspawn.Wait() }()
	t.Cleanup(func() {
		// SIGTERM: nspawn asks the container's systemd to power off.
		c.nspawn.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			t.Logf("the container did not power off in 60 s; killing it")
			c.nspawn.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("container console:\n%s", tail([]byte(c.console.String()), 60))
		}
	})
	self, _ := os.Readlink("/proc/self/ns/pid")
	deadline := time.Now().Add(30 * time.Second)
	for c.pid1 == 0 {
		select {
		case err := <-exited:
			t.Fatalf("systemd-nspawn exited: %v\n%s", err, c.console)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no systemd in the container after 30 s:\n%s", c.console)
		}
		children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", c.nspawn.Process.Pid, c.nspawn.Process.Pid))
		for _, f := range strings.Fields(string(children)) {
			pid, _ := strconv.Atoi(f)
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
			if strings.TrimSpace(string(comm)) == "systemd" && ns != "" && ns != self {
				c.pid1 = pid
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Wait for the boot to finish (running, or degraded: some unit of a
	// minimal root in a container may fail, which does not matter here).
	var state string
	waitUntil(t, 60*time.Second, "the container's boot", func() bool {
		out, _ := c.run(30*time.Second, "systemctl is-system-running --wait")
		state = strings.TrimSpace(out)
		return state == "running" || state == "degraded"
	})
	if state == "degraded" {
		failed, _ := c.run(10*time.Second, "systemctl --failed --no-legend --no-pager")
		t.Logf("the container booted degraded: %s", failed)
	}
	return c
}

// run runs a bash script as root in the container's namespaces, with a
// clean environment, and returns its output (stdout and stderr).
func (c *container) run(timeout time.Duration, script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	nsenter, _ := lookTool("nsenter")
	cmd := exec.CommandContext(ctx, nsenter, "-t", strconv.Itoa(c.pid1), "-a",
		"env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8", "TERM=dumb",
		"bash", "-c", script)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = errors.Join(err, fmt.Errorf("timed out after %v", timeout))
	}
	return string(out), err
}

// mustRun is run, failing the test on an error.
func (c *container) mustRun(t *testing.T, timeout time.Duration, script string) string {
	t.Helper()
	out, err := c.run(timeout, script)
	if err != nil {
		log, _ := c.run(10*time.Second, "journalctl -u cairn --no-pager -n 40")
		t.Fatalf("in the container: %v\n--- script:\n%s\n--- output:\n%s\n--- journal of cairn.service:\n%s", err, script, out, log)
	}
	return out
}
