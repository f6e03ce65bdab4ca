package backup

import (
	"encoding/binary"
	"fmt"
	"os"
	"path"
	"time"

	"github.com/cairn-fs/cairn/internal/spill"
)

// lists are a run's working lists, every one keyed by path (so iterated
// in path order): the snapshot's files, the destination's listing, its
// manifest and journal, the plan. They live in a spill.Map: in memory
// for a small tree, in a temporary Pebble database past spillAfter
// entries, so that a run's memory does not grow with the tree.
type lists struct {
	m *spill.Map
}

// spillAfter is how many entries lists keep in memory before they move
// to disk (0: spill.DefaultMemEntries). Tests lower it.
var spillAfter int

// The key spaces: a byte, then a path (or, for keyByHash, a digest).
const (
	keySnap     byte = 'S' // the snapshot's files: Entry
	keyOld      byte = 'O' // the manifest's files: Entry
	keyInv      byte = 'I' // the destination's listing: Found
	keyPending  byte = 'P' // paths of unfinished runs (the journal)
	keyCopy     byte = 'C' // files to copy: Entry, and the path to copy from
	keyCheck    byte = 'K' // files to check (Location.Holds): Entry
	keySame     byte = 'M' // files held: Entry
	keyTouch    byte = 'T' // held files whose mode or mtime to set
	keyDelete   byte = 'X' // files to remove
	keyLate     byte = 'L' // files to remove after the copies (they serve as sources)
	keyForeign  byte = 'F' // files no run put there
	keyByHash   byte = 'H' // a digest -> the first path that holds it at the destination
	keyCopied   byte = 'Y' // files copied (or restored)
	keyDeleted  byte = 'Z' // files removed
	keyNeeded   byte = 'N' // directories the snapshot needs
	keyCand     byte = 'E' // directories a removal may leave empty
	keyPrune    byte = 'R' // directories to remove: 4 digits (deepest first), then the path
	keyHashSeen byte = 'h' // digests of the snapshot's files (the manifest's count)
	keyInvDir   byte = 'D' // directories of the target's listing (restore)
	keyJournal  byte = 'J' // the new journal's paths
	keyHeld     byte = 'G' // files the destination holds, that may serve as copy sources: their digest
	keyChecked  byte = 'V' // copied files found in the listing after the copies

	keyDeletedLate byte = 'W' // files removed after the copies
	keyCandLate    byte = 'e' // as keyCand, for those
	keyPruneLate   byte = 'r' // as keyPrune, for those
	keyNeededDone  byte = 'n' // keyNeeded is filled (the key "")
	keyDiffer      byte = 'Q' // files of a restore that replace a different file
)

func newLists(dir string) *lists {
	return &lists{m: spill.New(spill.Options{Dir: dir, MemEntries: spillAfter})}
}

func (l *lists) close() { l.m.Close() }

func key(space byte, p string) []byte {
	k := make([]byte, 0, 1+len(p))
	return append(append(k, space), p...)
}

func (l *lists) set(space byte, p string, v []byte) error { return l.m.Set(key(space, p), v) }

func (l *lists) del(space byte, p string) error { return l.m.Delete(key(space, p)) }

func (l *lists) has(space byte, p string) (bool, error) { return l.m.Has(key(space, p)) }

func (l *lists) get(space byte, p string) ([]byte, bool, error) { return l.m.Get(key(space, p)) }

// entry is the Entry at p in space.
func (l *lists) entry(space byte, p string) (Entry, bool, error) {
	v, ok, err := l.get(space, p)
	if !ok || err != nil {
		return Entry{}, false, err
	}
	e, _, err := decodeEntry(v)
	return e, err == nil, err
}

// found is the destination's listing of p.
func (l *lists) found(p string) (Found, bool, error) {
	v, ok, err := l.get(keyInv, p)
	if !ok || err != nil {
		return Found{}, false, err
	}
	return decodeFound(v), true, nil
}

// each calls fn for every path of space, in order, until fn fails. fn
// may write to the lists (the scan reads them as they were).
func (l *lists) each(space byte, fn func(p string, v []byte) error) error {
	return l.m.Each([]byte{space}, func(k, v []byte) error { return fn(string(k[1:]), v) })
}

// eachEntry is each over a space of Entries.
func (l *lists) eachEntry(space byte, fn func(p string, e Entry, from string) error) error {
	return l.each(space, func(p string, v []byte) error {
		e, from, err := decodeEntry(v)
		if err != nil {
			return err
		}
		return fn(p, e, from)
	})
}

// count is the number of paths in space.
func (l *lists) count(space byte) (int, error) {
	n := 0
	err := l.each(space, func(string, []byte) error { n++; return nil })
	return n, err
}

// encodeEntry encodes e (and a path to copy it from, for keyCopy).
func encodeEntry(e Entry, from string) []byte {
	b := make([]byte, 0, 64+len(e.SHA256)+len(e.ContentType)+len(from))
	b = binary.AppendVarint(b, e.Size)
	b = binary.AppendUvarint(b, uint64(e.Mode))
	mt, _ := e.Mtime.MarshalBinary()
	b = appendString(b, string(mt))
	b = appendString(b, e.SHA256)
	b = appendString(b, e.ContentType)
	return appendString(b, from)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func readString(b []byte) (string, []byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return "", nil, false
	}
	return string(b[k : k+int(n)]), b[k+int(n):], true
}

func decodeEntry(b []byte) (e Entry, from string, err error) {
	bad := fmt.Errorf("backup: working lists: a damaged entry")
	size, k := binary.Varint(b)
	if k <= 0 {
		return e, "", bad
	}
	b = b[k:]
	mode, k := binary.Uvarint(b)
	if k <= 0 {
		return e, "", bad
	}
	b = b[k:]
	var mt string
	var ok bool
	if mt, b, ok = readString(b); !ok {
		return e, "", bad
	}
	var t time.Time
	if err := t.UnmarshalBinary([]byte(mt)); err != nil {
		return e, "", bad
	}
	e = Entry{Size: size, Mode: uint32(mode), Mtime: t}
	if e.SHA256, b, ok = readString(b); !ok {
		return e, "", bad
	}
	if e.ContentType, b, ok = readString(b); !ok {
		return e, "", bad
	}
	if from, _, ok = readString(b); !ok {
		return e, "", bad
	}
	return e, from, nil
}

func encodeFound(f Found) []byte {
	return appendString(binary.AppendVarint(nil, f.Size), f.SHA256)
}

func decodeFound(b []byte) Found {
	size, k := binary.Varint(b)
	if k <= 0 {
		return Found{}
	}
	sha, _, _ := readString(b[k:])
	return Found{Size: size, SHA256: sha}
}

// tempDir is where lists spill: TMPDIR.
func tempDir() string { return os.TempDir() }

// markParents adds the directories above p to space, stopping at the
// first one there already; last is the directory of the previous path
// given (paths come in order: a directory's files in a row).
func (l *lists) markParents(space byte, p string, last *string) error {
	d := path.Dir(p)
	if d == *last {
		return nil
	}
	*last = d
	for ; d != "."; d = path.Dir(d) {
		if ok, err := l.has(space, d); ok || err != nil {
			return err
		}
		if err := l.set(space, d, nil); err != nil {
			return err
		}
	}
	return nil
}
