package sim

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/cairn-fs/cairn/internal/blob"
)

// The schedule: everything the run does, drawn from the seed before the
// run starts, so that it is a pure function of (seed, Config). Execution
// then skips an operation whose node is down or paused at that moment
// (which the schedule itself decides), nothing else.

type evKind int

const (
	evPut evKind = iota
	evDelete
	evRead
	evIsolate   // cut node a from everyone
	evSplit     // cut group {a, b} from the others
	evOneWay    // cut the link a → b only
	evHeal      // restore every link
	evCrash     // crash node a (disks lose unsynced data), restart after dur
	evPause     // stop node a (no ticks, inbound held) for dur
	evLossy     // raise the message fault rates for dur
	evRepairAll // run a repair pass on every up node
	evDisk      // node a's blob disk fails (disk) for dur
	evExcl      // an exclusive create or rename (xk) of bucket/path (exclusive.go)
	evLock      // a lock taken, held and released (lk; locks.go)
)

var evNames = [...]string{"put", "delete", "read", "isolate", "split", "oneway", "heal", "crash", "pause", "lossy", "repair", "disk", "excl", "lock"}

// diskFault is what a failing blob disk does (evDisk), through the vfs
// seam (vfs.Mem.SetFault), as Pebble's errorfs does for its files.
type diskFault int

const (
	diskReadEIO  diskFault = iota // half of the reads fail with EIO
	diskWriteEIO                  // every write fails with EIO: the store turns read-only
	diskNoSpace                   // every write fails with ENOSPC, sometimes after a part of it
	diskSyncEIO                   // every fsync fails: the store turns read-only
	diskFaults
)

var diskNames = [...]string{"read EIO", "write EIO", "ENOSPC", "fsync EIO"}

func (d diskFault) String() string { return diskNames[d] }

func (k evKind) String() string { return evNames[k] }

// content names a file body: size bytes from a ChaCha8 stream seeded by seed.
type content struct {
	seed uint64
	size int
}

// bulk says whether the content is written with a bulk upload
// (store.Local.PutFiles) rather than Put: half of the one-blob contents.
func (c content) bulk() bool { return c.size <= blob.MaxSize && c.seed%2 == 0 }

func (c content) bytes() []byte {
	b := make([]byte, c.size)
	var s [32]byte
	binary.LittleEndian.PutUint64(s[0:], c.seed)
	binary.LittleEndian.PutUint64(s[8:], c.seed*0x9e3779b97f4a7c15)
	binary.LittleEndian.PutUint64(s[16:], uint64(c.size))
	rand.NewChaCha8(s).Read(b)
	return b
}

type event struct {
	at     time.Duration // from the start of the workload
	kind   evKind
	node   uint64 // where an operation runs; the fault's subject
	other  uint64 // second node (split, oneway)
	bucket string
	path   string
	body   content
	dur    time.Duration
	torn   bool // crash: torn tails on the blob disk
	pct    int  // crash: % of unsynced Pebble data kept
	disk   diskFault
	xk     xKind // evExcl: which kind of exclusive create
	id     int   // evExcl, evLock: the operation's number (names its temporary file)
	lk     lockOp
}

func (e event) String() string {
	switch e.kind {
	case evPut:
		return fmt.Sprintf("%v put %s/%s (%d B) via %d", e.at, e.bucket, e.path, e.body.size, e.node)
	case evDelete, evRead:
		return fmt.Sprintf("%v %v %s/%s via %d", e.at, e.kind, e.bucket, e.path, e.node)
	case evDisk:
		return fmt.Sprintf("%v disk of %d: %v for %v", e.at, e.node, e.disk, e.dur)
	case evExcl:
		return fmt.Sprintf("%v excl #%d %v %s/%s (%d B, %v) via %d", e.at, e.id, e.xk, e.bucket, e.path, e.body.size, e.dur, e.node)
	case evLock:
		return fmt.Sprintf("%v lock #%d %v via %d", e.at, e.id, e.lk, e.node)
	default:
		return fmt.Sprintf("%v %v %d %d for %v", e.at, e.kind, e.node, e.other, e.dur)
	}
}

// bucketSpec is a bucket of the run.
type bucketSpec struct {
	name        string
	replicas    int
	writeQuorum int
}

var buckets = []bucketSpec{
	{"rep3", 0, 0},    // the default: R=3, W=2
	{"rep1", 1, 0},    // one copy
	{"rep2", 2, 1},    // two copies, acknowledged after one
	{"mirror", -1, 0}, // every data node
}

