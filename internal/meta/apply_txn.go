package meta

import (
	"bytes"
	"errors"
	"maps"
	"slices"

	"github.com/cairn-fs/cairn/internal/kv"
)

// txn stages the writes of one command over the batch so that a command
// that fails can be dropped whole. Reads see the staged writes.
type txn struct {
	b   kv.Batch
	w   map[string][]byte // nil value: deleted
	cow *cow              // copy on write into a snapshot's overlay (apply_snapshot.go)
}

func (t *txn) Get(key []byte) ([]byte, error) {
	if v, ok := t.w[string(key)]; ok {
		if v == nil {
			return nil, kv.ErrNotFound
		}
		return bytes.Clone(v), nil
	}
	v, err := t.b.Get(key)
	if err != nil && !errors.Is(err, kv.ErrNotFound) {
		return nil, &kvFailure{err}
	}
	return v, err
}

func (t *txn) Scan(lower, upper []byte, fn func(k, v []byte) bool) error {
	var over []string
	for k := range t.w {
		if (lower == nil || k >= string(lower)) && (upper == nil || k < string(upper)) {
			over = append(over, k)
		}
	}
	slices.Sort(over)
	err := mergeScan(t.b, lower, upper, over, func(k string) bool {
		if v := t.w[k]; v != nil {
			return fn([]byte(k), v)
		}
		return true // deleted
	}, fn)
	if err != nil {
		return &kvFailure{err}
	}
	return nil
}

// mergeScan calls fn for the keys of base in [lower, upper), merged in
// order with the sorted keys over, which stand for base's: emit yields an
// overlay key (or nothing). Either returning false stops the scan.
func mergeScan(base kv.Reader, lower, upper []byte, over []string, emit func(k string) bool, fn func(k, v []byte) bool) error {
	i, stopped := 0, false
	err := base.Scan(lower, upper, func(k, v []byte) bool {
		for ; i < len(over) && over[i] < string(k); i++ {
			if !emit(over[i]) {
				stopped = true
				return false
			}
		}
		if i < len(over) && over[i] == string(k) {
			i++
			if !emit(string(k)) {
				stopped = true
				return false
			}
			return true
		}
		if !fn(k, v) {
			stopped = true
			return false
		}
		return true
	})
	if err != nil {
		return err
	}
	for ; !stopped && i < len(over); i++ {
		if !emit(over[i]) {
			break
		}
	}
	return nil
}

func (t *txn) set(k, v []byte) {
	t.capture(k)
	if v == nil {
		v = []byte{}
	}
	t.w[string(k)] = v
}

func (t *txn) del(k []byte) {
	t.capture(k)
	t.w[string(k)] = nil
}

// flush writes the staged changes to the batch in key order.
func (t *txn) flush() error {
	for _, k := range slices.Sorted(maps.Keys(t.w)) {
		var err error
		if v := t.w[k]; v == nil {
			err = t.b.Delete([]byte(k))
		} else {
			err = t.b.Set([]byte(k), v)
		}
		if err != nil {
			return &kvFailure{err}
		}
	}
	return nil
}
