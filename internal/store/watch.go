package store

import (
	"sync"
	"sync/atomic"
)

// Watcher is told of applied namespace changes: paths ("bucket/path") whose
// content, attributes or resolution a change touched, or all (a directory
// renamed, a bucket changed, a snapshot installed: anything may have
// changed). It runs on the goroutine that applies the log, before the
// change is visible to readers that wait for its index: it must not block
// nor call the store (queue the work). The mount uses it to invalidate the
// kernel's caches.
type Watcher func(paths []string, all bool)

// watchers is the set of registered Watchers, copied on write.
type watchers struct {
	mu   sync.Mutex
	list atomic.Pointer[[]*Watcher]
}

// Watch registers fn (see Watcher) and returns a function that
// unregisters it. Safe for concurrent use.
func (s *Local) Watch(fn Watcher) (cancel func()) {
	w := &fn
	s.watch.mu.Lock()
	defer s.watch.mu.Unlock()
	var next []*Watcher
	if cur := s.watch.list.Load(); cur != nil {
		next = append(next, *cur...)
	}
	next = append(next, w)
	s.watch.list.Store(&next)
	return func() {
		s.watch.mu.Lock()
		defer s.watch.mu.Unlock()
		var rest []*Watcher
		for _, x := range *s.watch.list.Load() {
			if x != w {
				rest = append(rest, x)
			}
		}
		s.watch.list.Store(&rest)
	}
}

// notify calls every Watcher.
func (s *Local) notify(paths []string, all bool) {
	cur := s.watch.list.Load()
	if cur == nil || (len(paths) == 0 && !all) {
		return
	}
	for _, w := range *cur {
		(*w)(paths, all)
	}
}
