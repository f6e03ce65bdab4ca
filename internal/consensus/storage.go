package consensus

import (
	"encoding/binary"
	"errors"
	"fmt"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-fs/cairn/internal/kv"
)

// Raft's keys in the node's KV store (layout in doc.go). Every key of the
// store outside this prefix is replicated state (the namespace) and travels
// in snapshots.
const raftPrefix = 'R'

var (
	keyHardState   = []byte("Rh")
	keyConfState   = []byte("Rc")
	keyTrunc       = []byte("Rt")
	keyNodeID      = []byte("Rn")
	keyIncarnation = []byte("Ri")
	entryPrefix    = []byte("Re")
	entryEnd       = []byte("Rf")
)

// Replicated keys that consensus (not meta) owns: they are part of the
// state machine and travel in snapshots.
const sessionPrefix = 'P'

func sessionKey(node uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{sessionPrefix}, node)
}

func entryKey(i uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), entryPrefix...), i)
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func getU64(r kv.Reader, key []byte) (uint64, bool, error) {
	v, err := r.Get(key)
	if errors.Is(err, kv.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if len(v) != 8 {
		return 0, false, fmt.Errorf("consensus: key %q: corrupt value of %d bytes", key, len(v))
	}
	return binary.BigEndian.Uint64(v), true, nil
}

func getProto(r kv.Reader, key []byte, m proto.Message) (bool, error) {
	v, err := r.Get(key)
	if errors.Is(err, kv.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := proto.Unmarshal(v, m); err != nil {
		return false, fmt.Errorf("consensus: key %q: %w", key, err)
	}
	return true, nil
}

func mustMarshal(m proto.Message) []byte {
	p, err := proto.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("consensus: marshal %T: %v", m, err)) // only for a nil required field: a bug
	}
	return p
}

// storage implements raft.Storage over the node's KV store. The durable
// state is the source of truth; the struct keeps a copy of the small state
// and a byte-bounded cache of the newest entries. It is used only from the
// loop goroutine (raft calls it from inside RawNode methods), so it has no
// lock. Writes are staged into a kv.Batch by the loop, and the in-memory
// state is updated by the returned function after the batch commits.
type storage struct {
	kv         kv.Store
	hs         *pb.HardState
	cs         *pb.ConfState
	truncIndex uint64 // entries <= truncIndex are gone; FirstIndex = truncIndex+1
	truncTerm  uint64
	last       uint64
	cache      []*pb.Entry // contiguous, ends at last when non-empty
	cacheBytes int
	maxCache   int
	// applied is the index the KV state reflects (meta's applied index);
	// Snapshot describes the state at this index.
	applied uint64
	snaps   *snapshots
}

