package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/clock"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/placement"
)

// Peers reaches the other nodes. Implementations must be safe for
// concurrent use and honour ctx deadlines promptly.
type Peers interface {
	// PutBlob stores b.Data as blob b.Hash on node to; it returns once
	// durable there. b.CRC, when set, is the CRC32C the receiver checks
	// instead of hashing the bytes again (transport.Client.PutBlob).
	PutBlob(ctx context.Context, to placement.NodeID, b cas.Blob) error
	// GetBlob reads n bytes at off of blob h from node to.
	GetBlob(ctx context.Context, to placement.NodeID, h blob.Hash, off, n int64) (io.ReadCloser, error)
	// HasBlobs asks node to which of hs it holds; the answer has len(hs)
	// entries. Repair uses it to confirm copies before dropping its own.
	HasBlobs(ctx context.Context, to placement.NodeID, hs []blob.Hash) ([]bool, error)
}

// Local is this node's blob store (blob.Store implements it).
type Local interface {
	Put(h blob.Hash, data []byte) error
	Has(h blob.Hash) bool
	ReadAt(h blob.Hash, p []byte, off int64) (int, error)
}

// Config configures a Replicator.
type Config struct {
	// Self is this node's ID. Required.
	Self placement.NodeID
	// Local is this node's blob store. Required.
	Local Local
	// Peers reaches the other nodes. Required.
	Peers Peers
	// Map returns the current placement map (membership, weights, zones,
	// liveness). Required; called once per operation.
	Map func() *placement.Map
	// HedgeAfter is how long a remote read waits before racing a second
	// replica. Default 50 ms.
	HedgeAfter time.Duration
	// ReadTimeout bounds one remote read request. Default 2 s.
	ReadTimeout time.Duration
	// WriteTimeout bounds one replica's write. Default 5 s.
	WriteTimeout time.Duration
	// BackgroundTimeout bounds the sends that go on after Write returned.
	// Default 30 s.
	BackgroundTimeout time.Duration
	// StragglerWait is how long a write that reached its quorum still
	// waits for the targets that have not answered, so that the copies it
	// reports (and the under-replication it records) include a target
	// that just failed: a node killed a moment ago refuses at once, but
	// under load its refusal may come after the quorum's acks. Healthy
	// targets answer together, so it costs nothing then; a hung target
	// costs each write this much until the detector marks it. Default
	// 100 ms.
	StragglerWait time.Duration
	// Batch tunes the coalescing of small blob writes to the same node into
	// one PutBlobs call, used when Peers implements BatchPeers (see
	// Batcher). Zero fields take DefaultBatchConfig's values.
	Batch BatchConfig
	// DisableBatching sends every blob with its own PutBlob call even when
	// Peers implements BatchPeers.
	DisableBatching bool
	// CacheBytes bounds the local cache of blobs read from other nodes
	// (see Cache), in bytes. Default 0: no cache.
	CacheBytes int64
	// CacheMaxItemBytes is the largest blob the cache admits. Default
	// 256 KiB.
	CacheMaxItemBytes int
	// NoLocalCopies: this node keeps no copy of its own (a witness, a
	// client node): a write whose targets still include it (its record
	// in the map not yet updated) fails that target instead of writing
	// to Local, so the copy is missed and repaired, not kept where it
	// would be lost.
	NoLocalCopies bool
	// DiskCache, when set, is the cache of blobs read from other nodes
	// instead of the in-memory one (CacheBytes is then unused): a client
	// node's, on its disk.
	DiskCache *DiskCache
	// Logger; default slog.Default().
	// Clock runs the hedging, straggler and deadline timers. Default
	// clock.Real{}.
	Clock  clock.Clock
	Logger *slog.Logger
}

// DefaultConfig returns the defaults (dependencies unset).
func DefaultConfig() Config {
	return Config{HedgeAfter: 50 * time.Millisecond, ReadTimeout: 2 * time.Second,
		WriteTimeout: 5 * time.Second, BackgroundTimeout: 30 * time.Second,
		StragglerWait: 100 * time.Millisecond}
}

