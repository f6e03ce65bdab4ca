package fuse

import (
	"sync"
	"time"
)

// idlePublish: in no-open mode, content written through the mount and not
// flushed for this long is published anyway. The kernel flushes at every
// close(2), but writes through a shared memory map can reach the mount
// after the last close, and no RELEASE comes to say the file is done.
const idlePublish = 2 * time.Second

// noFlushIdle: in noflush mode no close is heard, so content is published
// once it has not changed for this long. With the publisher's tick
// (noFlushIdle/2) and a publish, a write is on every node within
// noFlushBound of its last change (docs/operations.md, the mode table).
const (
	noFlushIdle  = 200 * time.Millisecond
	noFlushBound = time.Second
)

// idleSet is what a no-open mount's nodes hold written and not queued:
// the nodes whose content a FLUSH may never publish (see idlePublish).
type idleSet struct {
	mu    sync.Mutex
	nodes map[*node]string // the node's path when it was last made dirty (forget.go)
	stop  chan struct{}
	done  chan struct{}
}

// add records that n, in the mount's tree (the kernel is using it: a
// write, a truncate, a create), holds content written through the mount.
func (s *idleSet) add(n *node) {
	p := n.storePath()
	s.mu.Lock()
	if s.nodes == nil {
		s.nodes = map[*node]string{}
	}
	s.nodes[n] = p
	s.mu.Unlock()
}

// pathOf returns the path n had when it was last made dirty, if n is in
// the set.
func (s *idleSet) pathOf(n *node) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.nodes[n]
	return p, ok
}

// start publishes, every idlePublish/4, the content not changed for
// idlePublish (in noflush mode, every noFlushIdle/2 what has not changed
// for noFlushIdle), until close.
func (s *idleSet) start(noFlush bool) {
	age, tick := idlePublish, idlePublish/4
	if noFlush {
		age, tick = noFlushIdle, noFlushIdle/2
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.done)
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				s.publish(0) // unmounted: what is left goes now
				return
			case <-t.C:
				s.publish(age)
			}
		}
	}()
}

// close stops the publisher (after the kernel unmounted).
func (s *idleSet) close() {
	if s.stop != nil {
		close(s.stop)
		<-s.done
	}
}

// publish queues the dirty content of every node not changed for age,
// and forgets the nodes with nothing dirty.
func (s *idleSet) publish(age time.Duration) {
	s.mu.Lock()
	nodes := make([]*node, 0, len(s.nodes))
	for n := range s.nodes {
		nodes = append(nodes, n)
	}
	s.mu.Unlock()
	for _, n := range nodes {
		n.mu.Lock()
		w := n.write
		dirty := w != nil && w.dirty && !n.gone
		if dirty && time.Since(w.changed) >= age {
			n.m.wb.enqueue(n, w)
			dirty = false
		}
		if !dirty {
			s.mu.Lock()
			delete(s.nodes, n)
			s.mu.Unlock()
		}
		n.mu.Unlock()
	}
}
