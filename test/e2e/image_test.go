package e2e

import (
	"context"
	"encoding/json"
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

// dockerfile is the Dockerfile's instructions, continuation lines joined
// and comments dropped, in order.
func dockerfile(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var ins []string
	cur := ""
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur == "") {
			continue
		}
		cur += " " + strings.TrimSuffix(trimmed, "\\")
		if !strings.HasSuffix(trimmed, "\\") {
			ins = append(ins, strings.Join(strings.Fields(cur), " "))
			cur = ""
		}
	}
	return ins
}

// TestDockerfile checks, without building it (no container daemon is
// needed), that the Dockerfile refers to what exists: the Go version of
// go.mod, the files it copies, the command it builds, the variable the
// commit is stamped into, the binary's path from stage to stage and to
// the entry point, real CAIRN_* settings, a volume and ports that match
// them, and the README's `docker run` lines. `make image-test` builds and
// runs the image.
func TestDockerfile(t *testing.T) {
	root := repoRoot(t)
	ins := dockerfile(t)
	find := func(re string) []string {
		t.Helper()
		rx := regexp.MustCompile(re)
		for _, in := range ins {
			if m := rx.FindStringSubmatch(in); m != nil {
				return m
			}
		}
		t.Fatalf("Dockerfile: no instruction matches %s:\n%s", re, strings.Join(ins, "\n"))
		return nil
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := ""
	if m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(gomod); m != nil {
		goVersion = string(m[1])
	}
	if m := find(`^ARG GO_VERSION=(\S+)$`); m[1] != goVersion {
		t.Errorf("Dockerfile builds with Go %s, go.mod says %q", m[1], goVersion)
	}
	var froms []string
	for _, in := range ins {
		if strings.HasPrefix(in, "FROM ") {
			froms = append(froms, in)
		}
	}
	if len(froms) != 2 || froms[0] != "FROM golang:${GO_VERSION}-bookworm AS build" || froms[1] != "FROM debian:bookworm-slim" {
		t.Errorf("Dockerfile stages: %q; want the Go build stage, then debian:bookworm-slim", froms)
	}
	for _, f := range strings.Fields(find(`^COPY (go\.mod go\.sum) \./$`)[1]) {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("Dockerfile copies %s: %v", f, err)
		}
	}
	build := find(`^RUN CGO_ENABLED=0 go build -trimpath -ldflags "-X ([^=]+)=\$\{COMMIT\}" -o (\S+) (\S+) && (\S+) version$`)
	variable, out, pkg, check := build[1], build[2], build[3], build[4]
	if pkg != "./cmd/cairn" || check != out {
		t.Errorf("Dockerfile builds %s into %s and runs %s", pkg, out, check)
	}
	if main, err := os.ReadFile(filepath.Join(root, pkg, "main.go")); err != nil || !strings.Contains(string(main), "package main") {
		t.Errorf("Dockerfile builds %s: not a main package (%v)", pkg, err)
	}
	const versionPkg = "github.com/cairn-fs/cairn/internal/version."
	src, err := os.ReadFile(filepath.Join(root, "internal/version/version.go"))
	if !strings.HasPrefix(variable, versionPkg) || err != nil ||
		!regexp.MustCompile(`(?m)^var .*\b`+regexp.QuoteMeta(strings.TrimPrefix(variable, versionPkg))+`\b.* string$`).Match(src) {
		t.Errorf("Dockerfile stamps the commit into %s: no such string variable in internal/version (%v)", variable, err)
	}
	if m := find(`^COPY --from=build (\S+) (\S+)$`); m[1] != out {
		t.Errorf("the runtime stage copies %s, the build stage writes %s", m[1], out)
	} else if ep := find(`^ENTRYPOINT \["([^"]+)", "server"\]$`); ep[1] != m[2] {
		t.Errorf("ENTRYPOINT runs %s, the binary is copied to %s", ep[1], m[2])
	}
	help, err := exec.Command(cairnBin, "server", "--help").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	env := find(`^ENV (.*)$`)[1]
	vals := map[string]string{}
	for _, kv := range strings.Fields(env) {
		k, v, _ := strings.Cut(kv, "=")
		vals[k] = v
		if !strings.Contains(string(help), "(env "+k+")") {
			t.Errorf("Dockerfile sets %s: not a setting of cairn server", k)
		}
	}
	if v := find(`^VOLUME (\S+)$`)[1]; v != vals["CAIRN_DATA"] || v == "" {
		t.Errorf("VOLUME %s, CAIRN_DATA %s", v, vals["CAIRN_DATA"])
	}
	_, port, _ := strings.Cut(vals["CAIRN_LISTEN"], ":")
	p, _ := strconv.Atoi(port)
	if e := find(`^EXPOSE (.*)$`)[1]; p == 0 || e != fmt.Sprintf("%d %d %d/udp", p, p+100, p+100) {
		t.Errorf("EXPOSE %s for CAIRN_LISTEN %s (and its gossip port, +100)", e, vals["CAIRN_LISTEN"])
	}
	if h := find(`^HEALTHCHECK .* CMD curl -fsS (\S+) \|\| exit 1$`)[1]; h != "http://127.0.0.1:"+port+"/_cairn/health" {
		t.Errorf("HEALTHCHECK asks %s", h)
	}
	ignore, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".git", "bin", "dist", "data"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `$`).Match(ignore) {
			t.Errorf(".dockerignore does not leave out %s", want)
		}
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	run := regexp.MustCompile(`(?m)^docker run .*(?:\\\n.*)*`).FindAll(readme, -1)
	if len(run) < 2 {
		t.Fatalf("README.md shows %d docker run commands; want a node and a node with a mount", len(run))
	}
	for _, want := range []string{"-v cairn-data:" + vals["CAIRN_DATA"], "--device /dev/fuse", "--cap-add SYS_ADMIN", "CAIRN_MOUNT="} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README.md's docker run lines lack %q", want)
		}
	}
}