// Validate reports a missing dependency.
func (c *Config) Validate() error {
	switch {
	case c.Self == 0:
		return errors.New("replica: Config.Self is required")
	case c.Local == nil || c.Peers == nil || c.Map == nil:
		return errors.New("replica: Config.Local, Peers and Map are required")
	}
	return nil
}

// Replicator writes and reads blobs across the cluster. Safe for
// concurrent use.
type Replicator struct {
	cfg   Config
	batch *Batcher  // nil: no batching
	cache blobCache // a nil *Cache or *DiskCache: no cache

	under, failed atomic.Int64 // WriteStats
	corrupt       atomic.Int64 // whole blobs fetched whose bytes did not hash to their name
}

// WriteStats counts the outcomes of blob writes since the start.
type WriteStats struct {
	Under  int64 // acknowledged with fewer copies than wanted
	Failed int64 // refused: the copies required could not be made
}

// WriteStats returns the write outcome counters.
func (r *Replicator) WriteStats() WriteStats {
	return WriteStats{Under: r.under.Load(), Failed: r.failed.Load()}
}

// countWrite counts one decided blob write.
func (r *Replicator) countWrite(c placement.Copies, err error) {
	switch {
	case err != nil:
		r.failed.Add(1)
	case c.Under():
		r.under.Add(1)
	}
}

// New returns a Replicator.
func New(cfg Config) (*Replicator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := DefaultConfig()
	if cfg.HedgeAfter <= 0 {
		cfg.HedgeAfter = d.HedgeAfter
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = d.ReadTimeout
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = d.WriteTimeout
	}
	if cfg.BackgroundTimeout <= 0 {
		cfg.BackgroundTimeout = d.BackgroundTimeout
	}
	if cfg.StragglerWait <= 0 {
		cfg.StragglerWait = d.StragglerWait
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Replicator{cfg: cfg, cache: NewCache(cfg.CacheBytes, cfg.CacheMaxItemBytes)}
	if cfg.DiskCache != nil {
		r.cache = cfg.DiskCache
	}
	if bp, ok := cfg.Peers.(BatchPeers); ok && !cfg.DisableBatching {
		r.batch = NewBatcher(cfg.Peers, bp, cfg.Batch)
	}
	return r, nil
}

// CacheStats returns the counters of the remote-blob cache (zero without
// one).
func (r *Replicator) CacheStats() CacheStats {
	st := r.cache.Stats()
	st.Corrupt = r.corrupt.Load()
	return st
}

// BatchStats returns the counters of the write batcher (zero without one).
func (r *Replicator) BatchStats() BatchStats {
	if r.batch == nil {
		return BatchStats{}
	}
	return r.batch.Stats()
}

// WriteResult says where a blob was written.
type WriteResult struct {
	// Acked lists the nodes that acknowledged before Write returned.
	Acked []placement.NodeID
	// Targets are all the nodes the blob was sent to.
	Targets []placement.NodeID
	// Copies is the write's outcome: copies made (or still in flight) and
	// wanted. Copies.Under() marks an under-replicated write.
	Copies placement.Copies
}

// Write sends blob h to its replicas (pol.Replicas copies, capped at the
// data nodes; placement.Mirror for every data node) and returns once
// pol.Quorum of them hold it durably. When fewer targets can be reached
// than the quorum, a non-strict write waits for every target and succeeds
// if at least one holds a copy (res.Copies.Under() then says so); a strict
// one fails. It fails with a *placement.QuorumError (errors.Is
// placement.ErrNoQuorum) when the write cannot succeed, or with ctx's
// error.
func (r *Replicator) Write(ctx context.Context, h blob.Hash, data []byte, pol placement.Policy) (WriteResult, error) {
	targets, t, err := newTally(r.cfg.Map(), h, pol)
	res := WriteResult{Targets: targets, Copies: t.copies()}
	if err != nil {
		r.countWrite(res.Copies, err)
		return res, err
	}
	type ack struct {
		id  placement.NodeID
		err error
	}
	acks := make(chan ack, len(targets))
	// The sends may outlive the call (stragglers, or a cancelled ctx), and
	// the caller may reuse its buffer once Write returns: they get a
	// private copy.
	data = bytes.Clone(data)
	// The sends outlive the call (stragglers finish in the background) but
	// not BackgroundTimeout, and a caller's cancellation stops them only
	// while the quorum is still pending.
	bg, cancelBG := clock.WithTimeout(context.WithoutCancel(ctx), r.cfg.Clock, r.cfg.BackgroundTimeout)
	var wg sync.WaitGroup
	for _, id := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			acks <- ack{id, r.put(bg, id, cas.Blob{Hash: h, Data: data})}
		}()
	}
	go func() { wg.Wait(); cancelBG() }()
	finish := func(err error) (WriteResult, error) {
		res.Copies = t.copies()
		r.countWrite(res.Copies, err)
		return res, err
	}
	var late <-chan time.Time // set once the quorum is reached
	for {
		select {
		case a := <-acks:
			if a.err == nil {
				res.Acked = append(res.Acked, a.id)
			}
			done, err := t.add(a.id, a.err)
			switch {
			case late != nil && t.left() == 0:
				return finish(nil)
			case late != nil || !done:
			case err != nil || t.left() == 0:
				return finish(err)
			default:
				timer := clock.NewTimer(r.cfg.Clock, r.cfg.StragglerWait)
				defer timer.Stop()
				late = timer.C
			}
		case <-late:
			return finish(nil)
		case <-ctx.Done():
			if late != nil {
				return finish(nil)
			}
			cancelBG()
			return res, ctx.Err()
		}
	}
}

