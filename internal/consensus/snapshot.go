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

// snapStream reads the records of a snapshot stream one at a time,
// checking the header against index and term, key order and sizes as it
// goes, and the record count and the checksum at the end (finish).
type snapStream struct {
	r           *snapReader
	index       uint64
	prev        []byte
	count       uint64
	ended       bool
	applied     []byte // the value of meta's applied-index key
	appliedSeen bool
}

func badSnap(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadSnapshot, fmt.Sprintf(format, args...))
}

func openSnapStream(body io.Reader, index, term uint64) (*snapStream, error) {
	r := &snapReader{br: bufio.NewReaderSize(body, 64<<10)}
	hdr := make([]byte, len(snapMagic)+1+16)
	if err := r.full(hdr); err != nil {
		return nil, badSnap("header: %v", err)
	}
	if !bytes.Equal(hdr[:8], snapMagic[:]) || hdr[8] != snapVersion {
		return nil, badSnap("magic or version")
	}
	if gi, gt := binary.BigEndian.Uint64(hdr[9:]), binary.BigEndian.Uint64(hdr[17:]); gi != index || gt != term {
		return nil, badSnap("stream is index %d term %d, message says %d/%d", gi, gt, index, term)
	}
	return &snapStream{r: r, index: index}, nil
}

// next returns the next record (k and v are the caller's), or ok false
// after the last one.
func (s *snapStream) next() (k, v []byte, ok bool, err error) {
	if s.ended {
		return nil, nil, false, nil
	}
	r := s.r
	kl, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, nil, false, badSnap("record %d: %v", s.count, err)
	}
	if kl == 0 {
		s.ended = true
		return nil, nil, false, nil
	}
	if kl > maxSnapKey {
		return nil, nil, false, badSnap("key of %d bytes", kl)
	}
	k = make([]byte, kl)
	if err := r.full(k); err != nil {
		return nil, nil, false, badSnap("record %d key: %v", s.count, err)
	}
	if k[0] == raftPrefix || (s.prev != nil && bytes.Compare(s.prev, k) >= 0) {
		return nil, nil, false, badSnap("record %d: key %q out of order or reserved", s.count, k)
	}
	vl, err := binary.ReadUvarint(r)
	if err != nil || vl > maxSnapVal {
		return nil, nil, false, badSnap("record %d value length %d: %v", s.count, vl, err)
	}
	v = make([]byte, vl)
	if err := r.full(v); err != nil {
		return nil, nil, false, badSnap("record %d value: %v", s.count, err)
	}
	if meta.IsAppliedKey(k) {
		s.applied, s.appliedSeen = v, true
	}
	s.prev = k
	s.count++
	return k, v, true, nil
}

// finish reads the trailer and the checksum, and checks that the state
// streamed is at the index the message names.
func (s *snapStream) finish() error {
	r := s.r
	var tr [8]byte
	if err := r.full(tr[:]); err != nil {
		return badSnap("trailer: %v", err)
	}
	if n := binary.BigEndian.Uint64(tr[:]); n != s.count {
		return badSnap("trailer counts %d records, read %d", n, s.count)
	}
	want := r.crc
	var c [4]byte
	if _, err := io.ReadFull(r.br, c[:]); err != nil {
		return badSnap("checksum: %v", err)
	}
	if binary.BigEndian.Uint32(c[:]) != want {
		return badSnap("checksum mismatch")
	}
	if _, err := r.br.ReadByte(); err != io.EOF {
		return badSnap("trailing bytes after checksum")
	}
	applied := uint64(0)
	if s.appliedSeen {
		if len(s.applied) != 8 {
			return badSnap("applied index of %d bytes", len(s.applied))
		}
		applied = binary.BigEndian.Uint64(s.applied)
	}
	if applied != s.index {
		return badSnap("state is at applied index %d, metadata says %d", applied, s.index)
	}
	return nil
}

// inRange reports whether k is in rg ([lower, upper), nil: unbounded).
func inRange(k []byte, rg [2][]byte) bool {
	return (rg[0] == nil || bytes.Compare(k, rg[0]) >= 0) && (rg[1] == nil || bytes.Compare(k, rg[1]) < 0)
}

// stageSnapshotIngest reads a snapshot stream into g, in bounded memory:
// every namespace key of the current state base is deleted and the
// stream's records are set. The stream's records and the current
// state base are merged in key order, a record becomes a Set and a key of
// base the stream does not have a Delete, written into files on the
// store's disk as they come (one or more per namespace range: the Raft
// state, in between, goes into a file of its own at install). Nothing is
// visible until the ingest is applied.
func stageSnapshotIngest(body io.Reader, base kv.Reader, g kv.Ingest, index, term uint64) error {
	st, err := openSnapStream(body, index, term)
	if err != nil {
		return err
	}
	k, v, ok, err := st.next()
	if err != nil {
		return err
	}
	advance := func() error {
		if err := g.Set(k, v); err != nil {
			return err
		}
		k, v, ok, err = st.next()
		return err
	}
	for _, rg := range namespaceRanges {
		var ferr error
		if err := base.Scan(rg[0], rg[1], func(bk, _ []byte) bool {
			for ok && bytes.Compare(k, bk) < 0 {
				if ferr = advance(); ferr != nil {
					return false
				}
			}
			if ok && bytes.Equal(k, bk) {
				ferr = advance()
				return ferr == nil
			}
			ferr = g.Delete(bk)
			return ferr == nil
		}); err != nil {
			return err
		}
		if ferr != nil {
			return ferr
		}
		for ok && inRange(k, rg) {
			if err := advance(); err != nil {
				return err
			}
		}
		if err := g.Cut(); err != nil {
			return err
		}
	}
	if ok {
		return badSnap("record %q outside the namespace", k)
	}
	return st.finish()
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
