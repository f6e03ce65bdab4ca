package meta

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	"github.com/cairn-fs/cairn/internal/cas"
)

// ReapMarkerWindow is how many log indices a reaped marker (`x` key) is
// kept after the reap that wrote it. An OpPutFile whose StartIndex is
// older than index-ReapMarkerWindow can no longer be checked against
// pruned markers, so it fails with ErrBlobReaped if it references a blob
// with no refcount entry (see OpPutFile in doc.go).
const ReapMarkerWindow = 1 << 22

// adjustRefs applies per-blob reference deltas in hash order, keeping the
// garbage queue in step: a count that reaches 0 queues the blob at now, a
// count that leaves 0 dequeues it.
func (a *applier) adjustRefs(delta map[cas.Hash]int64) error {
	hashes := slices.SortedFunc(maps.Keys(delta), func(x, y cas.Hash) int { return bytes.Compare(x[:], y[:]) })
	for _, h := range hashes {
		d := delta[h]
		if d == 0 {
			continue
		}
		v, known, err := a.r.get(refKey(h))
		if err != nil {
			return err
		}
		var old uint64
		if known {
			if len(v) != 8 {
				return errCorrupt("%q: %d-byte value", refKey(h), len(v))
			}
			old = binary.BigEndian.Uint64(v)
		}
		nv := int64(old) + d
		if nv < 0 {
			return errCorrupt("refcount of %s would go negative (%d%+d)", h, old, d)
		}
		a.t.set(refKey(h), u64(uint64(nv)))
		switch {
		case old == 0 && nv > 0 && known:
			// Only a blob with a refcount entry can be queued: the queue
			// entry is written with a count of 0 and both go together
			// (reap), so a blob without one (new, or reaped) skips the read.
			if err := a.dequeueGarbage(h); err != nil {
				return err
			}
		case old > 0 && nv == 0:
			a.t.set(garbageKey(a.now, h), nil)
			a.t.set(garbageHashKey(h), u64(sortableTime(a.now)))
		}
	}
	return nil
}

func (a *applier) dequeueGarbage(h cas.Hash) error {
	v, ok, err := a.r.get(garbageHashKey(h))
	if err != nil || !ok {
		return err
	}
	if len(v) != 8 {
		return errCorrupt("garbage time of %s: %d bytes", h, len(v))
	}
	a.t.del(garbageKey(unsortableTime(binary.BigEndian.Uint64(v)), h))
	a.t.del(garbageHashKey(h))
	return nil
}

// checkReaped fails with ErrBlobReaped if a blob of the new file may have
// been deleted by a reap the proposer did not see. A blob with a refcount
// entry has not been reaped since it was last written, so it is safe.
func (a *applier) checkReaped(exts []Extent) error {
	if len(exts) > 0 && a.cmd.StartIndex+ReapMarkerWindow >= a.index {
		// With no reaped marker at all, every blob passes below (a
		// referenced one, or one without a marker whose start index is in
		// the window): skip its reads. A bulk upload into a tree that
		// nothing was reaped from pays no lookup per blob.
		if any, err := a.anyReaped(); err != nil || !any {
			return err
		}
	}
	for _, x := range exts {
		if _, ok, err := a.r.get(refKey(x.Hash)); err != nil {
			return err
		} else if ok {
			continue
		}
		at, ok, err := a.reapedMarker(x.Hash)
		if err != nil {
			return err
		}
		switch {
		case ok && len(at) != 8:
			return errCorrupt("reaped marker of %s: %d bytes", x.Hash, len(at))
		case ok && binary.BigEndian.Uint64(at) > a.cmd.StartIndex:
			return fmt.Errorf("blob %s reaped at index %d after start index %d: %w",
				x.Hash, binary.BigEndian.Uint64(at), a.cmd.StartIndex, ErrBlobReaped)
		case !ok && a.cmd.StartIndex+ReapMarkerWindow < a.index:
			return fmt.Errorf("start index %d older than the reap marker window at %d: %w",
				a.cmd.StartIndex, a.index, ErrBlobReaped)
		}
	}
	return nil
}

// reapedMarker returns blob h's reaped marker like a.r.get. While no
// marker exists at all (found with one scan per Apply), it answers "absent"
// without a read: an ingest then skips one negative lookup per blob.
func (a *applier) reapedMarker(h cas.Hash) ([]byte, bool, error) {
	if any, err := a.anyReaped(); err != nil || !any {
		return nil, false, err
	}
	return a.r.get(reapedKey(h))
}

// anyReaped reports whether a reaped marker exists (one scan per Apply).
func (a *applier) anyReaped() (bool, error) {
	if !a.st.reapedKnown {
		found := false
		p := []byte{pReaped}
		if err := a.t.Scan(p, prefixEnd(p), func(_, _ []byte) bool { found = true; return false }); err != nil {
			return false, err
		}
		a.st.reapedKnown, a.st.anyReaped = true, found
	}
	return a.st.anyReaped, nil
}

// --- garbage ---

