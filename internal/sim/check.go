package sim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/placement"
	"github.com/cairn-fs/cairn/internal/store"
)

// checkRead reads bucket/path through inc during the run. Stale answers
// are allowed (plain reads serve the local applied state); what is checked
// is integrity: the bytes match the inode's SHA-256, and that value was
// written to this path by some write.
//
// A consistent read (strong: a read barrier, then a read that skips the
// caches, as ?consistent=1 does over HTTP) must also be linearizable: the
// value it returns was not overwritten for good before the read began
// (history.linearizable).
func (s *Sim) checkRead(ctx context.Context, inc *incarnation, key, bucket, path string, strong bool) {
	inv := s.hist.now()
	var data []byte
	var sum string
	var err error
	if strong {
		if err = inc.st.Barrier(ctx); err == nil {
			data, sum, err = readFileCtx(store.WithConsistent(ctx), inc, bucket, path)
		}
	} else {
		data, sum, err = readFile(inc, bucket, path)
	}
	end := s.hist.now()
	stale := false
	if strong && err == nil && s.cfg.sabotage == "stale-read" {
		if v := s.hist.staleValue(key, inv); v != "" && v != absent {
			sum, stale = v, true // as if the read had served an old value
		}
	}
	if strong && err == nil && !inc.stopping.Load() && (stale || hashHex(data) == sum) && !s.hist.linearizable(key, sum, inv, end) {
		s.fail("consistent read %s via node %d returned %.12s, overwritten for good before the read began", key, inc.n.id, sum)
	}
	if stale {
		return
	}
	if strong && errors.Is(err, store.ErrNotFound) && !inc.stopping.Load() && !s.hist.linearizable(key, absent, inv, end) {
		s.fail("consistent read %s via node %d found nothing, though an acknowledged write had put it for good before the read began", key, inc.n.id)
	}
	s.tr.add("read %s via %d (strong %v): %.12s %v", key, inc.n.id, strong, sum, err)
	s.hist.mu.Lock()
	s.hist.reads++
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.hist.readErrs++
	}
	s.hist.mu.Unlock()
	switch {
	case inc.stopping.Load():
		// The node crashed under the read: a client would have lost its
		// connection; what the dying process returned means nothing.
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrUnavailable):
	case err != nil:
		s.fail("read %s via node %d: %v", key, inc.n.id, err)
	case hashHex(data) != sum:
		s.fail("read %s via node %d: got %d bytes hashing to %.12s, inode says %.12s", key, inc.n.id, len(data), hashHex(data), sum)
	case !s.hist.everWritten(key, sum):
		s.fail("read %s via node %d: value %.12s was never written there", key, inc.n.id, sum)
	}
}

// readFile reads a whole file through a node's store.
func readFile(inc *incarnation, bucket, path string) ([]byte, string, error) {
	return readFileCtx(context.Background(), inc, bucket, path)
}

func readFileCtx(ctx context.Context, inc *incarnation, bucket, path string) ([]byte, string, error) {
	obj, err := inc.st.Open(ctx, bucket, path)
	if err != nil {
		return nil, "", err
	}
	defer obj.Close()
	info := obj.Info()
	data, err := io.ReadAll(io.NewSectionReader(obj, 0, info.Size))
	if err != nil {
		return nil, "", err
	}
	return data, info.SHA256, nil
}

// kickRepair starts a repair pass on inc (or one more after the running
// one), as a real node does on every membership or liveness change.
func (s *Sim) kickRepair(inc *incarnation) {
	if inc == nil || s.paused(inc.n.id) {
		return
	}
	if !inc.repairing.CompareAndSwap(false, true) {
		inc.repairAgain.Store(true)
		return
	}
	if !inc.goUse(func() {
		defer inc.repairing.Store(false)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, _ = inc.repair.RunOnce(ctx) // what it could not do, the next pass retries
			cancel()
			if !inc.repairAgain.Swap(false) || inc.stopping.Load() {
				return
			}
		}
	}) {
		inc.repairing.Store(false)
	}
}

func (s *Sim) repairAll() {
	for _, n := range s.nodes {
		s.kickRepair(n.inc)
	}
}