// makeSchedule draws the workload and the faults of one run.
func makeSchedule(seed uint64, cfg Config, ids []uint64) []event {
	rng := rand.New(rand.NewPCG(seed, 0x5111))
	var evs []event
	var pool []content
	bigLeft := cfg.MaxBigFiles
	newContent := func() content {
		if len(pool) > 0 && rng.IntN(100) < 25 {
			return pool[rng.IntN(len(pool))] // identical files: dedup, refcounts > 1
		}
		var size int
		switch x := rng.IntN(1000); {
		case x < 60:
			size = 0
		case x < 560:
			size = 1 + rng.IntN(2048)
		case x < 985 || bigLeft == 0:
			size = 2048 + rng.IntN(200<<10)
		default:
			bigLeft--
			size = []int{blob.MaxSize, blob.MaxSize + 1, blob.MaxSize + 1 + rng.IntN(64<<10)}[rng.IntN(3)]
		}
		c := content{seed: rng.Uint64(), size: size}
		pool = append(pool, c)
		return c
	}
	path := func() (string, string) {
		b := buckets[rng.IntN(len(buckets))]
		return b.name, fmt.Sprintf("d%d/f%d", rng.IntN(3), rng.IntN(6))
	}
	// Operations.
	for range cfg.Ops {
		at := time.Duration(rng.Int64N(int64(cfg.Duration)))
		e := event{at: at, node: ids[rng.IntN(len(ids))]}
		e.bucket, e.path = path()
		switch x := rng.IntN(100); {
		case x < 55:
			e.kind, e.body = evPut, newContent()
		case x < 70:
			e.kind = evDelete
		default:
			e.kind = evRead
		}
		evs = append(evs, e)
	}
	// Faults: a sequence of windows, each ending with its repair (heal,
	// restart, resume) before the next starts, with short overlaps of
	// network faults over node faults.
	voters := ids[:cfg.Voters]
	t := 1500 * time.Millisecond
	for t < cfg.Duration-time.Second {
		d := time.Duration(300+rng.IntN(3500)) * time.Millisecond
		a := ids[rng.IntN(len(ids))]
		b := ids[rng.IntN(len(ids))]
		for b == a {
			b = ids[rng.IntN(len(ids))]
		}
		switch x := rng.IntN(100); {
		case x < 20:
			evs = append(evs, event{at: t, kind: evIsolate, node: a, dur: d}, event{at: t + d, kind: evHeal})
		case x < 32:
			evs = append(evs, event{at: t, kind: evSplit, node: a, other: b, dur: d}, event{at: t + d, kind: evHeal})
		case x < 40:
			evs = append(evs, event{at: t, kind: evOneWay, node: a, other: b, dur: d}, event{at: t + d, kind: evHeal})
		case x < 65:
			e := event{at: t, kind: evCrash, node: a, dur: d, torn: rng.IntN(2) == 0}
			if rng.IntN(3) == 0 {
				e.pct = 50
			}
			evs = append(evs, e)
			// Sometimes a voter is cut off while another is down: no quorum
			// for a while.
			if rng.IntN(5) == 0 {
				v := voters[rng.IntN(len(voters))]
				if v != a {
					evs = append(evs, event{at: t + d/3, kind: evIsolate, node: v, dur: d / 3},
						event{at: t + 2*d/3, kind: evHeal})
				}
			}
		case x < 80:
			evs = append(evs, event{at: t, kind: evPause, node: a, dur: d})
		case x < 92:
			evs = append(evs, event{at: t, kind: evLossy, dur: d})
		default:
			evs = append(evs, event{at: t, kind: evRepairAll})
			d = 0
		}
		t += d + time.Duration(200+rng.IntN(2000))*time.Millisecond
	}
	evs = append(evs, diskSchedule(seed, cfg, ids)...)
	evs = append(evs, exclSchedule(seed, cfg, ids)...)
	evs = append(evs, lockSchedule(seed, cfg, ids)...)
	slices.SortStableFunc(evs, func(x, y event) int {
		switch {
		case x.at < y.at:
			return -1
		case x.at > y.at:
			return 1
		}
		return 0
	})
	return evs
}

// diskSchedule draws the blob-disk faults of a run: one per 10 s of
// workload on average, each on one node for 0.3 to 3 s. They come from an
// RNG of their own, so the rest of a seed's schedule is what it was
// before disk faults existed.
func diskSchedule(seed uint64, cfg Config, ids []uint64) []event {
	rng := rand.New(rand.NewPCG(seed, 0xd15c0))
	var evs []event
	n := int(cfg.Duration / (10 * time.Second))
	if rng.IntN(2) == 0 {
		n++
	}
	for range n {
		span := cfg.Duration - 2500*time.Millisecond
		if span <= 0 {
			break
		}
		evs = append(evs, event{at: 1500*time.Millisecond + time.Duration(rng.Int64N(int64(span))), kind: evDisk,
			node: ids[rng.IntN(len(ids))], dur: time.Duration(300+rng.IntN(2700)) * time.Millisecond,
			disk: diskFault(rng.IntN(int(diskFaults)))})
	}
	return evs
}
