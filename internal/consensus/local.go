package consensus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
)

// ErrStopped is returned by Propose after Close, or after the log stopped on
// a storage failure.
var ErrStopped = errors.New("consensus: log stopped")

// Log orders namespace commands and applies them to the local store. The
// single-node implementation is Local; the Raft-backed one replicates each
// entry to a quorum before applying it. Both apply every entry with
// meta.Apply onto one KV batch that also records the applied index.
type Log interface {
	// Propose submits cmd and blocks until it is applied locally (durably)
	// or ctx ends. The Result is the local application's outcome.
	Propose(ctx context.Context, cmd meta.Command) (meta.Result, error)
	// AppliedIndex is the index of the last entry applied locally.
	AppliedIndex() uint64
	Close() error
}

// ReadIndexer is implemented by a Log that can serve linearizable reads
// (Local and Raft do). A read of the local store after ReadIndex and then
// WaitApplied of its index returned sees every write acknowledged anywhere
// before ReadIndex was called. Checked with a type assertion, so that a Log
// need not implement it.
type ReadIndexer interface {
	// ReadIndex returns an index that reflects every entry committed before
	// the call (the leader's commit index, confirmed by a quorum). It fails
	// with an error wrapping ErrUnavailable when no leader answers before
	// ctx ends, or ErrStopped.
	ReadIndex(ctx context.Context) (uint64, error)
	// WaitApplied blocks until the local applied index is at least index.
	WaitApplied(ctx context.Context, index uint64) error
}

// OrderedProposer is implemented by a Log that takes several commands in
// one call (Local and Raft do): they are handed to the log in the order
// given, without waiting for one to apply before the next, so they apply
// in that order (a follower forwards them to the leader in order). Each
// has its own outcome, as from Propose; a command that could not be
// handed over fails with the rest after it.
type OrderedProposer interface {
	ProposeMany(ctx context.Context, cmds []meta.Command) ([]meta.Result, []error)
}

var (
	_ OrderedProposer = (*Local)(nil)
	_ OrderedProposer = (*Raft)(nil)
	_ ReadIndexer     = (*Local)(nil)
	_ ReadIndexer     = (*Raft)(nil)
)

// LocalConfig configures a Local log.
type LocalConfig struct {
	// KV is the node's store; required.
	KV kv.Store
	// MaxBatch is the maximum number of commands in one entry. Default 256.
	MaxBatch int
	// OnApply, if set, is called after each entry commits, in log order,
	// from the apply goroutine, with the entry's commands and results.
	OnApply func(index uint64, cmds []meta.Command, res []meta.Result)
	// Logger; default slog.Default().
	Logger *slog.Logger
}

type proposal struct {
	cmd  meta.Command
	done chan outcome
}

type outcome struct {
	res meta.Result
	err error
}

// Local is a single-node Log: proposals are batched (many small-file creates
// share one entry and one fsync), applied in order by one goroutine, and
// committed with sync before they are acknowledged.
type Local struct {
	cfg     LocalConfig
	propc   chan proposal
	mu      sync.Mutex
	applied uint64
	stopped chan struct{}
	done    chan struct{}
	err     error
	once    sync.Once
}