// finish heals everything, lets the cluster settle, and checks the
// invariants.
func (s *Sim) finish() error {
	s.cfg.Logf("heal and settle")
	s.fmu.Lock()
	s.faults = netFaults{}
	s.lossyUntil = time.Time{}
	clear(s.pausedUntil)
	clear(s.downSince)
	s.fmu.Unlock()
	s.endDiskFaults(true)
	s.heal()
	for _, n := range s.nodes {
		if n.inc == nil {
			s.restart(n)
		}
	}
	if s.failed() {
		return nil
	}
	if err := s.until("in-flight operations answered", 2*time.Minute, func() bool { return s.inOps.Load() == 0 }); err != nil {
		return err
	}
	if err := s.until("logs converge", 2*time.Minute, s.logsConverged); err != nil {
		return fmt.Errorf("%w (%s)", err, s.raftStates())
	}
	if err := s.settleRepair(); err != nil {
		s.fail("%v", err) // go on: the checks below say which files it costs
	}
	// Collect garbage everywhere: reap the queue, drop orphans.
	for _, n := range s.nodes {
		inc := n.inc
		if err := s.await(fmt.Sprintf("GC on node %d", n.id), 30*time.Second, func(ctx context.Context) error {
			_, err := inc.st.GC(ctx)
			return err
		}); err != nil {
			return err
		}
	}
	if err := s.until("logs converge after GC", 2*time.Minute, s.logsConverged); err != nil {
		return fmt.Errorf("%w (%s)", err, s.raftStates())
	}
	s.sabotage()
	idx, err := s.checkNamespace()
	if err != nil {
		return err
	}
	s.res.AppliedIndex = idx
	s.checkFiles("after healing")
	s.checkExclusive("after healing")
	s.checkDurable("after healing")
	s.checkReplay(idx)
	// Blob deletions after the reap run off the apply goroutine: give them
	// time, and repair a last time.
	var perr error
	for range 5 {
		if perr = s.checkPlacement(); perr == nil {
			break
		}
		s.cfg.Logf("placement not settled yet: %v", perr)
		if err := s.settleRepair(); err != nil {
			s.fail("%v", err)
			break
		}
		// Orphans younger than the grace stay until the background GC
		// (every gcInterval of fake time) sees them past it.
		s.until("deletions", s.cfg.GCGrace+2*gcInterval, func() bool { return false })
	}
	return perr
}

func (s *Sim) raftStates() string {
	out := ""
	for _, n := range s.nodes {
		if n.inc == nil {
			out += fmt.Sprintf("node %d down; ", n.id)
			continue
		}
		st := n.inc.raft.Status()
		out += fmt.Sprintf("node %d %v term %d commit %d applied %d; ", n.id, st.State, st.Term, st.Commit, st.Applied)
	}
	return out
}

// logsConverged: a leader, and every node has applied everything it knows
// committed, at the same index.
func (s *Sim) logsConverged() bool {
	if s.leader() == nil {
		return false
	}
	var idx uint64
	for i, n := range s.nodes {
		if n.inc == nil {
			return false
		}
		st := n.inc.raft.Status()
		a := n.inc.raft.AppliedIndex()
		if st.Commit != a || (i > 0 && a != idx) {
			return false
		}
		idx = a
	}
	return true
}

