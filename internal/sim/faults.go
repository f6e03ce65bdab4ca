package sim

import (
	"math/rand/v2"
	"slices"
	"syscall"
	"time"

	"github.com/cairn-fs/cairn/internal/transport"
	"github.com/cairn-fs/cairn/internal/vfs"
)

// ---------------------------------------------------------------------------
// Faults

// fault decides one delivery's fate (MemConfig.Fault; called under the
// network's lock, drawing from its RNG).
func (s *Sim) fault(rng *rand.Rand, from, to transport.NodeID, op transport.Op) transport.Fault {
	now := time.Now()
	s.fmu.Lock()
	f := s.faults
	var hold time.Duration
	for _, id := range []uint64{uint64(from), uint64(to)} {
		if u, ok := s.pausedUntil[id]; ok && u.After(now) {
			hold = max(hold, u.Sub(now))
		}
	}
	s.fmu.Unlock()
	var out transport.Fault
	drop := f.drop
	if op != transport.OpRaft {
		drop /= 2
	}
	if rng.Float64() < drop {
		out.Drop = true
		s.tr.add("net %d>%d %v drop", from, to, op)
		return out
	}
	out.Delay = hold
	if f.maxDelay > 0 {
		out.Delay += time.Duration(rng.Int64N(int64(f.maxDelay)))
	}
	if op == transport.OpRaft && rng.Float64() < f.dup {
		out.Duplicate = true
	}
	s.tr.add("net %d>%d %v delay %v dup %v", from, to, op, out.Delay, out.Duplicate)
	return out
}

func (s *Sim) paused(id uint64) bool {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	u, ok := s.pausedUntil[id]
	return ok && u.After(time.Now())
}

// detectedDead is the simulated failure detector: observer sees id dead
// when id has been crashed or paused, or the link between them cut, for
// detectDelay.
func (s *Sim) detectedDead(observer, id uint64) bool {
	if observer == id {
		return false
	}
	now := time.Now()
	s.fmu.Lock()
	defer s.fmu.Unlock()
	old := func(t time.Time, ok bool) bool { return ok && now.Sub(t) >= detectDelay }
	if t, ok := s.downSince[id]; old(t, ok) {
		return true
	}
	t1, ok1 := s.cut[[2]uint64{observer, id}]
	t2, ok2 := s.cut[[2]uint64{id, observer}]
	return old(t1, ok1) || old(t2, ok2)
}

// livenessChanged rebuilds every node's map now and once the detector
// would have noticed.
func (s *Sim) livenessChanged() {
	s.rebuildAll()
	s.after(detectDelay+time.Millisecond, s.rebuildAll)
}

func (s *Sim) rebuildAll() {
	for _, n := range s.nodes {
		if inc := n.inc; inc != nil {
			inc.rebuildMap()
		}
	}
}

func (s *Sim) cutLinks(pairs [][2]uint64) {
	now := time.Now()
	s.fmu.Lock()
	for _, p := range pairs {
		if _, ok := s.cut[p]; !ok {
			s.cut[p] = now
		}
	}
	s.fmu.Unlock()
	for _, p := range pairs {
		s.net.Block(transport.NodeID(p[0]), transport.NodeID(p[1]))
	}
	s.res.Partitions++
	s.livenessChanged()
}

func (s *Sim) heal() {
	s.net.Heal()
	s.fmu.Lock()
	clear(s.cut)
	s.fmu.Unlock()
	s.livenessChanged()
}

// endFaults ends pauses, crashes and lossy periods whose time is up.
func (s *Sim) endFaults() {
	now := time.Now()
	s.fmu.Lock()
	if !s.lossyUntil.IsZero() && !s.lossyUntil.After(now) {
		s.faults = netFaults{drop: 0.02, dup: 0.02, maxDelay: baseMaxDelay}
		s.lossyUntil = time.Time{}
	}
	var resumed []uint64
	for id, u := range s.pausedUntil {
		if !u.After(now) {
			delete(s.pausedUntil, id)
			delete(s.downSince, id)
			resumed = append(resumed, id)
		}
	}
	s.fmu.Unlock()
	if len(resumed) > 0 {
		s.livenessChanged()
	}
	s.endDiskFaults(false)
	for _, n := range s.nodes {
		if n.inc == nil && !n.restartAt.IsZero() && !n.restartAt.After(now) && !s.diskFailing(n.id) {
			s.restart(n)
		}
	}
}

// diskFailing reports whether id's blob disk is failing (evDisk): a node
// crashed meanwhile waits for the disk, as it would for an operator to
// replace it (it would not start: blob.Open reads every volume).
func (s *Sim) diskFailing(id uint64) bool {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	_, ok := s.diskUntil[id]
	return ok
}

