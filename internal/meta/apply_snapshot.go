package meta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/kv"
)

// Snapshots (design 0007): taking one writes a record and copies nothing.
// From then on the first change of a key of the bucket's namespace (its
// inodes and directory entries) saves the key's previous value in the
// overlay of the bucket's newest snapshot; reading snapshot S resolves a
// key through the overlays of S and of every later snapshot of the bucket,
// then the live key (SnapshotReader).
//
//	V bucket 0 id(8)  → snapshot record (encodeSnapshot)
//	N bucket 0 name   → id(8): the live (not deleted) snapshots by name
//	o id(8) key       → 0: the key did not exist; 1 + value: its value
//	m "snapseq"       → u64 last snapshot id
//
// An inode saved in an overlay holds references to its blobs, as a live
// inode does; deleting a snapshot hands each key to the previous snapshot
// when that one lacks it (the references move) and drops it otherwise.

const (
	pSnap     = 'V'
	pSnapName = 'N'
	pOverlay  = 'o'
	// MaxSnapshotDrain bounds the overlay keys one OpSnapshotDrain moves.
	MaxSnapshotDrain = 10000
	// MaxSnapshotName bounds a snapshot's name.
	MaxSnapshotName = 128
)

var keySnapSeq = []byte("msnapseq")

// Snapshot is a bucket's point-in-time copy.
type Snapshot struct {
	Bucket    string
	Name      string
	ID        uint64
	CreatedNs int64
	Index     uint64 // the log index that took it
	Deleting  bool   // deleted: hidden, its overlay being handed down
}

// SnapCmd is the argument of the snapshot commands.
type SnapCmd struct {
	Name  string
	ID    uint64 // OpSnapshotDrain
	Limit int    // OpSnapshotDrain: at most this many keys (1..MaxSnapshotDrain)
}

func snapPrefix(bucket string) []byte { return append(append([]byte{pSnap}, bucket...), 0) }

func snapKey(bucket string, id uint64) []byte {
	return binary.BigEndian.AppendUint64(snapPrefix(bucket), id)
}

func snapNameKey(bucket, name string) []byte {
	return append(append(append([]byte{pSnapName}, bucket...), 0), name...)
}

func overlayPrefix(id uint64) []byte { return binary.BigEndian.AppendUint64([]byte{pOverlay}, id) }

func overlayKey(id uint64, key []byte) []byte { return append(overlayPrefix(id), key...) }

func encodeSnapshot(s *Snapshot) []byte {
	e := encoder{}
	e.byte1(1)
	e.str(s.Name)
	e.varint(s.CreatedNs)
	e.uvarint(s.Index)
	e.bool1(s.Deleting)
	return e.b
}

func decodeSnapshot(bucket string, id uint64, v []byte) (*Snapshot, error) {
	d := decoder{b: v}
	if ver := d.byte1(); d.err == nil && ver != 1 {
		return nil, errCorrupt("snapshot version %d", ver)
	}
	s := &Snapshot{Bucket: bucket, ID: id, Name: d.str(), CreatedNs: d.varint(), Index: d.uvarint(), Deleting: d.bool1()}
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("decode snapshot: %w", err)
	}
	return s, nil
}

