package consensus

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
)

// ErrBadSnapshot is returned by ApplySnapshot for a stream that is
// truncated, corrupt (checksum, ordering, sizes) or does not match the
// snapshot metadata of its message.
var ErrBadSnapshot = errors.New("consensus: bad snapshot stream")

// errSnapshotRaced is returned by ApplySnapshot when the node applied
// entries while the stream was being read: the staged deletions may miss
// keys, so the install is refused and the leader retries.
var errSnapshotRaced = errors.New("consensus: local state moved while the snapshot was staged; retry")

var snapMagic = [8]byte{'C', 'A', 'I', 'R', 'N', 'S', 'N', 'P'}

const (
	snapVersion = 1
	maxSnapKey  = 1 << 16
	maxSnapVal  = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// namespaceRanges are the key ranges a snapshot carries: everything but
// Raft's own prefix.
var namespaceRanges = [][2][]byte{{nil, {raftPrefix}}, {{raftPrefix + 1}, nil}}

// writeSnapshot streams every namespace record of r (format in doc.go).
func writeSnapshot(w io.Writer, r kv.Reader, index, term uint64) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	crc := uint32(0)
	var werr error
	put := func(p []byte) {
		if werr != nil {
			return
		}
		crc = crc32.Update(crc, castagnoli, p)
		_, werr = bw.Write(p)
	}
	hdr := append([]byte(nil), snapMagic[:]...)
	hdr = append(hdr, snapVersion)
	hdr = binary.BigEndian.AppendUint64(hdr, index)
	hdr = binary.BigEndian.AppendUint64(hdr, term)
	put(hdr)
	var count uint64
	var buf []byte
	for _, rg := range namespaceRanges {
		err := r.Scan(rg[0], rg[1], func(k, v []byte) bool {
			buf = binary.AppendUvarint(buf[:0], uint64(len(k)))
			buf = append(buf, k...)
			buf = binary.AppendUvarint(buf, uint64(len(v)))
			put(buf)
			put(v)
			count++
			return werr == nil
		})
		if err != nil {
			return fmt.Errorf("snapshot scan: %w", err)
		}
		if werr != nil {
			return werr
		}
	}
	tr := binary.AppendUvarint(nil, 0)
	tr = binary.BigEndian.AppendUint64(tr, count)
	put(tr)
	if werr != nil {
		return werr
	}
	if _, err := bw.Write(binary.BigEndian.AppendUint32(nil, crc)); err != nil {
		return err
	}
	return bw.Flush()
}

type snapReader struct {
	br  *bufio.Reader
	crc uint32
}

func (r *snapReader) ReadByte() (byte, error) {
	c, err := r.br.ReadByte()
	if err == nil {
		r.crc = crc32.Update(r.crc, castagnoli, []byte{c})
	}
	return c, err
}

func (r *snapReader) full(p []byte) error {
	if _, err := io.ReadFull(r.br, p); err != nil {
		return err
	}
	r.crc = crc32.Update(r.crc, castagnoli, p)
	return nil
}

// stageSnapshot reads a snapshot stream into b: every namespace key of the
// current state base is deleted, then the stream's records are set. It
// checks the header against index/term, key order, sizes, the record count
// and the checksum; the stream's own applied index must equal index.
func stageSnapshot(body io.Reader, base kv.Reader, b kv.Batch, index, term uint64) error {
	for _, rg := range namespaceRanges {
		var keys [][]byte
		if err := base.Scan(rg[0], rg[1], func(k, _ []byte) bool {
			keys = append(keys, append([]byte(nil), k...))
			return true
		}); err != nil {
			return err
		}
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
	}
	r := &snapReader{br: bufio.NewReaderSize(body, 64<<10)}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadSnapshot, fmt.Sprintf(format, args...))
	}
	hdr := make([]byte, len(snapMagic)+1+16)
	if err := r.full(hdr); err != nil {
		return bad("header: %v", err)
	}
	if !bytes.Equal(hdr[:8], snapMagic[:]) || hdr[8] != snapVersion {
		return bad("magic or version")
	}
	if gi, gt := binary.BigEndian.Uint64(hdr[9:]), binary.BigEndian.Uint64(hdr[17:]); gi != index || gt != term {
		return bad("stream is index %d term %d, message says %d/%d", gi, gt, index, term)
	}
	var prev []byte
	var count uint64
	for {
		kl, err := binary.ReadUvarint(r)
		if err != nil {
			return bad("record %d: %v", count, err)
		}
		if kl == 0 {
			break
		}
		if kl > maxSnapKey {
			return bad("key of %d bytes", kl)
		}
		k := make([]byte, kl)
		if err := r.full(k); err != nil {
			return bad("record %d key: %v", count, err)
		}
		if k[0] == raftPrefix || (prev != nil && bytes.Compare(prev, k) >= 0) {
			return bad("record %d: key %q out of order or reserved", count, k)
		}
		vl, err := binary.ReadUvarint(r)
		if err != nil || vl > maxSnapVal {
			return bad("record %d value length %d: %v", count, vl, err)
		}
		v := make([]byte, vl)
		if err := r.full(v); err != nil {
			return bad("record %d value: %v", count, err)
		}
		if err := b.Set(k, v); err != nil {
			return err
		}
		prev = k
		count++
	}
	var tr [8]byte
	if err := r.full(tr[:]); err != nil {
		return bad("trailer: %v", err)
	}
	if n := binary.BigEndian.Uint64(tr[:]); n != count {
		return bad("trailer counts %d records, read %d", n, count)
	}
	want := r.crc
	var c [4]byte
	if _, err := io.ReadFull(r.br, c[:]); err != nil {
		return bad("checksum: %v", err)
	}
	if binary.BigEndian.Uint32(c[:]) != want {
		return bad("checksum mismatch")
	}
	if _, err := r.br.ReadByte(); err != io.EOF {
		return bad("trailing bytes after checksum")
	}
	applied, err := meta.NewReader(b).AppliedIndex()
	if err != nil {
		return err
	}
	if applied != index {
		return bad("state is at applied index %d, metadata says %d", applied, index)
	}
	return nil
}

// snapshots holds the KV snapshots that outgoing Raft snapshots stream
// from, keyed by applied index and reference counted by the streams using
// them. Used only from the loop goroutine.
type snapshots struct {
	m map[uint64]*snapHandle
}

type snapHandle struct {
	snap kv.Snapshot
	refs int
}

func newSnapshots() *snapshots { return &snapshots{m: map[uint64]*snapHandle{}} }

// prepare makes sure a KV snapshot of the current state (at index) exists,
// and closes unused ones of older indexes.
func (s *snapshots) prepare(index uint64, db kv.Store) {
	if _, ok := s.m[index]; ok {
		return
	}
	s.gc()
	s.m[index] = &snapHandle{snap: db.Snapshot()}
}

// acquire takes a reference to the snapshot at index, or returns nil.
func (s *snapshots) acquire(index uint64) kv.Snapshot {
	h := s.m[index]
	if h == nil {
		return nil
	}
	h.refs++
	return h.snap
}

func (s *snapshots) release(index uint64) {
	if h := s.m[index]; h != nil {
		h.refs--
	}
	s.gc()
}

// gc closes every snapshot no stream uses.
func (s *snapshots) gc() {
	for i, h := range s.m {
		if h.refs <= 0 {
			h.snap.Close()
			delete(s.m, i)
		}
	}
}

func (s *snapshots) closeAll() {
	for i, h := range s.m {
		h.snap.Close()
		delete(s.m, i)
	}
}
