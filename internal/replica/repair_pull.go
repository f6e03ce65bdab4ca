package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/cairn-fs/cairn/internal/clock"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/placement"
)

// pullers runs the pulls of one pass, at most RepairConfig.Parallel at a
// time, under the pass's pacer.
type pullers struct {
	r   *Repairer
	m   *placement.Map
	p   *pacer
	sem chan struct{}
	wg  sync.WaitGroup
	mu  sync.Mutex
	st  RepairStats // Pulled, PulledBytes, PullFailed
}

func (r *Repairer) newPullers(m *placement.Map, p *pacer) *pullers {
	return &pullers{r: r, m: m, p: p, sem: make(chan struct{}, r.cfg.Parallel)}
}

// pull starts the pull of blob h once a slot is free (or does nothing when
// ctx ends first).
func (ps *pullers) pull(ctx context.Context, h blob.Hash) {
	select {
	case ps.sem <- struct{}{}:
	case <-ctx.Done():
		return
	}
	ps.wg.Add(1)
	go func() {
		defer func() { <-ps.sem; ps.wg.Done() }()
		var st RepairStats
		_ = ps.r.pull(ctx, ps.m, ps.p, h, &st) // only ctx's error, which the pass reports
		ps.mu.Lock()
		ps.st.Pulled += st.Pulled
		ps.st.PulledBytes += st.PulledBytes
		ps.st.PullFailed += st.PullFailed
		ps.mu.Unlock()
	}()
}

// wait waits for the pulls started and returns what they did.
func (ps *pullers) wait() RepairStats {
	ps.wg.Wait()
	return ps.st
}

// pull fetches blob h from another node and stores it. It returns an
// error only when ctx ended.
func (r *Repairer) pull(ctx context.Context, m *placement.Map, p *pacer, h blob.Hash, st *RepairStats) error {
	var errs []error
	for _, src := range placement.Sources(m, h) {
		if src == r.cfg.Self {
			continue
		}
		data, err := r.fetchWhole(ctx, src, h)
		if err == nil && blob.Sum(data) != h {
			err = fmt.Errorf("%w: served bytes of %s", blob.ErrCorrupt, blob.Sum(data))
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, fmt.Errorf("node %d: %w", src, err))
			continue
		}
		if err := p.wait(ctx, len(data)); err != nil {
			return err
		}
		if err := r.cfg.Local.Put(h, data); err != nil {
			st.PullFailed++
			r.cfg.Logger.Warn("repair: storing a pulled blob failed", "hash", h.String(), "err", err)
			return nil
		}
		st.Pulled++
		st.PulledBytes += int64(len(data))
		return nil
	}
	st.PullFailed++
	r.cfg.Logger.Debug("repair: no source could serve a blob this node should hold",
		"hash", h.String(), "err", errors.Join(errs...))
	return nil
}

// fetchWhole reads all of blob h from node src.
func (r *Repairer) fetchWhole(ctx context.Context, src placement.NodeID, h blob.Hash) ([]byte, error) {
	ctx, cancel := clock.WithTimeout(ctx, r.cfg.Clock, r.cfg.RequestTimeout)
	defer cancel()
	rc, err := r.cfg.Peers.GetBlob(ctx, src, h, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, io.LimitReader(rc, blob.MaxSize+1)); err != nil {
		return nil, err
	}
	if buf.Len() > blob.MaxSize {
		return nil, fmt.Errorf("%w: more than %d bytes", blob.ErrTooLarge, blob.MaxSize)
	}
	return buf.Bytes(), nil
}

// readLocal reads the whole local copy of h and checks its hash.
func (r *Repairer) readLocal(h blob.Hash) ([]byte, error) {
	n, err := r.cfg.Local.Size(h)
	if err != nil {
		return nil, err
	}
	data := make([]byte, n)
	k, err := r.cfg.Local.ReadAt(h, data, 0)
	if err != nil && !(errors.Is(err, io.EOF) && int64(k) == n) {
		return nil, err
	}
	if int64(k) != n || blob.Sum(data) != h {
		return nil, fmt.Errorf("local copy of %s: %w", h, blob.ErrCorrupt)
	}
	return data, nil
}