// settleRepair runs repair passes on every node until one round changes
// nothing and leaves nothing undone.
func (s *Sim) settleRepair() error {
	if err := s.until("running repair passes end", time.Minute, func() bool {
		for _, n := range s.nodes {
			if n.inc.repairing.Load() {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	var last string
	for range 10 {
		settled := true
		last = ""
		for _, n := range s.nodes {
			inc := n.inc
			var st replicaStats
			if err := s.await(fmt.Sprintf("repair pass on node %d", n.id), time.Minute, func(ctx context.Context) error {
				rs, err := inc.repair.RunOnce(ctx)
				st = replicaStats(fmt.Sprintf("%+v", rs))
				if err == nil && !rs.Settled() {
					settled = false
				}
				return err
			}); err != nil {
				return err
			}
			last += fmt.Sprintf("\n    node %d: %s", n.id, st)
		}
		if settled {
			return nil
		}
	}
	return fmt.Errorf("repair does not settle after 10 rounds; last round:%s", last)
}

type replicaStats string

// dump returns a node's applied index and every namespace record (all keys
// but Raft's own "R" prefix; "P", the replicated proposer sessions, is
// included), read from one snapshot.
func dump(inc *incarnation) (uint64, []byte, error) {
	snap := inc.kv.Snapshot()
	defer snap.Close()
	idx, err := meta.NewReader(snap).AppliedIndex()
	if err != nil {
		return 0, nil, err
	}
	var buf []byte
	for _, rg := range [][2][]byte{{nil, []byte("R")}, {[]byte("S"), nil}} {
		if err := snap.Scan(rg[0], rg[1], func(k, v []byte) bool {
			buf = appendRecord(buf, k, v)
			return true
		}); err != nil {
			return 0, nil, err
		}
	}
	return idx, buf, nil
}

// appendRecord appends one key and value to a dump.
func appendRecord(buf, k, v []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(k)))
	buf = append(buf, k...)
	buf = binary.AppendUvarint(buf, uint64(len(v)))
	return append(buf, v...)
}

// firstDiff describes the first record where two dumps differ.
func firstDiff(a, b []byte) string {
	type rec struct{ k, v []byte }
	parse := func(d []byte) []rec {
		var out []rec
		for len(d) > 0 {
			n, w := binary.Uvarint(d)
			k := d[w : w+int(n)]
			d = d[w+int(n):]
			n, w = binary.Uvarint(d)
			v := d[w : w+int(n)]
			d = d[w+int(n):]
			out = append(out, rec{k, v})
		}
		return out
	}
	ra, rb := parse(a), parse(b)
	for i := 0; i < len(ra) || i < len(rb); i++ {
		switch {
		case i >= len(ra):
			return fmt.Sprintf("extra key %q on the second", rb[i].k)
		case i >= len(rb):
			return fmt.Sprintf("extra key %q on the first", ra[i].k)
		case !bytes.Equal(ra[i].k, rb[i].k):
			return fmt.Sprintf("key %q vs %q", ra[i].k, rb[i].k)
		case !bytes.Equal(ra[i].v, rb[i].v):
			return fmt.Sprintf("key %q: value %x vs %x", ra[i].k, ra[i].v, rb[i].v)
		}
	}
	return "no difference"
}

// checkNamespace: invariant (b), byte-identical namespaces at one index.
func (s *Sim) checkNamespace() (uint64, error) {
	var ref []byte
	var refID, idx uint64
	for _, n := range s.nodes {
		i, d, err := dump(n.inc)
		if err != nil {
			return 0, fmt.Errorf("node %d: dump namespace: %w", n.id, err)
		}
		if ref == nil {
			ref, refID, idx = d, n.id, i
			s.tr.add("final namespace at index %d: %x", i, sha256.Sum256(d))
			continue
		}
		if i != idx {
			return 0, fmt.Errorf("namespace: node %d applied %d, node %d applied %d", n.id, i, refID, idx)
		}
		if !bytes.Equal(d, ref) {
			s.fail("namespace of node %d differs from node %d at applied index %d: %s", n.id, refID, idx, firstDiff(ref, d))
		}
	}
	return idx, nil
}

// checkFiles: invariant (a), every path holds an allowed value, read
// through every node (a node lacking a blob fetches it from a replica).
// when says at which check, for the failure messages.
func (s *Sim) checkFiles(when string) {
	for _, key := range s.hist.keys() {
		allowed := s.hist.allowed(key)
		bucket, path, _ := cutKey(key)
		for _, n := range s.nodes {
			data, sum, err := readFile(n.inc, bucket, path)
			got := absent
			switch {
			case errors.Is(err, store.ErrNotFound):
			case err != nil:
				s.failMu.Lock()
				r := s.reaped[key]
				s.failMu.Unlock()
				hist := ""
				if ino, lerr := n.inc.reader.Lookup(bucket, path); lerr == nil {
					for _, e := range ino.Extents {
						hist += fmt.Sprintf("\n    blob %.12s (node 1 applied): %v", e.Hash.String(), s.blobHistory(e.Hash))
					}
				}
				s.fail("%s, %s is unreadable via node %d: %v; allowed %s; puts refused with ErrBlobReaped on this path: %d; writes:%s%s",
					when, key, n.id, err, short(allowed), r, s.hist.describe(key), hist)
				continue
			default:
				got = hashHex(data)
				if got != sum {
					s.fail("%s, %s via node %d: bytes hash to %.12s, inode says %.12s;%s", when, key, n.id, got, sum, s.blobDiag(n.inc, bucket, path))
				}
			}
			if !slices.Contains(allowed, got) {
				s.fail("%s, %s via node %d holds %.12s; allowed %s; writes:%s",
					when, key, n.id, got, short(allowed), s.hist.describe(key))
			}
		}
	}
}

func cutKey(key string) (string, string, bool) {
	for i := range len(key) {
		if key[i] == '/' {
			return key[:i], key[i+1:], true
		}
	}
	return key, "", false
}

func short(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v[:min(12, len(v))]
	}
	return out
}

// checkPlacement: invariant (c), every referenced blob is on exactly its
// placement targets (all nodes live), and no node keeps a blob nothing
// references (GC ran).
func (s *Sim) checkPlacement() error {
	inc0 := s.nodes[0].inc
	m := inc0.core.Map()
	for _, n := range s.nodes {
		if !m.Equal(n.inc.core.Map()) {
			return fmt.Errorf("placement maps differ between node %d and node %d", s.nodes[0].id, n.id)
		}
	}
	for _, nd := range m.Nodes() {
		if nd.State != placement.Live {
			return fmt.Errorf("node %d is %v in the final map", nd.ID, nd.State)
		}
	}
	refs := map[blob.Hash]bool{}
	var errs []error
	err := inc0.reader.ReferencedBlobs(store.DefaultReplicas, nil, func(h blob.Hash, rf int) bool {
		refs[h] = true
		want := placement.Place(m, h, rf).Targets
		for _, n := range s.nodes {
			has := n.inc.blobs.Has(h)
			if in := slices.Contains(want, placement.NodeID(n.id)); has != in {
				errs = append(errs, fmt.Errorf("blob %.12s (R=%d, targets %v): on node %d: %v, want %v", h.String(), rf, want, n.id, has, in))
			}
		}
		return len(errs) < 10
	})
	if err != nil {
		return err
	}
	s.res.ReferencedBlobs = len(refs)
	for _, n := range s.nodes {
		n.inc.blobs.Range(func(h blob.Hash, size int64) bool {
			if !refs[h] {
				errs = append(errs, fmt.Errorf("node %d keeps blob %.12s (%d B) that nothing references after GC", n.id, h.String(), size))
			}
			return len(errs) < 20
		})
	}
	return errors.Join(errs...)
}

// sabotage breaks an invariant on purpose (Config.sabotage, for the
// harness's own tests: each check must be able to fail).
func (s *Sim) sabotage() {
	switch s.cfg.sabotage {
	case "":
	case "namespace": // a record only one node has
		b := s.nodes[1].inc.kv.NewBatch()
		b.Set([]byte("m\x00sabotage"), []byte{1})
		b.Commit(true)
	case "history": // an acknowledged write the store never saw
		for _, k := range s.hist.keys() {
			s.hist.mu.Lock()
			ws := s.hist.writes[k]
			s.hist.mu.Unlock()
			if len(ws) > 0 && ws[len(ws)-1].outcome == acked {
				s.hist.end(s.hist.begin(1, k, "bogus"), nil)
				return
			}
		}
	case "blob": // every copy of a referenced blob lost
		s.loseBlob()
	case "durability": // a name an acknowledged exclusive create made, removed
		s.sabotageDurable()
	case "fencing": // a change decided under a moved claim, applied (the nodes apply unfenced)
		s.sabotageFencing()
	}
}

// loseBlob deletes every copy of one referenced blob (sabotage).
func (s *Sim) loseBlob() {
	var victim blob.Hash
	found := false
	s.nodes[0].inc.reader.ReferencedBlobs(store.DefaultReplicas, nil, func(h blob.Hash, rf int) bool {
		victim, found = h, true
		return false
	})
	if found {
		for _, n := range s.nodes {
			n.inc.blobs.Delete(victim)
		}
	}
}

// blobDiag describes every copy of the blobs of bucket/path, for a
// failure message.
func (s *Sim) blobDiag(inc *incarnation, bucket, path string) string {
	ino, err := inc.reader.Lookup(bucket, path)
	if err != nil {
		return " " + err.Error()
	}
	out := ""
	for _, e := range ino.Extents {
		out += fmt.Sprintf("\n    extent @%d len %d blob %.12s:", e.Offset, e.Length, e.Hash.String())
		for _, n := range s.nodes {
			if n.inc == nil || !n.inc.blobs.Has(e.Hash) {
				continue
			}
			data, err := n.inc.blobs.Get(e.Hash, nil)
			switch {
			case err != nil:
				out += fmt.Sprintf(" node %d: %v;", n.id, err)
			case blob.Sum(data) != e.Hash:
				out += fmt.Sprintf(" node %d: %d bytes hashing to %.12s (CRC ok);", n.id, len(data), blob.Sum(data).String())
			default:
				out += fmt.Sprintf(" node %d: good;", n.id)
			}
		}
	}
	return out
}
