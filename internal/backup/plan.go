package backup

import (
	"path"
	"sort"
	"strings"
)

// Task is one file to copy to a destination.
type Task struct {
	Path  string
	Entry Entry
	// From, when set, is a path at the destination that holds the same
	// content and stays unchanged in this run: the file is copied from
	// there (a local directory), not fetched again.
	From string
}

// Plan is what a backup run does at its destination. MakePlan computes it
// without I/O from the snapshot's files, the destination's manifest and
// journal, and its listing.
type Plan struct {
	// Copy: files the destination does not hold (new, changed, or gone
	// from the destination), by path.
	Copy []Task
	// Check: files present with the right size whose content is not
	// known (a path an unfinished run may have changed, or one the
	// manifest does not name): Location.Holds decides between Same and
	// Copy.
	Check []Task
	// Same: files the destination holds.
	Same []string
	// Touch: held files whose mode or mtime differ from the manifest's
	// (Location.SetMeta); a subset of Same.
	Touch []string
	// Delete: files an earlier run put there that the snapshot no longer
	// has.
	Delete []string
	// Foreign: files at the destination that no run put there and the
	// snapshot does not have: left alone.
	Foreign []string
}

// MakePlan compares the snapshot's files (snap) with what the destination
// holds: its listing (inv), its last manifest (old, nil for none) and the
// paths of unfinished runs (pending). A file is held when:
//
//   - the listing gives its SHA-256 (a Cairn destination) and it is the
//     snapshot's; or else
//   - the manifest names it with the snapshot's SHA-256, the path is not
//     pending, and the size listed is the manifest's.
//
// A present file of the right size that neither decides goes to Check
// (pending paths, or paths the manifest does not name); any other goes to
// Copy. Delete holds the paths of the manifest and the journal that the
// snapshot lacks and the listing shows. Every list is sorted.
func MakePlan(snap map[string]Entry, old *Manifest, pending map[string]bool, inv map[string]Found) Plan {
	var pl Plan
	var known map[string]Entry
	if old != nil {
		known = old.Files
	}
	for p, e := range snap {
		f, present := inv[p]
		m, inManifest := known[p]
		switch {
		case !present:
			pl.Copy = append(pl.Copy, Task{Path: p, Entry: e})
		case f.SHA256 != "":
			if f.SHA256 == e.SHA256 && e.SHA256 != "" && f.Size == e.Size {
				pl.Same = append(pl.Same, p)
			} else {
				pl.Copy = append(pl.Copy, Task{Path: p, Entry: e})
			}
		case f.Size != e.Size:
			pl.Copy = append(pl.Copy, Task{Path: p, Entry: e})
		case inManifest && !pending[p] && e.SHA256 != "":
			if m.SHA256 != e.SHA256 {
				pl.Copy = append(pl.Copy, Task{Path: p, Entry: e})
				break
			}
			pl.Same = append(pl.Same, p)
			if m.Mode != e.Mode || !m.Mtime.Equal(e.Mtime) {
				pl.Touch = append(pl.Touch, p)
			}
		case e.SHA256 == "":
			// Nothing to compare with: copy (and learn its digest).
			pl.Copy = append(pl.Copy, Task{Path: p, Entry: e})
		default:
			pl.Check = append(pl.Check, Task{Path: p, Entry: e})
		}
	}
	gone := func(p string) bool {
		_, inSnap := snap[p]
		_, present := inv[p]
		return !inSnap && present
	}
	for p := range known {
		if gone(p) {
			pl.Delete = append(pl.Delete, p)
		}
	}
	for p := range pending {
		if _, dup := known[p]; !dup && gone(p) {
			pl.Delete = append(pl.Delete, p)
		}
	}
	for p := range inv {
		_, inSnap := snap[p]
		_, inManifest := known[p]
		if !inSnap && !inManifest && !pending[p] {
			pl.Foreign = append(pl.Foreign, p)
		}
	}
	byPath := func(ts []Task) { sort.Slice(ts, func(i, j int) bool { return ts[i].Path < ts[j].Path }) }
	byPath(pl.Copy)
	byPath(pl.Check)
	sort.Strings(pl.Same)
	sort.Strings(pl.Touch)
	sort.Strings(pl.Delete)
	sort.Strings(pl.Foreign)
	return pl
}

// LocalSources sets Task.From of each task whose content the
// destination holds at a path of held (path -> SHA-256: files unchanged in
// this run, or about to be deleted after the copies), to the first such
// path. A path under a task's path is never used: that task's file
// replaces the directory holding it.
func LocalSources(copies []Task, held map[string]string) {
	targets := make(map[string]bool, len(copies))
	for _, t := range copies {
		targets[t.Path] = true
	}
	paths := make([]string, 0, len(held))
	for p := range held {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	holder := map[string]string{}
	for _, p := range paths {
		h := held[p]
		if _, ok := holder[h]; ok || h == "" || underAny(p, targets) {
			continue
		}
		holder[h] = p
	}
	for i := range copies {
		if from, ok := holder[copies[i].Entry.SHA256]; ok && copies[i].Entry.SHA256 != "" {
			copies[i].From = from
		}
	}
}

// underAny reports whether a proper ancestor of p is in set.
func underAny(p string, set map[string]bool) bool {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if set[d] {
			return true
		}
	}
	return false
}

// PruneDirs returns the directories that removing deleted may leave
// empty — their ancestors — without those the snapshot still needs (an
// ancestor of one of its files) and without any path that is a file in
// the snapshot or the listing; deepest first.
func PruneDirs(deleted []string, snap map[string]Entry, inv map[string]Found) []string {
	if len(deleted) == 0 {
		return nil
	}
	needed := map[string]bool{}
	for p := range snap {
		for d := path.Dir(p); d != "." && !needed[d]; d = path.Dir(d) {
			needed[d] = true
		}
	}
	cand := map[string]bool{}
	for _, p := range deleted {
		for d := path.Dir(p); d != "." && !cand[d]; d = path.Dir(d) {
			cand[d] = true
		}
	}
	var dirs []string
	for d := range cand {
		_, isFile := snap[d]
		_, listed := inv[d]
		if !needed[d] && !isFile && !listed {
			dirs = append(dirs, d)
		}
	}
	sort.Slice(dirs, func(i, j int) bool {
		ci, cj := strings.Count(dirs[i], "/"), strings.Count(dirs[j], "/")
		if ci != cj {
			return ci > cj
		}
		return dirs[i] < dirs[j]
	})
	return dirs
}