// tally decides one blob's write from its targets' answers (see Write).
type tally struct {
	targets, need, want int
	strict              bool
	acked, failed       int
	errs                []error
}

// newTally places blob h under pol in m: its targets and the tally that
// decides the write. err is a *placement.QuorumError when the write
// cannot start: no live data node, or a strict policy with fewer targets
// than W.
func newTally(m *placement.Map, h blob.Hash, pol placement.Policy) ([]placement.NodeID, tally, error) {
	t := tally{need: pol.Quorum(m), want: pol.Wanted(m), strict: pol.Strict}
	if t.want == 0 {
		return nil, t, &placement.QuorumError{Required: max(pol.WriteQuorum, 1), Strict: pol.Strict,
			Err: errors.New("no data node in the cluster map")}
	}
	targets := placement.Place(m, h, pol.Replicas).Targets
	t.targets = len(targets)
	switch {
	case len(targets) == 0:
		return nil, t, &placement.QuorumError{Required: t.need, Strict: pol.Strict, Err: errors.New("no live data node")}
	case pol.Strict && len(targets) < t.need:
		return targets, t, &placement.QuorumError{Reachable: len(targets), Required: t.need, Strict: true}
	}
	return targets, t, nil
}

// add records node id's answer; done reports that the write is decided,
// err why it failed.
func (t *tally) add(id placement.NodeID, err error) (done bool, _ error) {
	if err == nil {
		t.acked++
	} else {
		t.failed++
		t.errs = append(t.errs, fmt.Errorf("node %d: %w", id, err))
	}
	left := t.left()
	switch {
	case t.acked >= t.need:
		return true, nil
	case t.strict && t.acked+left < t.need:
		return true, &placement.QuorumError{Reachable: t.targets - t.failed, Required: t.need, Strict: true, Err: errors.Join(t.errs...)}
	case left > 0:
		return false, nil
	case t.acked > 0:
		return true, nil // every target answered: the copies that could be made are
	default:
		return true, &placement.QuorumError{Required: t.need, Err: errors.Join(t.errs...)}
	}
}