func openStorage(db kv.Store, maxCache int, snaps *snapshots) (*storage, error) {
	s := &storage{kv: db, hs: &pb.HardState{}, cs: &pb.ConfState{}, maxCache: maxCache, snaps: snaps}
	if _, err := getProto(db, keyHardState, s.hs); err != nil {
		return nil, err
	}
	if _, err := getProto(db, keyConfState, s.cs); err != nil {
		return nil, err
	}
	v, err := db.Get(keyTrunc)
	switch {
	case errors.Is(err, kv.ErrNotFound):
	case err != nil:
		return nil, err
	case len(v) != 16:
		return nil, fmt.Errorf("consensus: corrupt truncated state (%d bytes)", len(v))
	default:
		s.truncIndex, s.truncTerm = binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])
	}
	// Find the last entry and warm the cache with the newest ones. The log
	// is short (it is truncated behind snapshots), so one scan is cheap.
	s.last = s.truncIndex
	var scanErr error
	err = db.Scan(entryKey(s.truncIndex+1), entryEnd, func(k, v []byte) bool {
		i := binary.BigEndian.Uint64(k[len(entryPrefix):])
		if i != s.last+1 {
			scanErr = fmt.Errorf("consensus: raft log has a gap: entry %d after %d", i, s.last)
			return false
		}
		e := &pb.Entry{}
		if err := proto.Unmarshal(v, e); err != nil || e.GetIndex() != i {
			scanErr = fmt.Errorf("consensus: corrupt raft log entry %d: %v", i, err)
			return false
		}
		s.last = i
		s.cacheAppend([]*pb.Entry{e})
		return true
	})
	if err == nil {
		err = scanErr
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

func entrySize(e *pb.Entry) int { return proto.Size(e) }

// cacheAppend adds ents (which start at or before last+1 and overwrite the
// suffix they overlap) and evicts the oldest entries over the byte bound.
func (s *storage) cacheAppend(ents []*pb.Entry) {
	if len(ents) == 0 {
		return
	}
	f := ents[0].GetIndex()
	if len(s.cache) > 0 {
		first := s.cache[0].GetIndex()
		switch {
		case f < first:
			s.cache, s.cacheBytes = nil, 0
		case f <= first+uint64(len(s.cache)):
			for _, e := range s.cache[f-first:] {
				s.cacheBytes -= entrySize(e)
			}
			s.cache = s.cache[: f-first : f-first]
		default: // gap: cannot happen, but never keep a non-contiguous cache
			s.cache, s.cacheBytes = nil, 0
		}
	}
	for _, e := range ents {
		s.cache = append(s.cache, e)
		s.cacheBytes += entrySize(e)
	}
	for len(s.cache) > 1 && s.cacheBytes > s.maxCache {
		s.cacheBytes -= entrySize(s.cache[0])
		s.cache = s.cache[1:]
	}
}

func (s *storage) cacheDropThrough(i uint64) {
	for len(s.cache) > 0 && s.cache[0].GetIndex() <= i {
		s.cacheBytes -= entrySize(s.cache[0])
		s.cache = s.cache[1:]
	}
}

// InitialState implements raft.Storage.
func (s *storage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	return proto.Clone(s.hs).(*pb.HardState), proto.Clone(s.cs).(*pb.ConfState), nil
}

// FirstIndex implements raft.Storage.
func (s *storage) FirstIndex() (uint64, error) { return s.truncIndex + 1, nil }

// LastIndex implements raft.Storage.
func (s *storage) LastIndex() (uint64, error) { return s.last, nil }

// Term implements raft.Storage.
func (s *storage) Term(i uint64) (uint64, error) {
	switch {
	case i == s.truncIndex:
		return s.truncTerm, nil
	case i < s.truncIndex:
		return 0, raft.ErrCompacted
	case i > s.last:
		return 0, raft.ErrUnavailable
	}
	if e := s.cached(i); e != nil {
		return e.GetTerm(), nil
	}
	e, err := s.readEntry(i)
	if err != nil {
		return 0, err
	}
	return e.GetTerm(), nil
}

func (s *storage) cached(i uint64) *pb.Entry {
	if len(s.cache) == 0 {
		return nil
	}
	first := s.cache[0].GetIndex()
	if i < first || i > s.last {
		return nil
	}
	return s.cache[i-first]
}

func (s *storage) readEntry(i uint64) (*pb.Entry, error) {
	v, err := s.kv.Get(entryKey(i))
	if err != nil {
		return nil, fmt.Errorf("consensus: read raft entry %d: %w", i, err)
	}
	e := &pb.Entry{}
	if err := proto.Unmarshal(v, e); err != nil {
		return nil, fmt.Errorf("consensus: decode raft entry %d: %w", i, err)
	}
	return e, nil
}

// Entries implements raft.Storage.
func (s *storage) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	if lo <= s.truncIndex {
		return nil, raft.ErrCompacted
	}
	if hi > s.last+1 || lo > hi {
		return nil, raft.ErrUnavailable
	}
	if lo == hi {
		return nil, nil
	}
	var out []*pb.Entry
	var size uint64
	full := func(e *pb.Entry) bool {
		// At least one entry, then as many as fit in maxSize.
		size += uint64(entrySize(e))
		if len(out) > 0 && size > maxSize {
			return true
		}
		out = append(out, e)
		return false
	}
	cacheFirst := s.last + 1
	if len(s.cache) > 0 {
		cacheFirst = s.cache[0].GetIndex()
	}
	if lo < cacheFirst {
		next := lo
		var scanErr error
		stop := false
		err := s.kv.Scan(entryKey(lo), entryKey(min(hi, cacheFirst)), func(k, v []byte) bool {
			e := &pb.Entry{}
			if err := proto.Unmarshal(v, e); err != nil || e.GetIndex() != next {
				scanErr = fmt.Errorf("consensus: raft entry %d: corrupt or missing (%v)", next, err)
				return false
			}
			next++
			if full(e) {
				stop = true
				return false
			}
			return true
		})
		if err == nil {
			err = scanErr
		}
		if err != nil {
			return nil, err
		}
		if stop || hi <= cacheFirst {
			if !stop && next != hi {
				return nil, raft.ErrUnavailable
			}
			return out, nil
		}
		if next != cacheFirst {
			return nil, raft.ErrUnavailable
		}
		lo = cacheFirst
	}
	for i := lo; i < hi; i++ {
		if full(s.cached(i)) {
			break
		}
	}
	return out, nil
}

