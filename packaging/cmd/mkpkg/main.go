// Command mkpkg builds Cairn's .deb and .rpm with nfpm (packaging/nfpm.yaml),
// from a static cairn binary: `make package` runs it.
//
//	go run ./cmd/mkpkg -bin BIN [-gen GENBIN] [-arch ARCH] [-out DIR] [-formats deb,rpm]
//
// It asks the binary for its version (`cairn version --json`) and makes,
// with a binary that runs here (-gen, by default -bin), the shell
// completions (`cairn completion bash|zsh|fish`) and the man pages
// (`cairn gen-man`), gzipped. The package version is the release's: a
// pre-release such as 0.22.0-dev gets the commit's time and hash,
// 0.22.0~dev.20261127083000+g0123456789ab, so that a later dev build
// upgrades an earlier one (and a release, 0.22.0, upgrades both). The
// commit's time is also SOURCE_DATE_EPOCH, the date of the pages and of
// the files in the package, so the same commit makes the same package.
//
// It lives in its own module (packaging/go.mod) so that nfpm's
// dependencies stay out of the server's go.mod.
package main

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mkpkg:", err)
		os.Exit(1)
	}
}

func run() error {
	bin := flag.String("bin", "", "the static cairn binary to package (required)")
	gen := flag.String("gen", "", "a cairn binary of the same source that runs on this machine, to make the completions and man pages (default: -bin)")
	arch := flag.String("arch", runtime.GOARCH, "GOARCH of -bin")
	out := flag.String("out", "dist", "output directory")
	formats := flag.String("formats", "deb,rpm", "comma-separated package formats")
	flag.Parse()
	if *bin == "" || flag.NArg() != 0 {
		flag.Usage()
		return errors.New("-bin is required, and no arguments")
	}
	if *gen == "" {
		*gen = *bin
	}
	src, err := os.Getwd() // go run ./cmd/mkpkg from packaging/, as make package does
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(src, "nfpm.yaml")); err != nil {
		return fmt.Errorf("run from the packaging directory: %w", err)
	}
	absBin, err := filepath.Abs(*bin)
	if err != nil {
		return err
	}
	if err := checkStatic(absBin); err != nil {
		return err
	}
	v, err := binaryVersion(*gen)
	if err != nil {
		return err
	}
	epoch, err := commitTime(src, v.Commit)
	if err != nil {
		return err
	}
	version, err := packageVersion(v, epoch)
	if err != nil {
		return err
	}
	if !epoch.IsZero() {
		os.Setenv("SOURCE_DATE_EPOCH", strconv.FormatInt(epoch.Unix(), 10))
	}
	stage, err := os.MkdirTemp("", "cairn-pkg-stage")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	if err := generate(*gen, stage); err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	vars := map[string]string{"CAIRN_BIN": absBin, "VERSION": version, "ARCH": *arch, "STAGE": stage}
	// Only these variables: nothing of the environment gets into a package.
	cfg, err := nfpm.ParseFileWithEnvMapping(filepath.Join(src, "nfpm.yaml"), func(k string) string { return vars[k] })
	if err != nil {
		return fmt.Errorf("nfpm.yaml: %w", err)
	}
	for f := range strings.SplitSeq(*formats, ",") {
		path, err := build(&cfg, f, *out)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		fmt.Println(path)
	}
	return nil
}

// versionInfo is what `cairn version --json` says of the build.
type versionInfo struct {
	Release  string `json:"release"`
	Commit   string `json:"commit"`
	Modified bool   `json:"modified"`
}

func binaryVersion(bin string) (versionInfo, error) {
	var v versionInfo
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		return v, fmt.Errorf("%s version --json: %w", bin, exitErr(err))
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return v, fmt.Errorf("%s version --json: %w", bin, err)
	}
	if v.Release == "" {
		return v, fmt.Errorf("%s version --json: no release", bin)
	}
	return v, nil
}

