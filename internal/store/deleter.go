package store

import (
	"sync"

	"github.com/cairn-fs/cairn/internal/blob"
)

// deleter deletes the local copies of blobs whose reclamation the log
// approved, in the background and in parallel (so their tombstones share
// fsyncs), keeping the namespace apply loop free of blob I/O. If the
// process stops with deletions queued, the blobs are orphans and the
// orphan sweep collects them after GCGrace.
type deleter struct {
	mu      sync.Mutex
	cond    *sync.Cond
	queue   []blob.Hash
	pending int // queued or being deleted
	closed  bool
	done    chan struct{}
	del     func(blob.Hash)
}

// deleteParallelism is how many deletions run at once.
const deleteParallelism = 16

func newDeleter(del func(blob.Hash)) *deleter {
	d := &deleter{del: del, done: make(chan struct{})}
	d.cond = sync.NewCond(&d.mu)
	go d.run()
	return d
}

// add queues hs; it never blocks on I/O.
func (d *deleter) add(hs []blob.Hash) {
	d.mu.Lock()
	if !d.closed {
		d.queue = append(d.queue, hs...)
		d.pending += len(hs)
		d.cond.Broadcast()
	}
	d.mu.Unlock()
}

// wait blocks until nothing is queued or being deleted (or the deleter is
// closed).
func (d *deleter) wait() {
	d.mu.Lock()
	for d.pending > 0 && !d.closed {
		d.cond.Wait()
	}
	d.mu.Unlock()
}

func (d *deleter) close() {
	d.mu.Lock()
	d.closed = true
	d.cond.Broadcast()
	d.mu.Unlock()
	<-d.done
}

func (d *deleter) run() {
	defer close(d.done)
	for {
		d.mu.Lock()
		for len(d.queue) == 0 && !d.closed {
			d.cond.Wait()
		}
		if d.closed {
			d.mu.Unlock()
			return
		}
		n := min(len(d.queue), 256)
		batch := append([]blob.Hash(nil), d.queue[:n]...)
		d.queue = d.queue[n:]
		d.mu.Unlock()

		var wg sync.WaitGroup
		sem := make(chan struct{}, deleteParallelism)
		for _, h := range batch {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				d.del(h)
			}()
		}
		wg.Wait()

		d.mu.Lock()
		d.pending -= n
		d.cond.Broadcast()
		d.mu.Unlock()
	}
}