// Snapshot implements raft.Storage. A snapshot is the KV state at the
// applied index, taken now (the loop applies entries between raft calls, so
// the applied index and the store agree here) and streamed later by the
// transport; Data stays empty.
func (s *storage) Snapshot() (*pb.Snapshot, error) {
	if s.applied == 0 {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	term, err := s.Term(s.applied)
	if err != nil {
		return nil, err
	}
	s.snaps.prepare(s.applied, s.kv)
	return &pb.Snapshot{Metadata: &pb.SnapshotMetadata{
		Index: new(s.applied), Term: new(term), ConfState: proto.Clone(s.cs).(*pb.ConfState),
	}}, nil
}

// stageAppend writes ents (overwriting any suffix they conflict with) into b.
func (s *storage) stageAppend(b kv.Batch, ents []*pb.Entry) (func(), error) {
	if len(ents) == 0 {
		return func() {}, nil
	}
	first := ents[0].GetIndex()
	if first <= s.truncIndex || first > s.last+1 {
		return nil, fmt.Errorf("consensus: append at %d outside log (%d, %d]", first, s.truncIndex, s.last+1)
	}
	for _, e := range ents {
		if err := b.Set(entryKey(e.GetIndex()), mustMarshal(e)); err != nil {
			return nil, err
		}
	}
	newLast := ents[len(ents)-1].GetIndex()
	for i := newLast + 1; i <= s.last; i++ { // a shorter overwrite drops the old tail
		if err := b.Delete(entryKey(i)); err != nil {
			return nil, err
		}
	}
	return func() {
		s.last = newLast
		s.cacheAppend(ents)
	}, nil
}

func (s *storage) stageHardState(b kv.Batch, hs *pb.HardState) (func(), error) {
	hs = proto.Clone(hs).(*pb.HardState)
	if err := b.Set(keyHardState, mustMarshal(hs)); err != nil {
		return nil, err
	}
	return func() { s.hs = hs }, nil
}

func truncValue(index, term uint64) []byte {
	return binary.BigEndian.AppendUint64(u64(index), term)
}

// stageSnapshot replaces the whole log by the snapshot's truncation point.
// The namespace records are already in b (see ApplySnapshot).
func (s *storage) stageSnapshot(b kv.Batch, snap *pb.Snapshot) (func(), error) {
	md := snap.GetMetadata()
	var keys [][]byte
	if err := s.kv.Scan(entryPrefix, entryEnd, func(k, _ []byte) bool {
		keys = append(keys, append([]byte(nil), k...))
		return true
	}); err != nil {
		return nil, err
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return nil, err
		}
	}
	cs := proto.Clone(md.GetConfState()).(*pb.ConfState)
	if err := b.Set(keyTrunc, truncValue(md.GetIndex(), md.GetTerm())); err != nil {
		return nil, err
	}
	if err := b.Set(keyConfState, mustMarshal(cs)); err != nil {
		return nil, err
	}
	return func() {
		s.truncIndex, s.truncTerm = md.GetIndex(), md.GetTerm()
		s.last = md.GetIndex()
		s.cache, s.cacheBytes = nil, 0
		s.cs = cs
		s.applied = md.GetIndex()
	}, nil
}

// stageCompact deletes entries up to and including to (which must be
// applied) and records the new truncation point.
func (s *storage) stageCompact(b kv.Batch, to uint64) (func(), error) {
	if to <= s.truncIndex || to > s.applied {
		return func() {}, nil
	}
	term, err := s.Term(to)
	if err != nil {
		return nil, err
	}
	for i := s.truncIndex + 1; i <= to; i++ {
		if err := b.Delete(entryKey(i)); err != nil {
			return nil, err
		}
	}
	if err := b.Set(keyTrunc, truncValue(to, term)); err != nil {
		return nil, err
	}
	return func() {
		s.truncIndex, s.truncTerm = to, term
		s.cacheDropThrough(to)
	}, nil
}
