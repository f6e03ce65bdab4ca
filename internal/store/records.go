package store

import (
	"context"
	"sync"

	"github.com/cairn-fs/cairn/internal/meta"
)

// Records is the store's API for records: small cluster-wide settings
// kept in the log (access keys, abuse rules, WebDAV locks; Record), so
// every node knows them within the propagation bound. Local implements
// it. The admin front end (internal/frontend/admin) uses it to manage keys
// and rules, the node to keep internal/access's tables current.
type Records interface {
	// PutRecord creates or replaces record name of kind k and returns its
	// name: "" asks for the kind's next sequence number ("1", "2", ...).
	// exclusive refuses to replace an existing record (ErrExists).
	PutRecord(ctx context.Context, k meta.RecordKind, name string, value []byte, exclusive bool) (string, error)
	// DeleteRecord removes a record; ErrNotFound if there is none.
	DeleteRecord(ctx context.Context, k meta.RecordKind, name string) error
	// ListRecords returns every record of kind k in name order, as this
	// node has applied them.
	ListRecords(ctx context.Context, k meta.RecordKind) ([]meta.Record, error)
	// WatchRecords calls fn after records changed (any kind). fn runs on
	// the goroutine that applies the log: it must not block nor call the
	// store (signal a goroutine). The returned function unregisters it.
	WatchRecords(fn func()) (cancel func())
}

// Record and RecordKind are the namespace's (meta) record types, named
// here so that users of Records need not import meta.
type (
	Record     = meta.Record
	RecordKind = meta.RecordKind
)

// The kinds of record.
const (
	RecordKey  = meta.RecordKey  // access keys and their grants (internal/access)
	RecordRule = meta.RecordRule // abuse rules (internal/access/rules)
	RecordLock = meta.RecordLock // WebDAV locks, by token (internal/frontend/webdav)
)

var _ Records = (*Local)(nil)

// PutRecord implements Records.
func (s *Local) PutRecord(ctx context.Context, k meta.RecordKind, name string, value []byte, exclusive bool) (string, error) {
	res, err := s.propose(ctx, meta.Command{Op: meta.OpPutRecord, IfNoneMatchAny: exclusive,
		Record: &meta.Record{Kind: k, Name: name, Value: value}})
	if err != nil {
		return "", err
	}
	return res.Name, nil
}

// DeleteRecord implements Records.
func (s *Local) DeleteRecord(ctx context.Context, k meta.RecordKind, name string) error {
	_, err := s.propose(ctx, meta.Command{Op: meta.OpDeleteRecord, Record: &meta.Record{Kind: k, Name: name}})
	return err
}

// ListRecords implements Records.
func (s *Local) ListRecords(_ context.Context, k meta.RecordKind) ([]meta.Record, error) {
	recs, err := s.meta.Records(k)
	return recs, mapErr(err)
}

// recordWatchers is the set of WatchRecords callbacks.
type recordWatchers struct {
	mu   sync.Mutex
	next int
	fns  map[int]func()
}

// WatchRecords implements Records.
func (s *Local) WatchRecords(fn func()) (cancel func()) {
	w := &s.recWatch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fns == nil {
		w.fns = map[int]func(){}
	}
	id := w.next
	w.next++
	w.fns[id] = fn
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.fns, id)
	}
}

// recordsChanged calls every WatchRecords callback.
func (s *Local) recordsChanged() {
	w := &s.recWatch
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, fn := range w.fns {
		fn()
	}
}