func (a *applier) reap() (Result, error) {
	var freed []cas.Hash
	for _, h := range a.cmd.Reap {
		if rc, err := a.r.RefCount(h); err != nil {
			return Result{}, err
		} else if rc != 0 {
			continue
		}
		v, ok, err := a.r.get(garbageHashKey(h))
		if err != nil {
			return Result{}, err
		}
		if !ok {
			continue // never garbage, or already reaped
		}
		if len(v) != 8 {
			return Result{}, errCorrupt("garbage time of %s: %d bytes", h, len(v))
		}
		if unsortableTime(binary.BigEndian.Uint64(v)) >= a.cmd.ReapBefore {
			continue
		}
		if err := a.dequeueGarbage(h); err != nil {
			return Result{}, err
		}
		a.t.del(refKey(h))
		if err := a.markReaped(h); err != nil {
			return Result{}, err
		}
		freed = append(freed, h)
	}
	if err := a.pruneMarkers(); err != nil {
		return Result{}, err
	}
	return Result{Freed: freed}, nil
}

// reapOrphans approves deleting every blob of the command that has no
// refcount entry: no file references it and it is not queued as garbage
// (OpReap decides those). Such a copy is left by an upload that never
// committed, or was spared by a replica put whose upload the log then
// refused. The marker written at this index makes the log refuse any
// upload that started before it and names the blob (checkReaped), so a
// copy deleted on this word cannot be one an accepted file relies on; an
// upload started after it put its copies through the reap guard, which
// spares them.
func (a *applier) reapOrphans() (Result, error) {
	var freed []cas.Hash
	for _, h := range a.cmd.Reap {
		if _, ok, err := a.r.get(refKey(h)); err != nil {
			return Result{}, err
		} else if ok {
			continue // referenced, or garbage that OpReap will decide
		}
		if at, ok, err := a.r.get(reapedKey(h)); err != nil {
			return Result{}, err
		} else if ok && len(at) == 8 && binary.BigEndian.Uint64(at) == a.index {
			continue // listed twice
		}
		if err := a.markReaped(h); err != nil {
			return Result{}, err
		}
		freed = append(freed, h)
	}
	if err := a.pruneMarkers(); err != nil {
		return Result{}, err
	}
	return Result{Freed: freed}, nil
}

// markReaped records that the entry being applied approved deleting h
// (its x marker, moved to this index, and y index key), and drops h's
// under-replicated record: no copy is wanted any more.
func (a *applier) markReaped(h cas.Hash) error {
	if prev, ok, err := a.r.get(reapedKey(h)); err != nil {
		return err
	} else if ok && len(prev) == 8 {
		a.t.del(reapedIndexKey(binary.BigEndian.Uint64(prev), h))
	}
	a.t.set(reapedKey(h), u64(a.index))
	a.t.set(reapedIndexKey(a.index, h), nil)
	return a.clearUnder(h)
}

// --- under-replicated blobs ---

// markUnder records blob h as under-replicated, written to a bucket of R
// replicas (0: the default). A blob already recorded keeps its record.
func (a *applier) markUnder(h cas.Hash, replicas int32) error {
	if _, ok, err := a.r.get(underKey(h)); err != nil || ok {
		return err
	}
	e := encoder{}
	e.varint(a.now)
	e.varint(int64(replicas))
	a.t.set(underKey(h), e.b)
	return a.addUnder(1)
}

// clearUnder drops blob h's under-replicated record, if any.
func (a *applier) clearUnder(h cas.Hash) error {
	if _, ok, err := a.r.get(underKey(h)); err != nil || !ok {
		return err
	}
	a.t.del(underKey(h))
	return a.addUnder(-1)
}

func (a *applier) addUnder(d int64) error {
	n, err := a.r.getU64(keyUnder)
	if err != nil {
		return err
	}
	a.t.set(keyUnder, u64(uint64(int64(n)+d)))
	return nil
}

// replicated drops the under-replicated records of the blobs repair found
// fully copied.
func (a *applier) replicated() (Result, error) {
	for _, h := range a.cmd.Replicated {
		if err := a.clearUnder(h); err != nil {
			return Result{}, err
		}
	}
	return Result{}, nil
}

// pruneMarkers deletes reaped markers written more than ReapMarkerWindow
// indices before this one.
func (a *applier) pruneMarkers() error {
	if a.index <= ReapMarkerWindow {
		return nil
	}
	lower := []byte{pReapedI}
	upper := reapedIndexKey(a.index-ReapMarkerWindow, cas.Hash{})
	var old [][]byte
	if err := a.t.Scan(lower, upper, func(k, _ []byte) bool {
		old = append(old, bytes.Clone(k))
		return true
	}); err != nil {
		return err
	}
	for _, k := range old {
		if len(k) != 1+8+32 {
			return errCorrupt("reaped index key of %d bytes", len(k))
		}
		var h cas.Hash
		copy(h[:], k[9:])
		a.t.del(k)
		a.t.del(reapedKey(h))
	}
	return nil
}