// NewLocal starts a Local log over cfg.KV, resuming at its applied index.
func NewLocal(cfg LocalConfig) (*Local, error) {
	if cfg.KV == nil {
		return nil, errors.New("consensus: LocalConfig.KV is required")
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 256
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	idx, err := meta.NewReader(cfg.KV).AppliedIndex()
	if err != nil {
		return nil, fmt.Errorf("consensus: read applied index: %w", err)
	}
	l := &Local{cfg: cfg, propc: make(chan proposal, 1024), applied: idx,
		stopped: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l, nil
}

// AppliedIndex returns the index of the last applied entry.
func (l *Local) AppliedIndex() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.applied
}

// ReadIndex implements ReadIndexer: a single node's log has no other
// writer, so its applied index is always current.
func (l *Local) ReadIndex(ctx context.Context) (uint64, error) {
	return l.AppliedIndex(), nil
}

// WaitApplied implements ReadIndexer. Every index Local hands out is
// already applied; a later one fails at once rather than wait.
func (l *Local) WaitApplied(ctx context.Context, index uint64) error {
	if a := l.AppliedIndex(); a < index {
		return fmt.Errorf("%w: index %d is past the applied index %d of a local log", ErrUnavailable, index, a)
	}
	return nil
}

// Propose implements Log.
func (l *Local) Propose(ctx context.Context, cmd meta.Command) (meta.Result, error) {
	p, err := l.submit(ctx, cmd)
	if err != nil {
		return meta.Result{}, err
	}
	return l.await(p)
}

// ProposeMany implements OrderedProposer.
func (l *Local) ProposeMany(ctx context.Context, cmds []meta.Command) ([]meta.Result, []error) {
	return proposeMany(ctx, cmds, l.submit, l.await)
}

// submit queues cmd (ctx bounds only the queueing).
func (l *Local) submit(ctx context.Context, cmd meta.Command) (proposal, error) {
	p := proposal{cmd: cmd, done: make(chan outcome, 1)}
	select {
	case l.propc <- p:
		return p, nil
	case <-l.stopped:
		return p, l.stopErr()
	case <-ctx.Done():
		return p, ctx.Err()
	}
}

// await returns the outcome of a queued proposal.
func (l *Local) await(p proposal) (meta.Result, error) {
	// Once queued, the command will be applied whatever ctx does: wait for
	// its outcome so the caller never reports failure for a change that
	// lands (ctx only bounds the queueing). The submit may queue it after
	// the loop has drained the queue and exited (both cases ready): then
	// nobody will answer, and it was not applied.
	select {
	case o := <-p.done:
		return o.res, o.err
	case <-l.done:
		select {
		case o := <-p.done: // answered before the loop exited
			return o.res, o.err
		default:
			return meta.Result{}, l.stopErr()
		}
	}
}

// proposeMany submits cmds in order, then waits for each: the shared body
// of ProposeMany.
func proposeMany[P any](ctx context.Context, cmds []meta.Command, submit func(context.Context, meta.Command) (P, error),
	await func(P) (meta.Result, error)) ([]meta.Result, []error) {
	res := make([]meta.Result, len(cmds))
	errs := make([]error, len(cmds))
	ps := make([]P, len(cmds))
	n := 0
	for ; n < len(cmds); n++ {
		p, err := submit(ctx, cmds[n])
		if err != nil {
			for i := n; i < len(cmds); i++ {
				errs[i] = err // not proposed
			}
			break
		}
		ps[n] = p
	}
	for i := range n {
		res[i], errs[i] = await(ps[i])
	}
	return res, errs
}

func (l *Local) stopErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return fmt.Errorf("%w: %v", ErrStopped, l.err)
	}
	return ErrStopped
}

func (l *Local) run() {
	defer close(l.done)
	batch := make([]proposal, 0, l.cfg.MaxBatch)
	for {
		var first proposal
		select {
		case <-l.stopped: // Close wins over a non-empty queue
			l.drain(nil)
			return
		default:
		}
		select {
		case first = <-l.propc:
		case <-l.stopped:
			l.drain(nil)
			return
		}
		batch = append(batch[:0], first)
	fill:
		for len(batch) < l.cfg.MaxBatch {
			select {
			case p := <-l.propc:
				batch = append(batch, p)
			default:
				break fill
			}
		}
		if err := l.apply(batch); err != nil {
			// A failed commit is never retried: stop the log and say why.
			l.cfg.Logger.Error("namespace commit failed; log stopped", "err", err)
			l.mu.Lock()
			l.err = err
			l.mu.Unlock()
			for _, p := range batch {
				p.done <- outcome{err: fmt.Errorf("%w: %v", ErrStopped, err)}
			}
			l.once.Do(func() { close(l.stopped) })
			l.drain(err)
			return
		}
	}
}

func (l *Local) drain(err error) {
	for {
		select {
		case p := <-l.propc:
			if err == nil {
				err = ErrStopped
			}
			p.done <- outcome{err: fmt.Errorf("%w: %v", ErrStopped, err)}
		default:
			return
		}
	}
}

func (l *Local) apply(batch []proposal) error {
	cmds := make([]meta.Command, len(batch))
	for i, p := range batch {
		cmds[i] = p.cmd
	}
	l.mu.Lock()
	index := l.applied + 1
	l.mu.Unlock()
	b := l.cfg.KV.NewBatch()
	defer b.Close()
	res, err := meta.Apply(b, index, cmds)
	if err != nil {
		return fmt.Errorf("apply entry %d: %w", index, err)
	}
	if err := b.Commit(true); err != nil {
		return fmt.Errorf("commit entry %d: %w", index, err)
	}
	// OnApply (cache invalidation) runs before the index is published.
	if l.cfg.OnApply != nil {
		l.cfg.OnApply(index, cmds, res)
	}
	l.mu.Lock()
	l.applied = index
	l.mu.Unlock()
	for i, p := range batch {
		p.done <- outcome{res: res[i]}
	}
	return nil
}

// Close stops the log after the entry being applied; queued proposals fail
// with ErrStopped.
func (l *Local) Close() error {
	l.once.Do(func() { close(l.stopped) })
	<-l.done
	return nil
}