// Snapshots returns the bucket's snapshots, oldest first, the deleted ones
// still draining included (Deleting).
func (r *Reader) Snapshots(bucket string) ([]*Snapshot, error) {
	pre := snapPrefix(bucket)
	var out []*Snapshot
	var derr error
	err := r.r.Scan(pre, prefixEnd(pre), func(k, v []byte) bool {
		if len(k) != len(pre)+8 {
			derr = errCorrupt("snapshot key of %d bytes", len(k))
			return false
		}
		s, err := decodeSnapshot(bucket, binary.BigEndian.Uint64(k[len(pre):]), v)
		if err != nil {
			derr = err
			return false
		}
		out = append(out, s)
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, derr
}

// Snapshot returns the bucket's live snapshot named name.
func (r *Reader) Snapshot(bucket, name string) (*Snapshot, error) {
	v, ok, err := r.get(snapNameKey(bucket, name))
	if err != nil {
		return nil, err
	}
	if !ok || len(v) != 8 {
		return nil, fmt.Errorf("snapshot %q of bucket %q: %w", name, bucket, ErrNotFound)
	}
	id := binary.BigEndian.Uint64(v)
	sv, ok, err := r.get(snapKey(bucket, id))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errCorrupt("snapshot %q of %q: no record %d", name, bucket, id)
	}
	return decodeSnapshot(bucket, id, sv)
}

// newestSnapshot returns the id of the bucket's newest snapshot record
// (deleted ones included: they still take captures until drained), 0 if
// none.
func (r *Reader) newestSnapshot(bucket string) (uint64, error) {
	pre := snapPrefix(bucket)
	var id uint64
	err := r.r.Scan(pre, prefixEnd(pre), func(k, _ []byte) bool {
		if len(k) == len(pre)+8 {
			id = binary.BigEndian.Uint64(k[len(pre):])
		}
		return true
	})
	return id, err
}

// ValidSnapshotName checks a snapshot's name: a file name (no "/", not
// "." or ".."), at most MaxSnapshotName bytes.
func ValidSnapshotName(name string) error {
	if name == "" || len(name) > MaxSnapshotName || name == "." || name == ".." ||
		bytes.ContainsAny([]byte(name), "/\x00") {
		return fmt.Errorf("%w: snapshot name %q: 1 to %d bytes, no '/'", ErrInvalid, name, MaxSnapshotName)
	}
	return nil
}

func (a *applier) snapshotCreate() (Result, error) {
	bk, err := a.bucket()
	if err != nil {
		return Result{}, err
	}
	if a.cmd.Snap == nil {
		return Result{}, fmt.Errorf("%w: OpSnapshotCreate without Snap", ErrInvalid)
	}
	name := a.cmd.Snap.Name
	if err := ValidSnapshotName(name); err != nil {
		return Result{}, err
	}
	if _, ok, err := a.r.get(snapNameKey(bk.Name, name)); err != nil {
		return Result{}, err
	} else if ok {
		return Result{}, fmt.Errorf("snapshot %q of bucket %q: %w", name, bk.Name, ErrExists)
	}
	seq, err := a.r.getU64(keySnapSeq)
	if err != nil {
		return Result{}, err
	}
	s := &Snapshot{Bucket: bk.Name, Name: name, ID: seq + 1, CreatedNs: a.now, Index: a.index}
	a.t.set(keySnapSeq, u64(s.ID))
	a.t.set(snapKey(bk.Name, s.ID), encodeSnapshot(s))
	a.t.set(snapNameKey(bk.Name, name), u64(s.ID))
	a.st.snapKnown = nil // the bucket's newest snapshot changed
	return Result{Name: name, Count: int(s.ID)}, nil
}

func (a *applier) snapshotDelete() (Result, error) {
	bk, err := a.bucket()
	if err != nil {
		return Result{}, err
	}
	if a.cmd.Snap == nil {
		return Result{}, fmt.Errorf("%w: OpSnapshotDelete without Snap", ErrInvalid)
	}
	s, err := a.r.Snapshot(bk.Name, a.cmd.Snap.Name)
	if err != nil {
		return Result{}, err
	}
	s.Deleting = true
	a.t.del(snapNameKey(bk.Name, s.Name))
	a.t.set(snapKey(bk.Name, s.ID), encodeSnapshot(s))
	return Result{Count: int(s.ID)}, nil
}

// snapshotDrain hands up to Limit keys of a deleted snapshot's overlay to
// the previous snapshot of the bucket (when it lacks them) or drops them;
// the record goes once the overlay is empty. Result.Count is the number
// of keys handled; 0 means the snapshot is gone.
func (a *applier) snapshotDrain() (Result, error) {
	c := a.cmd.Snap
	if c == nil || c.Limit < 1 || c.Limit > MaxSnapshotDrain {
		return Result{}, fmt.Errorf("%w: OpSnapshotDrain needs a limit of 1 to %d", ErrInvalid, MaxSnapshotDrain)
	}
	bucket := a.cmd.BucketName
	sv, ok, err := a.r.get(snapKey(bucket, c.ID))
	if err != nil {
		return Result{}, err
	}
	if !ok {
		return Result{}, nil // already gone
	}
	s, err := decodeSnapshot(bucket, c.ID, sv)
	if err != nil {
		return Result{}, err
	}
	if !s.Deleting {
		return Result{}, fmt.Errorf("%w: snapshot %q is not deleted", ErrInvalid, s.Name)
	}
	snaps, err := a.r.Snapshots(bucket)
	if err != nil {
		return Result{}, err
	}
	var prev uint64
	for _, o := range snaps {
		if o.ID < s.ID {
			prev = o.ID
		}
	}
	pre := overlayPrefix(s.ID)
	type kvp struct{ k, v []byte }
	var batch []kvp
	if err := a.t.Scan(pre, prefixEnd(pre), func(k, v []byte) bool {
		batch = append(batch, kvp{bytes.Clone(k), bytes.Clone(v)})
		return len(batch) < c.Limit
	}); err != nil {
		return Result{}, err
	}
	for _, e := range batch {
		key := e.k[len(pre):]
		a.t.del(e.k)
		if prev != 0 {
			if _, err := a.t.Get(overlayKey(prev, key)); err == nil {
				// The previous snapshot has its own value: this one
				// mattered only to the deleted snapshot.
			} else {
				a.t.set(overlayKey(prev, key), e.v)
				continue // its references move with it
			}
		}
		if err := a.overlayRefs(key, e.v, -1); err != nil {
			return Result{}, err
		}
	}
	if len(batch) < c.Limit {
		a.t.del(snapKey(bucket, s.ID))
		a.st.snapKnown = nil
	}
	return Result{Count: len(batch)}, nil
}

// overlayRefs adds sign to the references of the blobs an overlay value
// of key holds (an inode's extents).
func (a *applier) overlayRefs(key, v []byte, sign int64) error {
	if len(key) == 0 || key[0] != pInode || len(v) < 2 || v[0] != 1 {
		return nil
	}
	n, err := DecodeInode(Ino(binary.BigEndian.Uint64(key[1:])), v[1:])
	if err != nil {
		return err
	}
	if len(n.Extents) == 0 {
		return nil
	}
	delta := map[cas.Hash]int64{}
	for _, x := range n.Extents {
		delta[x.Hash] += sign
	}
	return a.adjustRefs(delta)
}

// cow is the copy on write of one command: the overlay that takes the
// previous values of the namespace keys it changes (0: none).
type cow struct {
	snap uint64
	// saved lists the overlay keys this command wrote, for their blobs'
	// references.
	saved [][]byte
	err   error
}

// namespaceKey reports whether k is a key snapshots keep: an inode or a
// directory entry, other than the root directory's (the buckets'
// entries) and its inode.
func namespaceKey(k []byte) bool {
	switch {
	case len(k) == 9 && k[0] == pInode:
		return binary.BigEndian.Uint64(k[1:]) != uint64(RootIno)
	case len(k) > 9 && k[0] == pDentry:
		return binary.BigEndian.Uint64(k[1:9]) != uint64(RootIno)
	}
	return false
}

// capture saves k's value before this command's first change of it, if
// the bucket has a snapshot whose overlay lacks it. Called by txn.
func (t *txn) capture(k []byte) {
	c := t.cow
	if c == nil || c.snap == 0 || c.err != nil || !namespaceKey(k) {
		return
	}
	if _, staged := t.w[string(k)]; staged {
		return // saved at its first change, or not needed then
	}
	ok := overlayKey(c.snap, k)
	if _, err := t.b.Get(ok); err == nil {
		return // already saved since the snapshot
	} else if !isNotFound(err) {
		c.err = &kvFailure{err}
		return
	}
	v, err := t.b.Get(k)
	switch {
	case err == nil:
		t.w[string(ok)] = append([]byte{1}, v...)
		c.saved = append(c.saved, ok)
	case isNotFound(err):
		t.w[string(ok)] = []byte{0}
	default:
		c.err = &kvFailure{err}
	}
}

// finishCow adds the references of the inodes this command saved.
func (a *applier) finishCow() error {
	c := a.t.cow
	if c == nil {
		return nil
	}
	if c.err != nil {
		return c.err
	}
	for _, ok := range c.saved {
		if err := a.overlayRefs(ok[9:], a.t.w[string(ok)], +1); err != nil {
			return err
		}
	}
	return nil
}

// snapshotFor returns the overlay id that takes this command's captures:
// its bucket's newest snapshot (cached for the Apply).
func (a *applier) snapshotFor() (uint64, error) {
	name := bucketName(a.cmd)
	if name == "" {
		return 0, nil
	}
	if a.st.snapKnown == nil {
		a.st.snapKnown = map[string]uint64{}
	}
	if id, ok := a.st.snapKnown[name]; ok {
		return id, nil
	}
	id, err := a.r.newestSnapshot(name)
	if err != nil {
		return 0, err
	}
	a.st.snapKnown[name] = id
	return id, nil
}

func isNotFound(err error) bool { return errors.Is(err, kv.ErrNotFound) }

// SnapshotReader returns a Reader of snapshot s (SnapshotKV).
func (r *Reader) SnapshotReader(s *Snapshot) (*Reader, error) {
	v, err := r.SnapshotKV(s)
	if err != nil {
		return nil, err
	}
	return NewReader(v), nil
}

// SnapshotKV returns the store as snapshot s sees it: every namespace key
// is resolved through the overlays of s and of the bucket's later
// snapshots, then the live store r reads. Read it over a kv.Snapshot: an
// apply between an overlay miss and the live read would show a later
// value.
func (r *Reader) SnapshotKV(s *Snapshot) (kv.Reader, error) {
	snaps, err := r.Snapshots(s.Bucket)
	if err != nil {
		return nil, err
	}
	var chain []uint64
	for _, o := range snaps {
		if o.ID >= s.ID {
			chain = append(chain, o.ID)
		}
	}
	slices.Sort(chain)
	return &snapKV{base: r.r, chain: chain}, nil
}

// snapKV is the kv.Reader of a snapshot's view (SnapshotReader).
type snapKV struct {
	base  kv.Reader
	chain []uint64
}

func (s *snapKV) Get(k []byte) ([]byte, error) {
	if namespaceKey(k) {
		for _, id := range s.chain {
			v, err := s.base.Get(overlayKey(id, k))
			if err == nil {
				if len(v) == 0 || v[0] == 0 {
					return nil, kv.ErrNotFound
				}
				return v[1:], nil
			}
			if !isNotFound(err) {
				return nil, err
			}
		}
	}
	return s.base.Get(k)
}

// Scan merges the live keys of [lower, upper) with the overlays' saved
// ones, the first of the chain winning, and hides keys saved as absent.
func (s *snapKV) Scan(lower, upper []byte, fn func(k, v []byte) bool) error {
	over := map[string][]byte{}
	for i := len(s.chain) - 1; i >= 0; i-- { // older snapshots win: write them last
		pre := overlayPrefix(s.chain[i])
		lo := append(slices.Clone(pre), lower...)
		hi := prefixEnd(pre)
		if upper != nil {
			hi = append(slices.Clone(pre), upper...)
		}
		if err := s.base.Scan(lo, hi, func(k, v []byte) bool {
			if namespaceKey(k[len(pre):]) {
				over[string(k[len(pre):])] = bytes.Clone(v)
			}
			return true
		}); err != nil {
			return err
		}
	}
	keys := make([]string, 0, len(over))
	for k := range over {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return mergeScan(s.base, lower, upper, keys, func(k string) bool {
		if v := over[k]; len(v) > 0 && v[0] == 1 {
			return fn([]byte(k), v[1:])
		}
		return true // absent at the snapshot
	}, fn)
}

// snapshotExtents calls fn for every extent of the inodes the bucket's
// snapshots saved.
func (r *Reader) snapshotExtents(bucket string, fn func(h cas.Hash)) error {
	snaps, err := r.Snapshots(bucket)
	if err != nil {
		return err
	}
	for _, s := range snaps {
		pre := overlayKey(s.ID, []byte{pInode})
		var derr error
		if err := r.r.Scan(pre, prefixEnd(pre), func(k, v []byte) bool {
			key := k[9:]
			if len(key) != 9 || len(v) < 2 || v[0] != 1 {
				return true
			}
			n, err := DecodeInode(Ino(binary.BigEndian.Uint64(key[1:])), v[1:])
			if err != nil {
				derr = err
				return false
			}
			for _, x := range n.Extents {
				fn(x.Hash)
			}
			return true
		}); err != nil {
			return err
		}
		if derr != nil {
			return derr
		}
	}
	return nil
}
