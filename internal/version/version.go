package version

import (
	"runtime"
	"runtime/debug"
)

// Release is Cairn's version. A release build overrides it with
// -ldflags "-X github.com/cairn-fs/cairn/internal/version.Release=1.2.3".
var Release = "0.22.0-dev"

// commit and dirty are set by `make build` (-ldflags -X, from git), for
// builds where the Go toolchain's own VCS stamp is off (-buildvcs=false).
var commit, dirty string

// Info is what a binary knows of its own build.
type Info struct {
	Release  string `json:"release"`
	Commit   string `json:"commit"`                // git revision, "unknown" without a VCS stamp
	Time     string `json:"commit_time,omitempty"` // the commit's time (RFC 3339)
	Modified bool   `json:"modified,omitempty"`    // built from a tree with uncommitted changes
	Go       string `json:"go"`
}

// Get returns this binary's Info.
func Get() Info {
	in := Info{Release: Release, Commit: "unknown", Go: runtime.Version()}
	if commit != "" {
		in.Commit, in.Modified = commit, dirty == "true"
		return in
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return in
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Commit = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// Short is the commit's first 12 hex digits, with "+dirty" for a
// modified tree.
func (in Info) Short() string {
	c := in.Commit
	if len(c) > 12 {
		c = c[:12]
	}
	if in.Modified {
		c += "+dirty"
	}
	return c
}
