package meta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/kv"
)

// Reader answers namespace queries from a kv.Reader: the live store, a
// snapshot or an uncommitted batch. It holds no state of its own, so it is
// as safe for concurrent use as the kv.Reader under it (kv.Store and
// kv.Snapshot are; a kv.Batch is not). It never blocks beyond KV reads.
// Errors other than the documented sentinels wrap a KV failure or
// ErrCorrupt.
type Reader struct {
	r kv.Reader
}

// NewReader returns a Reader over r.
func NewReader(r kv.Reader) *Reader { return &Reader{r: r} }

// get returns the value at key, or (nil, false, nil) when it is absent.
func (r *Reader) get(key []byte) ([]byte, bool, error) {
	v, err := r.r.Get(key)
	if errors.Is(err, kv.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return v, true, nil
}

func (r *Reader) getU64(key []byte) (uint64, error) {
	v, ok, err := r.get(key)
	if err != nil || !ok {
		return 0, err
	}
	if len(v) != 8 {
		return 0, errCorrupt("%q: %d-byte value", key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// AppliedIndex returns the index of the last log entry applied, 0 before
// the first.
func (r *Reader) AppliedIndex() (uint64, error) { return r.getU64(keyApplied) }

// IsAppliedKey reports whether k is the key AppliedIndex reads (a
// snapshot's reader checks the index of the state it streams).
func IsAppliedKey(k []byte) bool { return bytes.Equal(k, keyApplied) }

// Inode returns inode ino, or ErrNotFound.
func (r *Reader) Inode(ino Ino) (*Inode, error) {
	v, ok, err := r.get(inodeKey(ino))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("inode %d: %w", ino, ErrNotFound)
	}
	return DecodeInode(ino, v)
}

// Bucket returns the bucket called name, or ErrNoBucket.
func (r *Reader) Bucket(name string) (*Bucket, error) {
	v, ok, err := r.get(bucketKey(name))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("bucket %q: %w", name, ErrNoBucket)
	}
	return decodeBucket(v)
}

// Buckets returns every bucket in name order.
func (r *Reader) Buckets() ([]*Bucket, error) {
	var out []*Bucket
	var derr error
	p := []byte{pBucket}
	err := r.r.Scan(p, prefixEnd(p), func(_, v []byte) bool {
		b, err := decodeBucket(v)
		if err != nil {
			derr = err
			return false
		}
		out = append(out, b)
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, derr
}

// dentry returns the entry stored under keyName in dir.
func (r *Reader) dentry(dir Ino, keyName string) (Ino, FileType, bool, error) {
	v, ok, err := r.get(dentryKey(dir, keyName))
	if err != nil || !ok {
		return 0, 0, false, err
	}
	ino, t, err := decodeDentry(v)
	return ino, t, err == nil, err
}

// child finds the entry called name in dir, trying the directory key
// (name+"/") first when dirFirst, else the plain key first.
func (r *Reader) child(dir Ino, name string, dirFirst bool) (Ino, FileType, bool, error) {
	keys := [2]string{name, name + "/"}
	if dirFirst {
		keys[0], keys[1] = keys[1], keys[0]
	}
	for _, k := range keys {
		ino, t, ok, err := r.dentry(dir, k)
		if err != nil || ok {
			return ino, t, ok, err
		}
	}
	return 0, 0, false, nil
}

// Lookup resolves path inside bucket and returns its inode. Path "" is the
// bucket's directory. Errors: ErrNoBucket, ErrInvalid (bad path),
// ErrNotFound, ErrNotDir (a parent component is not a directory).
func (r *Reader) Lookup(bucket, path string) (*Inode, error) {
	b, err := r.Bucket(bucket)
	if err != nil {
		return nil, err
	}
	if path == "" {
		return r.Inode(b.Ino)
	}
	if err := ValidatePath(path); err != nil {
		return nil, err
	}
	dir, rest := b.Ino, path
	for {
		name, tail, more := strings.Cut(rest, "/")
		ino, t, ok, err := r.child(dir, name, more)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("lookup %s/%s: %w", bucket, path, ErrNotFound)
		}
		if !more {
			return r.Inode(ino)
		}
		if t != TypeDir {
			return nil, fmt.Errorf("lookup %s/%s: %q: %w", bucket, path, name, ErrNotDir)
		}
		dir, rest = ino, tail
	}
}

// ReadDir lists directory dir in S3 order (bytewise by DirentKeyName, so
// "a.txt" < "a/…"), starting after the key name after (exclusive; "" from
// the start) and returning at most limit entries (limit <= 0: all). It does
// not check that dir exists: a missing or non-directory inode lists empty.
func (r *Reader) ReadDir(dir Ino, after string, limit int) ([]Dirent, error) {
	prefix := dirPrefix(dir)
	lower := prefix
	if after != "" {
		lower = append(dentryKey(dir, after), 0)
	}
	var out []Dirent
	var derr error
	err := r.r.Scan(lower, prefixEnd(prefix), func(k, v []byte) bool {
		ino, t, err := decodeDentry(v)
		if err != nil {
			derr = err
			return false
		}
		name := string(k[len(prefix):])
		if t == TypeDir {
			name = strings.TrimSuffix(name, "/")
		}
		out = append(out, Dirent{Name: name, Ino: ino, Type: t})
		return limit <= 0 || len(out) < limit
	})
	if err != nil {
		return nil, err
	}
	return out, derr
}

// isEmptyDir reports whether dir has no entries.
func (r *Reader) isEmptyDir(dir Ino) (bool, error) {
	ents, err := r.ReadDir(dir, "", 1)
	return len(ents) == 0, err
}

// RefCount returns the number of extents, across all inodes, that name h
// (0 if none).
func (r *Reader) RefCount(h cas.Hash) (uint64, error) { return r.getU64(refKey(h)) }

// Tracked reports whether h has a refcount entry: a file references it,
// or its count fell to 0 and it waits in the garbage queue for an OpReap.
// A blob that is not tracked was never referenced or was reaped: only an
// OpReapOrphans may approve deleting its copies.
func (r *Reader) Tracked(h cas.Hash) (bool, error) {
	_, ok, err := r.get(refKey(h))
	return ok, err
}

// Garbage returns up to limit (<= 0: all) blobs whose reference count fell
// to zero before the time before (Unix ns), oldest first, that have not
// been reaped or referenced again since.
func (r *Reader) Garbage(before int64, limit int) ([]GarbageEntry, error) {
	lower := []byte{pGarbage}
	upper := binary.BigEndian.AppendUint64([]byte{pGarbage}, sortableTime(before))
	var out []GarbageEntry
	var derr error
	err := r.r.Scan(lower, upper, func(k, _ []byte) bool {
		if len(k) != 1+8+32 {
			derr = errCorrupt("garbage key of %d bytes", len(k))
			return false
		}
		var g GarbageEntry
		g.TimeNs = unsortableTime(binary.BigEndian.Uint64(k[1:]))
		copy(g.Hash[:], k[9:])
		out = append(out, g)
		return limit <= 0 || len(out) < limit
	})
	if err != nil {
		return nil, err
	}
	return out, derr
}

// counts is the value at keyCounts.
type counts struct{ files, dirs, bytes int64 }

func (r *Reader) counts() (counts, error) {
	v, ok, err := r.get(keyCounts)
	if err != nil || !ok {
		return counts{}, err
	}
	if len(v) != 24 {
		return counts{}, errCorrupt("counts: %d-byte value", len(v))
	}
	return counts{
		files: int64(binary.BigEndian.Uint64(v)),
		dirs:  int64(binary.BigEndian.Uint64(v[8:])),
		bytes: int64(binary.BigEndian.Uint64(v[16:])),
	}, nil
}

// Counts returns the number of files (and symlinks), of directories (the
// bucket directories included, the root excluded), and the sum of file
// sizes in bytes.
func (r *Reader) Counts() (files, dirs, bytes int64, err error) {
	c, err := r.counts()
	return c.files, c.dirs, c.bytes, err
}

// Node returns cluster member id, or ErrNotFound.
func (r *Reader) Node(id uint64) (*Node, error) {
	v, ok, err := r.get(nodeKey(id))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("node %d: %w", id, ErrNotFound)
	}
	return decodeNode(v)
}

// Nodes returns the cluster map's members in ID order.
func (r *Reader) Nodes() ([]*Node, error) {
	var out []*Node
	var derr error
	p := []byte{pNode}
	err := r.r.Scan(p, prefixEnd(p), func(_, v []byte) bool {
		n, err := decodeNode(v)
		if err != nil {
			derr = err
			return false
		}
		out = append(out, n)
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, derr
}

// UnderReplicatedCount returns how many blobs are recorded as
// under-replicated: written with fewer copies than wanted and not yet
// confirmed fully copied by repair (OpReplicated) nor reaped.
func (r *Reader) UnderReplicatedCount() (int64, error) {
	n, err := r.getU64(keyUnder)
	return int64(n), err
}

// UnderReplicated calls fn, in hash order, for every blob recorded as
// under-replicated, with the R of the bucket it was written to (0: the
// default) and the time of the write that recorded it, until fn returns
// false. It holds no iterator across fn: the records are read in chunks.
func (r *Reader) UnderReplicated(fn func(h cas.Hash, replicas int, sinceNs int64) bool) error {
	type rec struct {
		h        cas.Hash
		replicas int
		since    int64
	}
	const chunk = 1024
	lower, upper := []byte{pUnder}, prefixEnd([]byte{pUnder})
	for {
		var recs []rec
		var derr error
		if err := r.r.Scan(lower, upper, func(k, v []byte) bool {
			if len(k) != 1+32 {
				derr = errCorrupt("under-replicated key of %d bytes", len(k))
				return false
			}
			d := decoder{b: v}
			since, replicas := d.varint(), d.varint()
			if err := d.done(); err != nil {
				derr = fmt.Errorf("under-replicated record: %w", err)
				return false
			}
			var h cas.Hash
			copy(h[:], k[1:])
			recs = append(recs, rec{h, int(replicas), since})
			return len(recs) < chunk
		}); err != nil {
			return err
		}
		if derr != nil {
			return derr
		}
		for _, c := range recs {
			if !fn(c.h, c.replicas, c.since) {
				return nil
			}
		}
		if len(recs) < chunk {
			return nil
		}
		lower = append(underKey(recs[len(recs)-1].h), 0)
	}
}

// BlobReplicas is where ReferencedBlobs keeps the replication factor of
// the blobs of buckets above the smallest R.
type BlobReplicas interface {
	Get(h cas.Hash) (replicas int, ok bool, err error)
	Set(h cas.Hash, replicas int) error
}

// mapReplicas is BlobReplicas in memory.
type mapReplicas map[cas.Hash]int

func (m mapReplicas) Get(h cas.Hash) (int, bool, error) { rf, ok := m[h]; return rf, ok, nil }
func (m mapReplicas) Set(h cas.Hash, rf int) error      { m[h] = rf; return nil }

// ReferencedBlobs calls fn, in hash order, for every blob with a nonzero
// reference count, with the replication factor it needs: the largest R of
// the buckets whose files name it (Mirror, -1, beats every count; a
// bucket's 0 means defaultReplicas). It stops early when fn returns false.
//
// Cost: one scan of the refcount keys, in chunks, so no KV iterator is held
// open while fn runs (fn may be slow: repair moves blobs from it). When the
// buckets do not all have the same R, the trees of the buckets above the
// smallest R are walked first and their blobs kept in higher (nil: a map
// in memory, about 40 B a blob of those buckets; a node passes one that
// moves to disk past a bound, so the pass's memory stays bounded). Blobs
// that no bucket tree names (not expected) get the smallest R. Over a live
// store the view is not one point in time; pass a Reader over a
// kv.Snapshot for that.
func (r *Reader) ReferencedBlobs(defaultReplicas int, higher BlobReplicas, fn func(h cas.Hash, replicas int) bool) error {
	buckets, err := r.Buckets()
	if err != nil {
		return err
	}
	effective := func(b *Bucket) int {
		if b.Replicas == 0 {
			return defaultReplicas
		}
		return int(b.Replicas)
	}
	// order ranks replication factors: Mirror above every count.
	order := func(rf int) int {
		if rf == int(Mirror) {
			return int(^uint(0) >> 1)
		}
		return rf
	}
	base := defaultReplicas
	for i, b := range buckets {
		if rf := effective(b); i == 0 || order(rf) < order(base) {
			base = rf
		}
	}
	if higher == nil {
		higher = mapReplicas{}
	}
	anyHigher := false // blobs of buckets whose R is above base go into higher
	for _, b := range buckets {
		rf := effective(b)
		if order(rf) <= order(base) {
			continue
		}
		anyHigher = true
		var kerr error
		keep := func(h cas.Hash) {
			if kerr != nil {
				return
			}
			cur, ok, err := higher.Get(h)
			if err == nil && (!ok || order(rf) > order(cur)) {
				err = higher.Set(h, rf)
			}
			kerr = err
		}
		if err := r.walkExtents(b.Ino, keep); err != nil {
			return fmt.Errorf("bucket %q: %w", b.Name, err)
		}
		// What its trash keeps is kept at the bucket's R too.
		if err := r.Trash(b.Name, "", func(e *TrashEntry) bool {
			for _, x := range e.Inode.Extents {
				keep(x.Hash)
			}
			return kerr == nil
		}); err != nil {
			return fmt.Errorf("bucket %q's trash: %w", b.Name, err)
		}
		// And what its snapshots hold (apply_snapshot.go).
		if err := r.snapshotExtents(b.Name, keep); err != nil {
			return fmt.Errorf("bucket %q's snapshots: %w", b.Name, err)
		}
		if kerr != nil {
			return fmt.Errorf("bucket %q: %w", b.Name, kerr)
		}
	}
	type ref struct {
		h cas.Hash
		n uint64
	}
	const chunk = 1024
	lower, upper := []byte{pRef}, prefixEnd([]byte{pRef})
	buf := make([]ref, 0, chunk)
	for {
		buf = buf[:0]
		var derr error
		err := r.r.Scan(lower, upper, func(k, v []byte) bool {
			if len(k) != 1+32 || len(v) != 8 {
				derr = errCorrupt("refcount key of %d bytes, value of %d", len(k), len(v))
				return false
			}
			var e ref
			copy(e.h[:], k[1:])
			e.n = binary.BigEndian.Uint64(v)
			buf = append(buf, e)
			return len(buf) < chunk
		})
		if err != nil {
			return err
		}
		if derr != nil {
			return derr
		}
		for _, e := range buf {
			if e.n == 0 {
				continue
			}
			rf := base
			if anyHigher {
				x, ok, err := higher.Get(e.h)
				if err != nil {
					return err
				}
				if ok {
					rf = x
				}
			}
			if !fn(e.h, rf) {
				return nil
			}
		}
		if len(buf) < chunk {
			return nil
		}
		lower = append(refKey(buf[len(buf)-1].h), 0)
	}
}

// walkExtents calls fn for every extent's blob in the tree under directory
// dir (files reached by more than one link are visited once per link).
func (r *Reader) walkExtents(dir Ino, fn func(h cas.Hash)) error {
	const page = 1024
	after := ""
	for {
		ents, err := r.ReadDir(dir, after, page)
		if err != nil {
			return err
		}
		for _, d := range ents {
			switch d.Type {
			case TypeDir:
				if err := r.walkExtents(d.Ino, fn); err != nil {
					return err
				}
			case TypeFile:
				ino, err := r.Inode(d.Ino)
				if errors.Is(err, ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				for _, e := range ino.Extents {
					fn(e.Hash)
				}
			}
		}
		if len(ents) < page {
			return nil
		}
		after = DirentKeyName(ents[len(ents)-1])
	}
}

// Records returns every record of kind k in name order (bytewise).
func (r *Reader) Records(k RecordKind) ([]Record, error) {
	var out []Record
	var derr error
	p := []byte{pRecord, byte(k)}
	err := r.r.Scan(p, prefixEnd(p), func(key, v []byte) bool {
		val, err := decodeRecordValue(v)
		if err != nil {
			derr = err
			return false
		}
		out = append(out, Record{Kind: k, Name: string(key[len(p):]), Value: val})
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, derr
}

// Record returns record name of kind k, or ErrNotFound.
func (r *Reader) Record(k RecordKind, name string) (Record, error) {
	v, ok, err := r.get(recordKey(k, name))
	if err != nil {
		return Record{}, err
	}
	if !ok {
		return Record{}, fmt.Errorf("record %q: %w", name, ErrNotFound)
	}
	val, err := decodeRecordValue(v)
	return Record{Kind: k, Name: name, Value: val}, err
}