// startDiskFault makes n's blob disk fail as kind says until until.
func (s *Sim) startDiskFault(n *node, kind diskFault, until time.Time) {
	s.fmu.Lock()
	s.diskUntil[n.id] = until
	s.fmu.Unlock()
	n.mem.SetFault(func(op vfs.Op, name string) error {
		switch {
		case kind == diskReadEIO && op == vfs.OpRead:
			s.fmu.Lock()
			fail := s.faultRNG.IntN(2) == 0
			s.fmu.Unlock()
			if fail {
				return syscall.EIO
			}
		case kind == diskWriteEIO && op == vfs.OpWrite:
			return syscall.EIO
		case kind == diskNoSpace && op == vfs.OpWrite:
			s.fmu.Lock()
			part := s.faultRNG.IntN(3)
			s.fmu.Unlock()
			if part == 0 {
				return vfs.ShortWrite(13, syscall.ENOSPC)
			}
			return syscall.ENOSPC
		case kind == diskSyncEIO && op == vfs.OpSync:
			return syscall.EIO
		}
		return nil
	})
}

// endDiskFaults ends the blob-disk faults whose time is up (all of them
// when all is set). A node whose blob store turned read-only meanwhile
// (a failed write or fsync is never retried) is restarted, as an operator
// would once the disk is fixed: killed, and started at once over the
// same disks.
func (s *Sim) endDiskFaults(all bool) {
	now := time.Now()
	var ended []uint64
	s.fmu.Lock()
	for id, u := range s.diskUntil {
		if all || !u.After(now) {
			delete(s.diskUntil, id)
			ended = append(ended, id)
		}
	}
	s.fmu.Unlock()
	slices.Sort(ended)
	for _, id := range ended {
		n := s.byID[id]
		n.mem.SetFault(nil)
		if n.inc != nil && n.inc.blobs.Stats().ReadOnly {
			s.cfg.Logf("%v node %d restarted: its blob store is read-only after the disk fault", now.Sub(s.t0), id)
			s.res.DiskRestarts++
			s.crash(n, false, 0)
			n.restartAt = now
		}
	}
}

func (s *Sim) restart(n *node) {
	n.restartAt = time.Time{}
	time.Sleep(startStagger + time.Duration(n.id)*time.Microsecond)
	if err := s.start(n); err != nil {
		s.fail("restart node %d after a crash: %v", n.id, err)
		return
	}
	s.fmu.Lock()
	delete(s.downSince, n.id)
	s.fmu.Unlock()
	s.livenessChanged()
	s.kickRepair(n.inc)
}

// down counts nodes crashed or paused.
func (s *Sim) down() int {
	c := 0
	for _, n := range s.nodes {
		if n.inc == nil || s.paused(n.id) {
			c++
		}
	}
	return c
}

// apply carries out one scheduled event.
func (s *Sim) apply(e event) {
	now := time.Now()
	s.tr.add("event %v", e)
	switch e.kind {
	case evPut, evDelete, evRead:
		s.runOp(e)
		return
	case evExcl:
		s.runExcl(e)
		return
	case evLock:
		s.runLock(e)
		return
	case evIsolate:
		var pairs [][2]uint64
		for _, o := range s.ids() {
			if o != e.node {
				pairs = append(pairs, [2]uint64{e.node, o}, [2]uint64{o, e.node})
			}
		}
		s.cutLinks(pairs)
	case evSplit:
		var pairs [][2]uint64
		group := []uint64{e.node, e.other}
		for _, a := range group {
			for _, o := range s.ids() {
				if !slices.Contains(group, o) {
					pairs = append(pairs, [2]uint64{a, o}, [2]uint64{o, a})
				}
			}
		}
		s.cutLinks(pairs)
	case evOneWay:
		s.cutLinks([][2]uint64{{e.node, e.other}})
	case evHeal:
		s.heal()
	case evCrash:
		n := s.byID[e.node]
		if n.inc == nil || s.down() > 0 {
			return // at most one node down at a time
		}
		s.crash(n, e.torn, e.pct)
		n.restartAt = now.Add(e.dur)
		s.res.Crashes++
		s.fmu.Lock()
		s.downSince[n.id] = now
		s.fmu.Unlock()
		s.livenessChanged()
	case evPause:
		n := s.byID[e.node]
		if n.inc == nil || s.down() > 0 {
			return
		}
		s.res.Pauses++
		s.fmu.Lock()
		s.pausedUntil[n.id] = now.Add(e.dur)
		s.downSince[n.id] = now
		s.fmu.Unlock()
		s.livenessChanged()
	case evLossy:
		s.fmu.Lock()
		s.faults = netFaults{drop: 0.15, dup: 0.1, maxDelay: 150 * time.Millisecond}
		s.lossyUntil = now.Add(e.dur)
		s.fmu.Unlock()
	case evRepairAll:
		s.repairAll()
	case evDisk:
		n := s.byID[e.node]
		s.fmu.Lock()
		_, busy := s.diskUntil[n.id]
		s.fmu.Unlock()
		if n.inc == nil || busy {
			return
		}
		s.res.DiskFaults++
		s.startDiskFault(n, e.disk, now.Add(e.dur))
	}
	s.cfg.Logf("%v", e)
}
