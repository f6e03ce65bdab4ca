package backup

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
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

// Manifest describes the last completed backup at a destination: the
// head of its manifest file, whose "files" object (every file by path,
// sorted, the last member) is written and read as a stream
// (writeManifest, readManifest), never held whole.
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
	// FileCount, Bytes and Hashes sum up the files: files, their bytes,
	// and the distinct content hashes among them.
	FileCount int   `json:"file_count"`
	Bytes     int64 `json:"bytes"`
	Hashes    int   `json:"hashes"`
}

// Journal is a run in progress: what it may change at the destination.
// Its "paths" (every path the unfinished runs may have written or
// deleted, sorted; the last member) are written and read as a stream.
type Journal struct {
	Format   int       `json:"format"`
	Bucket   string    `json:"bucket"`
	Snapshot string    `json:"snapshot"`
	Started  time.Time `json:"started"`
	// Paths counts the paths (not written).
	Paths int `json:"-"`
}

// writeMeta writes a manifest or a journal: the head's JSON object with
// a last member, name, whose value each writes (a JSON object or array).
// The document is the one json.Marshal writes of the head with that
// member: one line, paths sorted (format 1).
func writeMeta(w *bufio.Writer, head any, name string, each func(w *bufio.Writer) error) error {
	h, err := json.Marshal(head)
	if err != nil {
		return err
	}
	w.Write(h[:len(h)-1])
	if len(h) > 2 {
		w.WriteByte(',')
	}
	w.WriteString(strconv.Quote(name))
	w.WriteByte(':')
	if err := each(w); err != nil {
		return err
	}
	w.WriteByte('}')
	return w.Flush()
}

// writeManifest writes m's head and its files (those of space in l, in
// path order; m's totals must be theirs).
func writeManifest(w io.Writer, m *Manifest, l *lists, space byte) error {
	m.Format = Format
	bw := bufio.NewWriterSize(w, 64<<10)
	return writeMeta(bw, m, "files", func(bw *bufio.Writer) error {
		bw.WriteByte('{')
		first := true
		err := l.eachEntry(space, func(p string, e Entry, _ string) error {
			if !first {
				bw.WriteByte(',')
			}
			first = false
			k, _ := json.Marshal(p)
			v, err := json.Marshal(e)
			if err != nil {
				return err
			}
			bw.Write(k)
			bw.WriteByte(':')
			_, err = bw.Write(v)
			return err
		})
		bw.WriteByte('}')
		return err
	})
}

// writeJournal writes j's head and its paths (those of space in l, in
// order).
func writeJournal(w io.Writer, j *Journal, l *lists, space byte) error {
	j.Format = Format
	bw := bufio.NewWriterSize(w, 64<<10)
	return writeMeta(bw, j, "paths", func(bw *bufio.Writer) error {
		bw.WriteByte('[')
		first := true
		err := l.each(space, func(p string, _ []byte) error {
			if !first {
				bw.WriteByte(',')
			}
			first = false
			k, _ := json.Marshal(p)
			_, err := bw.Write(k)
			return err
		})
		bw.WriteByte(']')
		return err
	})
}

// readMeta reads a manifest's or a journal's JSON object from r: the
// members other than name go into head (through JSON), name's value is
// handed to member, which reads it from the decoder. format is the
// head's format field, checked before member is called.
func readMeta(r io.Reader, what, name string, head any, format *int, member func(dec *json.Decoder) error) error {
	dec := json.NewDecoder(bufio.NewReaderSize(r, 64<<10))
	bad := func(err error) error { return fmt.Errorf("%w: %s: %w", ErrBadMeta, what, err) }
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return bad(fmt.Errorf("not a JSON object (%v)", err))
	}
	fields := map[string]json.RawMessage{}
	seen := false
	checkFormat := func() error {
		raw, _ := json.Marshal(fields)
		if err := json.Unmarshal(raw, head); err != nil {
			return bad(err)
		}
		if *format != Format {
			return fmt.Errorf("%w: %s format %d (this release reads %d)", ErrBadMeta, what, *format, Format)
		}
		return nil
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return bad(err)
		}
		k, _ := t.(string)
		if k == name {
			if err := checkFormat(); err != nil {
				return err
			}
			seen = true
			if err := member(dec); err != nil {
				return err
			}
			continue
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return bad(err)
		}
		fields[k] = v
	}
	if _, err := dec.Token(); err != nil {
		return bad(err)
	}
	if !seen {
		return checkFormat()
	}
	raw, _ := json.Marshal(fields) // members after name's
	if err := json.Unmarshal(raw, head); err != nil {
		return bad(err)
	}
	return nil
}

// readManifest reads a manifest from r: its head, and each file, checked,
// handed to fn in the file's order.
func readManifest(r io.Reader, fn func(p string, e Entry) error) (*Manifest, error) {
	var m Manifest
	err := readMeta(r, "manifest", "files", &m, &m.Format, func(dec *json.Decoder) error {
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return fmt.Errorf("%w: manifest: files is not an object (%v)", ErrBadMeta, err)
		}
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				return fmt.Errorf("%w: manifest: %w", ErrBadMeta, err)
			}
			p, _ := t.(string)
			var e Entry
			if err := dec.Decode(&e); err != nil {
				return fmt.Errorf("%w: manifest: entry %q: %w", ErrBadMeta, p, err)
			}
			if err := CheckPath(p); err != nil {
				return fmt.Errorf("%w: manifest: %w", ErrBadMeta, err)
			}
			if !validHex(e.SHA256) || e.Size < 0 {
				return fmt.Errorf("%w: manifest: entry %q: sha256 %q, size %d", ErrBadMeta, p, e.SHA256, e.Size)
			}
			if err := fn(p, e); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		return err
	})
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// readJournal reads a journal from r: its head, and each path, checked,
// handed to fn.
func readJournal(r io.Reader, fn func(p string) error) (*Journal, error) {
	var j Journal
	err := readMeta(r, "journal", "paths", &j, &j.Format, func(dec *json.Decoder) error {
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return fmt.Errorf("%w: journal: paths is not an array (%v)", ErrBadMeta, err)
		}
		for dec.More() {
			var p string
			if err := dec.Decode(&p); err != nil {
				return fmt.Errorf("%w: journal: %w", ErrBadMeta, err)
			}
			if err := CheckPath(p); err != nil {
				return fmt.Errorf("%w: journal: %w", ErrBadMeta, err)
			}
			j.Paths++
			if err := fn(p); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		return err
	})
	if err != nil {
		return nil, err
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