// TestImage builds the image with buildah (no daemon; chroot isolation)
// and runs it as `docker run --device /dev/fuse --cap-add SYS_ADMIN -v
// DATA:/var/lib/cairn -e CAIRN_MOUNT=...` would, under systemd-nspawn (the
// entry point as PID 1, default capabilities, which include
// CAP_SYS_ADMIN): health, the HEALTHCHECK's own command, a file written
// through the mount and read over HTTP, and a clean exit on SIGTERM.
// 3-4 minutes (the build compiles Cairn from scratch): `make
// image-test` (part of `make soak`) sets CAIRN_IMAGE_TEST=1; `make test`
// does not run it.
//
// The base images come from the registry when it can be reached; on a
// machine that reaches only package registries they are stood in for by
// the package test's Debian root (debian:bookworm-slim) and that root
// plus this machine's Go and CA bundle (golang:VERSION-bookworm), which
// the test says.
func TestImage(t *testing.T) {
	if os.Getenv("CAIRN_IMAGE_TEST") != "1" {
		t.Skip("image test: builds and runs the container image (3 minutes): make image-test")
	}
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Fatal("image test: needs Linux and root (buildah, systemd-nspawn, a FUSE mount)")
	}
	for _, tool := range []string{"buildah", "systemd-nspawn", "nsenter", "git"} {
		if _, err := lookTool(tool); err != nil {
			t.Fatalf("image test: %s not installed (make image-test installs buildah and systemd-container as root)", tool)
		}
	}
	root := repoRoot(t)
	goVersion := ""
	for _, in := range dockerfile(t) {
		if v, ok := strings.CutPrefix(in, "ARG GO_VERSION="); ok {
			goVersion = v
		}
	}
	golang, debian := "docker.io/library/golang:"+goVersion+"-bookworm", "docker.io/library/debian:bookworm-slim"
	bah := func(timeout time.Duration, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		out, err := exec.CommandContext(ctx, "buildah", args...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	must := func(timeout time.Duration, args ...string) string {
		t.Helper()
		out, err := bah(timeout, args...)
		if err != nil {
			t.Fatalf("buildah %s: %v\n%s", strings.Join(args, " "), err, tail([]byte(out), 40))
		}
		return out
	}
	var made []string // images this test made, removed at the end
	t.Cleanup(func() {
		for _, img := range made {
			bah(time.Minute, "rmi", "-f", img)
		}
	})
	_, errG := bah(3*time.Minute, "pull", "--quiet", golang)
	_, errD := bah(3*time.Minute, "pull", "--quiet", debian)
	if errG != nil || errD != nil {
		t.Logf("the registry cannot be reached (%v; %v): standing in for %s and %s with the package test's Debian root", errG, errD, golang, debian)
		lower := debianRoot(t)
		goroot, err := exec.Command("go", "env", "GOROOT").Output()
		if err != nil {
			t.Fatal(err)
		}
		standIn := func(name string, extra func(rootfs string)) {
			c := must(time.Minute, "from", "scratch")
			defer bah(time.Minute, "rm", c)
			m := must(time.Minute, "mount", c)
			if out, err := exec.Command("cp", "-a", lower+"/.", m+"/").CombinedOutput(); err != nil {
				t.Fatalf("cp: %v\n%s", err, out)
			}
			extra(m)
			must(time.Minute, "umount", c)
			must(time.Minute, "config", "--env", "PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "--env", "GOTOOLCHAIN=local", c)
			must(5*time.Minute, "commit", "--quiet", c, name)
			made = append(made, name)
		}
		standIn(debian, func(string) {})
		standIn(golang, func(m string) {
			// This machine's Go, and its CA bundle (a proxy in the way of
			// the Go module proxy may present its own CA).
			if out, err := exec.Command("cp", "-a", strings.TrimSpace(string(goroot)), m+"/usr/local/go").CombinedOutput(); err != nil {
				t.Fatalf("cp GOROOT: %v\n%s", err, out)
			}
			if out, err := exec.Command("cp", "/etc/ssl/certs/ca-certificates.crt", m+"/etc/ssl/certs/ca-certificates.crt").CombinedOutput(); err != nil {
				t.Fatalf("cp CA bundle: %v\n%s", err, out)
			}
		})
	}
	commit, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	const image = "localhost/cairn:image-test"
	start := time.Now()
	must(15*time.Minute, "bud", "--format", "docker", "--pull=never", "--isolation", "chroot", "--layers=false",
		"--build-arg", "COMMIT="+strings.TrimSpace(string(commit)), "-t", image, root)
	made = append(made, image)
	t.Logf("image built in %v", time.Since(start).Round(time.Second))

	var inspect struct {
		Docker struct {
			Config struct {
				Env         []string
				Entrypoint  []string
				Healthcheck struct{ Test []string }
			} `json:"config"`
		}
	}
	if err := json.Unmarshal([]byte(must(time.Minute, "inspect", "--type", "image", image)), &inspect); err != nil {
		t.Fatal(err)
	}
	cfg := inspect.Docker
	if len(cfg.Config.Healthcheck.Test) != 2 || cfg.Config.Healthcheck.Test[0] != "CMD-SHELL" {
		t.Fatalf("image HEALTHCHECK: %q", cfg.Config.Healthcheck.Test)
	}
	c := must(time.Minute, "from", image)
	t.Cleanup(func() { bah(time.Minute, "rm", c) })
	rootfs := must(time.Minute, "mount", c)
	data := t.TempDir()
	const key = "image-test-admin-key-0123456789"
	args := []string{"--quiet", "--register=no", "--keep-unit", "--private-network", "--kill-signal=SIGTERM",
		"--bind=/dev/fuse", "--bind=" + data + ":/var/lib/cairn", "--machine=cairn-image-" + strconv.Itoa(os.Getpid()), "-D", rootfs}
	for _, e := range append(cfg.Config.Env, "CAIRN_ADMIN_KEY="+key, "CAIRN_MOUNT=web:/mnt/web") {
		args = append(args, "--setenv="+e)
	}
	nspawn, _ := lookTool("systemd-nspawn")
	run := exec.Command(nspawn, append(args, cfg.Config.Entrypoint...)...)
	logs := &lockedBuffer{}
	run.Stdout, run.Stderr = logs, logs
	run.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	t.Cleanup(func() {
		run.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			run.Process.Kill()
		}
	})
	self, _ := os.Readlink("/proc/self/ns/pid")
	pid := 0
	waitUntil(t, 30*time.Second, "the node in the container", func() bool {
		children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", run.Process.Pid, run.Process.Pid))
		for _, f := range strings.Fields(string(children)) {
			p, _ := strconv.Atoi(f)
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p))
			ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p))
			if strings.TrimSpace(string(comm)) == "cairn" && ns != "" && ns != self {
				pid = p
			}
		}
		return pid != 0
	})
	in := func(script string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "nsenter", "-t", strconv.Itoa(pid), "-a", "sh", "-c", script).CombinedOutput()
		return string(out), err
	}
	waitUntil(t, 60*time.Second, "the node's health in the container", func() bool {
		_, err := in(cfg.Config.Healthcheck.Test[1]) // the image's own HEALTHCHECK
		return err == nil
	})
	out, err := in(`findmnt -n -o FSTYPE /mnt/web
echo hello > /mnt/web/hello.txt && sync /mnt/web
curl -fsS -H "Authorization: Bearer ` + key + `" http://127.0.0.1:8080/web/hello.txt
/usr/bin/cairn version`)
	if err != nil || !strings.Contains(out, "fuse.cairn\n") || !strings.Contains(out, "hello\n") || !strings.Contains(out, "commit "+string(commit[:12])) {
		t.Fatalf("in the container: %v\n%s\nnode:\n%s", err, out, logs)
	}
	run.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the node exited with %v on SIGTERM:\n%s", err, logs)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the node did not stop within 60 s of SIGTERM:\n%s", logs)
	}
	for _, d := range []string{"blobs", "meta"} {
		if _, err := os.Stat(filepath.Join(data, d)); err != nil {
			t.Errorf("the data volume has no %s: %v", d, err)
		}
	}
}