// commitTime is the commit's time from git, or zero when the binary has
// no commit (a plain go build) or git does not know it.
func commitTime(dir, commit string) (time.Time, error) {
	if commit == "" || commit == "unknown" {
		return time.Time{}, nil
	}
	out, err := exec.Command("git", "-C", dir, "show", "-s", "--format=%ct", commit).Output()
	if err != nil {
		return time.Time{}, nil // not a git checkout of this commit: no time
	}
	sec, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("git show %s: %q is not a time", commit, out)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// packageVersion is the semver nfpm turns into the deb and rpm versions:
// the release as it is, or for a pre-release (a '-' in it) the release
// with the commit's time appended to the pre-release and its hash as
// build metadata.
func packageVersion(v versionInfo, t time.Time) (string, error) {
	rel := strings.TrimPrefix(v.Release, "v")
	core, pre, isPre := strings.Cut(rel, "-")
	if strings.Count(core, ".") != 2 || strings.ContainsAny(core, "+~ ") {
		return "", fmt.Errorf("release %q is not MAJOR.MINOR.PATCH[-PRERELEASE]", v.Release)
	}
	if !isPre {
		return rel, nil
	}
	if !t.IsZero() {
		pre += "." + t.Format("20060102150405")
	}
	var meta []string
	if v.Commit != "" && v.Commit != "unknown" {
		meta = append(meta, "g"+v.Commit[:min(12, len(v.Commit))])
	}
	if v.Modified {
		meta = append(meta, "dirty")
	}
	s := core + "-" + pre
	if len(meta) > 0 {
		s += "+" + strings.Join(meta, ".")
	}
	return s, nil
}

// generate writes, under stage, completions/{cairn.bash,_cairn,cairn.fish}
// and man1/*.1.gz.
func generate(bin, stage string) error {
	comp := filepath.Join(stage, "completions")
	if err := os.MkdirAll(comp, 0o755); err != nil {
		return err
	}
	for shell, name := range map[string]string{"bash": "cairn.bash", "zsh": "_cairn", "fish": "cairn.fish"} {
		out, err := exec.Command(bin, "completion", shell).Output()
		if err != nil {
			return fmt.Errorf("%s completion %s: %w", bin, shell, exitErr(err))
		}
		if len(out) == 0 {
			return fmt.Errorf("%s completion %s: empty", bin, shell)
		}
		if err := os.WriteFile(filepath.Join(comp, name), out, 0o644); err != nil {
			return err
		}
	}
	raw := filepath.Join(stage, "man-raw")
	if out, err := exec.Command(bin, "gen-man", raw).CombinedOutput(); err != nil {
		return fmt.Errorf("%s gen-man: %w: %s", bin, err, out)
	}
	pages, err := filepath.Glob(filepath.Join(raw, "*.1"))
	if err != nil || len(pages) == 0 {
		return fmt.Errorf("%s gen-man wrote no page (%v)", bin, err)
	}
	man := filepath.Join(stage, "man1")
	if err := os.MkdirAll(man, 0o755); err != nil {
		return err
	}
	for _, p := range pages {
		if err := gzipFile(p, filepath.Join(man, filepath.Base(p)+".gz")); err != nil {
			return err
		}
	}
	return nil
}

// gzipFile compresses src to dst with no name and no time in the header
// (as gzip -n: Debian's policy for man pages, and reproducible).
func gzipFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(b); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(dst, buf.Bytes(), 0o644)
}

// build writes the package of format into dir and returns its path.
func build(cfg *nfpm.Config, format, dir string) (string, error) {
	pkg, err := nfpm.Get(format)
	if err != nil {
		return "", err
	}
	info, err := cfg.Get(format)
	if err != nil {
		return "", err
	}
	info = nfpm.WithDefaults(info)
	if err := nfpm.Validate(info); err != nil {
		return "", err
	}
	name := pkg.ConventionalFileName(info)
	path := filepath.Join(dir, name)
	tmp, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	info.Target = path
	if err := pkg.Package(info, tmp); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return "", err
	}
	return path, os.Rename(tmp.Name(), path)
}

// checkStatic refuses a binary that needs a dynamic loader (an ELF
// PT_INTERP header): the package promises a static one (CGO_ENABLED=0)
// that runs on any distribution.
func checkStatic(bin string) error {
	f, err := elf.Open(bin)
	if err != nil {
		return fmt.Errorf("%s: not a Linux binary: %w", bin, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked: build it with CGO_ENABLED=0", bin)
		}
	}
	return nil
}

func exitErr(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
	}
	return err
}
