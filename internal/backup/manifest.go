package backup

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// MetaDir is the directory of a backup's own files at the destination's
// root. Its contents are never part of a backup.
const MetaDir = ".cairn-backup"

// Names of the files under MetaDir.
const (
	ManifestName = "manifest.json"
	JournalName  = "pending.json"
)

// Format is the version of the manifest and journal formats this package
// writes and reads.
const Format = 1

// Sentinel errors.
var (
	// ErrNoMeta: the destination has no such file under MetaDir.
	ErrNoMeta = errors.New("backup: no such backup file")
	// ErrBadMeta: a manifest or journal cannot be read (corrupt, or a
	// format of a later release).
	ErrBadMeta = errors.New("backup: unreadable backup file")
	// ErrDigest: a file's content is not the SHA-256 it should have.
	ErrDigest = errors.New("backup: content does not match its SHA-256")
	// ErrRefused: the operation would lose data or write into the wrong
	// place (a destination with files but no manifest, a backup of another
	// bucket, a restore over different files without Force).
	ErrRefused = errors.New("backup: refused")
	// ErrIncomplete: some files could not be copied; the others were.
	ErrIncomplete = errors.New("backup: incomplete")
	// ErrBadPath: a path that is not a clean relative path.
	ErrBadPath = errors.New("backup: bad path")
)

// refusal is an error that matches ErrRefused and reads as its message
// alone ("backup refused: ...", "restore refused: ...").
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }
func (r *refusal) Unwrap() error { return ErrRefused }

func refused(format string, args ...any) error { return &refusal{msg: fmt.Sprintf(format, args...)} }

// Entry is what a manifest records of one file.
type Entry struct {
	// SHA256 is the hex SHA-256 of the content: its content address.
	SHA256 string `json:"sha256"`
	// Size in bytes.
	Size int64 `json:"size"`
	// Mtime is the modification time in the snapshot.
	Mtime time.Time `json:"mtime"`
	// Mode holds the permission bits.
	Mode uint32 `json:"mode"`
	// ContentType is the stored Content-Type ("": none stored).
	ContentType string `json:"content_type,omitempty"`
}

// Manifest describes the last completed backup at a destination.
type Manifest struct {
	Format int `json:"format"`
	// Bucket is the bucket backed up.
	Bucket string `json:"bucket"`
	// Snapshot, SnapshotCreated and SnapshotIndex name the snapshot
	// copied: its name, when it was taken, its log index.
	Snapshot        string    `json:"snapshot"`
	SnapshotCreated time.Time `json:"snapshot_created"`
	SnapshotIndex   uint64    `json:"snapshot_index,omitempty"`
	// Source is the server the snapshot was read from.
	Source string `json:"source,omitempty"`
	// Completed is when the backup finished.
	Completed time.Time `json:"completed"`
	// FileCount, Bytes and Hashes sum up Files: files, their bytes, and
	// the distinct content hashes among them.
	FileCount int   `json:"file_count"`
	Bytes     int64 `json:"bytes"`
	Hashes    int   `json:"hashes"`
	// Files maps each path (relative to the destination's root) to its
	// entry.
	Files map[string]Entry `json:"files"`
}

// Journal is a run in progress: what it may change at the destination.
type Journal struct {
	Format   int       `json:"format"`
	Bucket   string    `json:"bucket"`
	Snapshot string    `json:"snapshot"`
	Started  time.Time `json:"started"`
	// Paths are every path the unfinished runs may have written or
	// deleted, sorted.
	Paths []string `json:"paths"`
}

// summarize fills the manifest's totals from its files.
func (m *Manifest) summarize() {
	m.FileCount, m.Bytes = len(m.Files), 0
	hashes := make(map[string]struct{}, len(m.Files))
	for _, e := range m.Files {
		m.Bytes += e.Size
		hashes[e.SHA256] = struct{}{}
	}
	m.Hashes = len(hashes)
}

// EncodeManifest returns the manifest's JSON (paths sorted, one line: a
// manifest of 470,000 files is about 80 MB).
func EncodeManifest(m *Manifest) ([]byte, error) {
	m.Format = Format
	m.summarize()
	return json.Marshal(m)
}

// DecodeManifest parses a manifest and checks it: ErrBadMeta when it is
// not one this release can use.
func DecodeManifest(data []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%w: manifest: %w", ErrBadMeta, err)
	}
	if m.Format != Format {
		return nil, fmt.Errorf("%w: manifest format %d (this release reads %d)", ErrBadMeta, m.Format, Format)
	}
	if m.Files == nil {
		m.Files = map[string]Entry{}
	}
	for p, e := range m.Files {
		if err := CheckPath(p); err != nil {
			return nil, fmt.Errorf("%w: manifest: %w", ErrBadMeta, err)
		}
		if !validHex(e.SHA256) || e.Size < 0 {
			return nil, fmt.Errorf("%w: manifest: entry %q: sha256 %q, size %d", ErrBadMeta, p, e.SHA256, e.Size)
		}
	}
	return &m, nil
}

// EncodeJournal returns the journal's JSON.
func EncodeJournal(j *Journal) ([]byte, error) {
	j.Format = Format
	slices.Sort(j.Paths)
	j.Paths = slices.Compact(j.Paths)
	return json.Marshal(j)
}

// DecodeJournal parses a journal: ErrBadMeta when it is not one.
func DecodeJournal(data []byte) (*Journal, error) {
	var j Journal
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("%w: journal: %w", ErrBadMeta, err)
	}
	if j.Format != Format {
		return nil, fmt.Errorf("%w: journal format %d (this release reads %d)", ErrBadMeta, j.Format, Format)
	}
	for _, p := range j.Paths {
		if err := CheckPath(p); err != nil {
			return nil, fmt.Errorf("%w: journal: %w", ErrBadMeta, err)
		}
	}
	return &j, nil
}

// CheckPath accepts a clean relative slash-separated path: not empty, no
// leading or trailing "/", no empty, "." or ".." segment, no NUL, and
// not under MetaDir. Every path from a listing or a manifest goes through
// it before it names a file at a destination.
func CheckPath(p string) error {
	if p == "" || strings.ContainsRune(p, 0) {
		return fmt.Errorf("%w: %q", ErrBadPath, p)
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: %q", ErrBadPath, p)
		}
	}
	if p == MetaDir || strings.HasPrefix(p, MetaDir+"/") {
		return fmt.Errorf("%w: %q is the backup's own directory", ErrBadPath, p)
	}
	return nil
}

// validHex reports whether s is a lowercase hex SHA-256.
func validHex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
