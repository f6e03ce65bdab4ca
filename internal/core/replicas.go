package core

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/spill"
)

// spillReplicas is the meta.BlobReplicas of a repair pass: the blobs of
// buckets whose R is above the smallest, with their R, in a spill.Map (in
// memory up to its bound, then on disk), so that the pass's memory does
// not grow with the number of such blobs.
type spillReplicas struct{ m *spill.Map }

var _ meta.BlobReplicas = spillReplicas{}

func (s spillReplicas) Get(h cas.Hash) (int, bool, error) {
	v, ok, err := s.m.Get(h[:])
	if err != nil || !ok {
		return 0, false, err
	}
	rf, n := binary.Varint(v)
	if n <= 0 {
		return 0, false, fmt.Errorf("core: replication factor of %x: %d bytes", h[:4], len(v))
	}
	return int(rf), true, nil
}

func (s spillReplicas) Set(h cas.Hash, rf int) error {
	return s.m.Set(h[:], binary.AppendVarint(nil, int64(rf)))
}

// referencedBlobs runs r.ReferencedBlobs with its per-blob factors in a
// spill.Map under dir (memEntries: spill.Options.MemEntries).
func referencedBlobs(r *meta.Reader, defaultReplicas int, dir string, memEntries int, fn func(cas.Hash, int) bool) error {
	m := spill.New(spill.Options{Dir: dir, MemEntries: memEntries})
	defer m.Close()
	return r.ReferencedBlobs(defaultReplicas, spillReplicas{m}, fn)
}

// prepareTempDir makes dir and removes what passes of an earlier run left
// in it (a crash in the middle of a spilled pass).
func prepareTempDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("core: temporary directory: %w", err)
	}
	old, _ := filepath.Glob(filepath.Join(dir, "cairn-spill-*"))
	for _, d := range old {
		os.RemoveAll(d)
	}
	return nil
}
