package backup

import (
	"context"
	"fmt"
	"path"
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

// planCounts counts a plan's lists.
type planCounts struct {
	copy, check, same, touch, delete, foreign int
}

// makePlan compares the snapshot's files (keySnap) with what the
// destination holds: its listing (keyInv), its last manifest (keyOld,
// when there is one: hasOld) and the paths of unfinished runs
// (keyPending). It fills keyCopy, keyCheck, keySame, keyTouch, keyDelete
// and keyForeign. A file is held when:
//
//   - the listing gives its SHA-256 (a Cairn destination) and it is the
//     snapshot's; or else
//   - the manifest names it with the snapshot's SHA-256, the path is not
//     pending, and the size listed is the manifest's.
//
// A present file of the right size that neither decides goes to Check
// (pending paths, or paths the manifest does not name); any other goes to
// Copy. Delete holds the paths of the manifest and the journal that the
// snapshot lacks and the listing shows; Foreign the listed paths none of
// them names. With verify the manifest decides nothing about the
// snapshot's files (every present file of the right size is checked),
// and still names what is the backup's to delete.
func makePlan(l *lists, hasOld, verify bool) (planCounts, error) {
	var pc planCounts
	useOld := hasOld && !verify
	err := l.eachEntry(keySnap, func(p string, e Entry, _ string) error {
		f, present, err := l.found(p)
		if err != nil {
			return err
		}
		var m Entry
		inManifest := false
		if useOld {
			if m, inManifest, err = l.entry(keyOld, p); err != nil {
				return err
			}
		}
		pending, err := l.has(keyPending, p)
		if err != nil {
			return err
		}
		space := keyCopy
		switch {
		case !present:
		case f.SHA256 != "":
			if f.SHA256 == e.SHA256 && e.SHA256 != "" && f.Size == e.Size {
				space = keySame
			}
		case f.Size != e.Size:
		case inManifest && !pending && e.SHA256 != "":
			if m.SHA256 != e.SHA256 {
				break
			}
			space = keySame
			if m.Mode != e.Mode || !m.Mtime.Equal(e.Mtime) {
				pc.touch++
				if err := l.set(keyTouch, p, nil); err != nil {
					return err
				}
			}
		case e.SHA256 == "":
			// Nothing to compare with: copy (and learn its digest).
		default:
			space = keyCheck
		}
		switch space {
		case keyCopy:
			pc.copy++
		case keySame:
			pc.same++
		case keyCheck:
			pc.check++
		}
		return l.set(space, p, encodeEntry(e, ""))
	})
	if err != nil {
		return pc, err
	}
	// gone: named by the manifest or the journal, not in the snapshot,
	// and listed.
	gone := func(p string) (bool, error) {
		if inSnap, err := l.has(keySnap, p); err != nil || inSnap {
			return false, err
		}
		return l.has(keyInv, p)
	}
	deleteIf := func(p string) error {
		if g, err := gone(p); err != nil || !g {
			return err
		}
		pc.delete++
		return l.set(keyDelete, p, nil)
	}
	if hasOld {
		if err := l.each(keyOld, func(p string, _ []byte) error { return deleteIf(p) }); err != nil {
			return pc, err
		}
	}
	err = l.each(keyPending, func(p string, _ []byte) error {
		if inOld, err := l.has(keyOld, p); err != nil || inOld {
			return err
		}
		return deleteIf(p)
	})
	if err != nil {
		return pc, err
	}
	err = l.each(keyInv, func(p string, _ []byte) error {
		for _, space := range []byte{keySnap, keyOld, keyPending} {
			if ok, err := l.has(space, p); ok || err != nil {
				return err
			}
		}
		pc.foreign++
		return l.set(keyForeign, p, nil)
	})
	return pc, err
}

// localSources sets, on each file to copy whose content the destination
// holds at another path, the first such path (in path order) to copy it
// from: a file held and unchanged in this run, or (trustOld: the manifest
// decides) one about to be deleted whose listed size is the manifest's,
// not pending. A path under a file to copy is never used: that file
// replaces the directory holding it. A file to delete that serves so is
// deleted after the copies (keyLate).
func localSources(l *lists, trustOld bool) error {
	held := func(p, sha string) error {
		if sha == "" {
			return nil
		}
		if taken, err := l.has(keyByHash, sha); err != nil || taken {
			return err
		}
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if target, err := l.has(keyCopy, d); err != nil || target {
				return err
			}
		}
		return l.set(keyByHash, sha, []byte(p))
	}
	// The candidates in path order: the held files and the deletions
	// merged (a path is in one of them only).
	err := l.eachEntry(keySame, func(p string, e Entry, _ string) error {
		return l.set(keyHeld, p, []byte(e.SHA256))
	})
	if err == nil && trustOld {
		err = l.each(keyDelete, func(p string, _ []byte) error {
			e, inOld, err := l.entry(keyOld, p)
			if err != nil || !inOld {
				return err
			}
			if pending, err := l.has(keyPending, p); err != nil || pending {
				return err
			}
			if f, _, err := l.found(p); err != nil || f.Size != e.Size {
				return err
			}
			return l.set(keyHeld, p, []byte(e.SHA256))
		})
	}
	if err == nil {
		err = l.each(keyHeld, func(p string, sha []byte) error { return held(p, string(sha)) })
	}
	if err != nil {
		return err
	}
	return l.eachEntry(keyCopy, func(p string, e Entry, _ string) error {
		if e.SHA256 == "" {
			return nil
		}
		from, ok, err := l.get(keyByHash, e.SHA256)
		if err != nil || !ok {
			return err
		}
		if err := l.set(keyCopy, p, encodeEntry(e, string(from))); err != nil {
			return err
		}
		if inSnap, err := l.has(keySnap, string(from)); err != nil || inSnap {
			return err
		}
		return l.set(keyLate, string(from), nil)
	})
}

// pruneDirs removes at dest the directories that removing the files of
// space may have left empty — their ancestors — without those the
// snapshot still needs (an ancestor of one of its files) and without any
// path that is a file in the snapshot or the listing; deepest first, a
// thousand at a time.
func pruneDirs(ctx context.Context, l *lists, space byte, dest Location) error {
	if ok, err := l.has(keyNeededDone, ""); err != nil {
		return err
	} else if !ok {
		last := ""
		if err := l.each(keySnap, func(p string, _ []byte) error { return l.markParents(keyNeeded, p, &last) }); err != nil {
			return err
		}
		if err := l.set(keyNeededDone, "", nil); err != nil {
			return err
		}
	}
	cand := keyCand
	if space == keyDeletedLate {
		cand = keyCandLate
	}
	last := ""
	if err := l.each(space, func(p string, _ []byte) error { return l.markParents(cand, p, &last) }); err != nil {
		return err
	}
	prune := keyPrune
	if space == keyDeletedLate {
		prune = keyPruneLate
	}
	err := l.each(cand, func(d string, _ []byte) error {
		for _, s := range []byte{keyNeeded, keySnap, keyInv} {
			if ok, err := l.has(s, d); ok || err != nil {
				return err
			}
		}
		return l.set(prune, fmt.Sprintf("%04d%s", 9999-strings.Count(d, "/"), d), nil)
	})
	if err != nil {
		return err
	}
	var dirs []string
	err = l.each(prune, func(k string, _ []byte) error {
		if dirs = append(dirs, k[4:]); len(dirs) == 1000 {
			dest.RemoveDirs(ctx, dirs)
			dirs = nil
		}
		return ctx.Err()
	})
	if len(dirs) > 0 && err == nil {
		dest.RemoveDirs(ctx, dirs)
	}
	return err
}