// left is how many targets have not answered yet.
func (t *tally) left() int { return t.targets - t.acked - t.failed }

// copies is the write's outcome so far: the targets less the failures.
func (t *tally) copies() placement.Copies {
	return placement.Copies{Made: t.targets - t.failed, Wanted: t.want}
}

func (r *Replicator) put(ctx context.Context, id placement.NodeID, b cas.Blob) error {
	if id == r.cfg.Self {
		if r.cfg.NoLocalCopies {
			return errNoLocalCopies
		}
		return r.cfg.Local.Put(b.Hash, b.Data)
	}
	ctx, cancel := clock.WithTimeout(ctx, r.cfg.Clock, r.cfg.WriteTimeout)
	defer cancel()
	if r.batch != nil {
		return r.batch.PutBlob(ctx, id, b)
	}
	return r.cfg.Peers.PutBlob(ctx, id, b)
}

// ReadAt reads len(p) bytes at off of blob h into p: from the local copy
// when this node has one, else from the cache of remote blobs, else from
// remote replicas with hedging. With a cache, a read that lies within the
// cache's item size fetches the whole blob (when it is that small), checks
// it against h and keeps it.
func (r *Replicator) ReadAt(ctx context.Context, h blob.Hash, p []byte, off int64) (int, error) {
	if r.cfg.Local.Has(h) {
		n, err := r.cfg.Local.ReadAt(h, p, off)
		if err == nil || (errors.Is(err, io.EOF) && n == len(p)) {
			return n, nil
		}
		// A local copy that fails (corrupt, vanished) is not the end: fall
		// through to the replicas.
		r.cfg.Logger.Warn("local blob read failed; reading a replica", "hash", h.String(), "err", err)
	}
	if data, ok := r.cache.Get(h); ok {
		return copyAt(p, data, off)
	}
	m := r.cfg.Map()
	var sources []placement.NodeID
	for _, id := range placement.Sources(m, h) { // Live and Draining nodes
		if id != r.cfg.Self {
			sources = append(sources, id)
		}
	}
	// Last resort, after them: the data nodes the detector reports dead,
	// best ranked first. The detector lags seconds behind a healed
	// partition or a restart, and a read that finds no source fails after
	// its response headers went out.
	for _, id := range placement.Rank(m, h) {
		if n, ok := m.Node(id); ok && n.State == placement.Dead && id != r.cfg.Self {
			sources = append(sources, id)
		}
	}
	if len(sources) == 0 {
		return 0, fmt.Errorf("%w: blob %s has no replica", placement.ErrUnavailable, h)
	}
	if maxItem := int64(r.cache.MaxItemBytes()); maxItem > 0 && off >= 0 && off+int64(len(p)) <= maxItem {
		// Ask for one byte more than the cache admits: a shorter answer
		// is the whole blob. The fetch is shared by concurrent readers of
		// the same blob and outlives the first one's ctx.
		data, err := r.cache.Fill(h, ctx.Done(), func() ([]byte, bool, error) {
			d, err := r.hedgedRead(context.WithoutCancel(ctx), h, 0, maxItem+1, false, sources)
			return d, err == nil && int64(len(d)) <= maxItem, err
		})
		if errors.Is(err, errStopped) {
			return 0, ctx.Err()
		}
		if err != nil {
			return 0, err
		}
		return copyAt(p, data, off)
	}
	data, err := r.hedgedRead(ctx, h, off, int64(len(p)), true, sources)
	if err != nil {
		return 0, err
	}
	return copy(p, data), nil
}

// errNoLocalCopies: a write ranked a node that keeps no copy of its own.
var errNoLocalCopies = errors.New("replica: this node keeps no blob copies (a witness or a client node)")

// errStopped: a reader stopped waiting for another's fetch.
var errStopped = errors.New("replica: stopped waiting")

// copyAt copies data[off:] into p, as io.ReaderAt: io.EOF when data ends
// before p is full.
func copyAt(p, data []byte, off int64) (int, error) {
	if off >= int64(len(data)) {
		if len(p) == 0 && off == int64(len(data)) {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

type readResult struct {
	src  int
	data []byte
	err  error
}

// hedgedRead asks sources in order: a new request starts when the previous
// one failed, or when none answered within HedgeAfter. The first complete
// answer wins. exact: the answer must have n bytes; otherwise it may be
// shorter (the blob ends first), and a short answer from off 0 is the
// whole blob and must hash to h.
func (r *Replicator) hedgedRead(ctx context.Context, h blob.Hash, off, n int64, exact bool, sources []placement.NodeID) ([]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the losers
	results := make(chan readResult, len(sources))
	next, inflight := 0, 0
	start := func() {
		i := next
		next++
		inflight++
		go func() {
			data, err := r.fetch(ctx, sources[i], h, off, n, exact)
			results <- readResult{i, data, err}
		}()
	}
	start()
	timer := clock.NewTimer(r.cfg.Clock, r.cfg.HedgeAfter)
	defer timer.Stop()
	var errs []error
	for {
		select {
		case res := <-results:
			inflight--
			if res.err == nil {
				return res.data, nil
			}
			errs = append(errs, fmt.Errorf("node %d: %w", sources[res.src], res.err))
			if next < len(sources) {
				start()
				timer.Reset(r.cfg.HedgeAfter)
			} else if inflight == 0 {
				return nil, fmt.Errorf("%w: %w", placement.ErrUnavailable, errors.Join(errs...))
			}
		case <-timer.C:
			if next < len(sources) {
				start() // hedge: race the slow request
				timer.Reset(r.cfg.HedgeAfter)
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (r *Replicator) fetch(ctx context.Context, id placement.NodeID, h blob.Hash, off, n int64, exact bool) ([]byte, error) {
	ctx, cancel := clock.WithTimeout(ctx, r.cfg.Clock, r.cfg.ReadTimeout)
	defer cancel()
	rc, err := r.cfg.Peers.GetBlob(ctx, id, h, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := readBody(rc, n, exact)
	if err != nil {
		return nil, err
	}
	switch got := int64(len(data)); {
	case got == n:
	case exact:
		return nil, fmt.Errorf("short read: %d of %d bytes", got, n)
	case off == 0 && blob.Sum(data) != h:
		r.corrupt.Add(1)
		return nil, fmt.Errorf("%w: blob %s from node %d: bytes of %s", blob.ErrCorrupt, h, id, blob.Sum(data))
	case cap(data) > len(data):
		return bytes.Clone(data), nil // a whole blob, kept by the cache: no spare capacity
	}
	return data, nil
}

// readBody reads at most n bytes of a fetched blob's body. A body that
// announces its length (transport's Size) is read into a buffer of
// exactly that size; otherwise the buffer grows from n (exact) or 64 KiB
// (the blob may be much smaller than n).
func readBody(rc io.Reader, n int64, exact bool) ([]byte, error) {
	if s, ok := rc.(interface{ Size() int64 }); ok {
		if size := s.Size(); size >= 0 && size <= n {
			data := make([]byte, size)
			if _, err := io.ReadFull(rc, data); err != nil {
				return nil, err
			}
			return data, nil
		}
	}
	var buf bytes.Buffer
	if exact {
		buf.Grow(int(n))
	} else {
		buf.Grow(int(min(n, 64<<10)))
	}
	if _, err := io.Copy(&buf, io.LimitReader(rc, n)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteBlob is Write for callers that only need the outcome
// (store.Replication).
func (r *Replicator) WriteBlob(ctx context.Context, h blob.Hash, data []byte, pol placement.Policy) (placement.Copies, error) {
	res, err := r.Write(ctx, h, data, pol)
	return res.Copies, err
}
