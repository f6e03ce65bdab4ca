package blob

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"
	"github.com/cairn-fs/cairn/internal/volume"
)

// The scrub re-reads every live needle in the background and checks it
// whole: header, length, CRC32C, and that the data hashes to the blob's
// name (SHA-256, which the CRC cannot vouch for: it was computed from the
// bytes the store was given). A copy that fails is quarantined as a read
// would quarantine it (verify.go). One pass walks the volumes in id order
// and each volume's indexed needles in offset order (sequential reads),
// at Config.ScrubRate bytes per second, or max(MinScrubRate, live bytes /
// ScrubPeriod) when the rate is derived, so a pass ends within the period.
// A needle deleted or moved by compaction while the pass runs is skipped;
// compaction's copies land in a newer volume, which the pass reaches later.
//
// Passes start ScrubPeriod apart (a pass that took longer is followed at
// once), the first one scrubStartDelay after Open at the earliest (recovery
// and start-up are not slowed down), and StartScrub starts one now. The
// pass's cursor and counts are written to scrub.state every
// scrubSaveEvery bytes, at each volume's end and when the pass ends or the
// store closes, so a restart resumes a pass where it stopped instead of
// starting over (a node restarted more often than a pass takes would
// otherwise never scrub its last volumes).
//
// # scrub.state (little-endian, 68 bytes)
//
//	off len field
//	  0   4 magic "CRNS"
//	  4   4 version 1
//	  8   8 start of the pass in progress or of the last one, Unix ns (0: none)
//	 16   8 end of the last completed pass, Unix ns (0: none)
//	 24   4 cursor volume id: the pass goes on at needles of this volume
//	 28   1 flags: 1 = a pass is in progress (resume it at the cursor)
//	 29   3 reserved
//	 32   8 cursor offset in that volume: needles at or after it are left
//	 40   8 bytes checked by the pass in progress
//	 48   8 needles checked by the pass in progress
//	 56   8 corrupt copies found by the pass in progress
//	 64   4 CRC32C of bytes 0..64
//
// It is written to scrub.state.tmp, fsynced and renamed (writeFileDurable).
// A missing or invalid file (logged at Warn) means no pass in progress and
// none completed.
//
// Limit: the scrub reads through the page cache, so a needle whose pages
// are cached is checked as cached; bit rot under them shows once they are
// evicted and read again (by a read's first check after a restart, or a
// later pass).

// DefaultScrubPeriod is the default Config.ScrubPeriod: the whole disk is
// scrubbed every two weeks.
const DefaultScrubPeriod = 14 * 24 * time.Hour

// MinScrubRate is the lowest derived scrub rate, in bytes per second: a
// small store is scrubbed in minutes or hours, then waits for its period.
const MinScrubRate = 1 << 20

const (
	scrubStateName = "scrub.state"
	scrubStateSize = 68
	// scrubStartDelay: the first pass after Open starts no sooner.
	scrubStartDelay = time.Minute
	// scrubSaveEvery is the progress, in bytes checked, after which the
	// cursor is saved.
	scrubSaveEvery = 64 << 20
	// scrubSlack: the pass runs ahead of its rate by up to this much time
	// before it sleeps, so it works in bursts (at 1 MiB/s, about 12 small
	// needles four times a second) instead of waking once per needle: each
	// wake-up and pread costs the GET path too (Go's sysmon, woken by an
	// ordinary system call, polls for a millisecond; bench/BENCHMARKS.md).
	scrubSlack = 250 * time.Millisecond
)

var scrubMagic = [4]byte{'C', 'R', 'N', 'S'}

// ScrubStatus is the progress of the scrub: the pass running, or the last
// one.
type ScrubStatus struct {
	// Running reports that a pass is in progress.
	Running bool
	// PassStarted is when the pass running (or the last one) began; zero
	// if there was none.
	PassStarted time.Time
	// LastCompleted is when the last complete pass ended; zero if none has.
	LastCompleted time.Time
	// NextPass is when the next background pass is due (zero while one
	// runs, or with no background passes).
	NextPass time.Time
	// Rate is the pace of the pass running (or the last one) in bytes per
	// second.
	Rate int64
	// BytesChecked and NeedlesChecked count what the pass running (or the
	// last one) has checked, needle headers and padding included;
	// BytesTotal is the live bytes when it began (a pass may check a
	// little more: blobs written meanwhile).
	BytesChecked, BytesTotal, NeedlesChecked int64
	// CorruptFound is the copies the pass running (or the last one) found
	// corrupt and quarantined.
	CorruptFound int64
	// Passes is the passes completed since Open.
	Passes int64
}

// scrubCursor is where a pass goes on: the first needle of volume vol at
// or after offset off.
type scrubCursor struct {
	vol uint32
	off int64
}

// scrubber runs the scrub passes on one goroutine.
type scrubber struct {
	s     *Store
	clock clock.Clock
	kick  chan struct{}
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	// first is when the first pass after Open may start (Open +
	// scrubStartDelay).
	first time.Time

	mu     sync.Mutex
	st     ScrubStatus // guarded by mu
	cursor scrubCursor // guarded by mu

	// Owned by the scrub goroutine.
	due   time.Time // the pace: when the bytes checked so far are paid for
	saved int64     // BytesChecked at the last save
	buf   []byte

	// sleeping, for tests, is called when the scrub waits on the clock
	// (for d; 0: for a kick or the stop).
	sleeping func(d time.Duration)
}

// startScrub loads scrub.state and starts the scrub goroutine, which
// Close stops.
func (s *Store) startScrub() {
	sc := &scrubber{s: s, clock: s.cfg.Clock, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}), sleeping: s.cfg.scrubSleeping,
		first: s.cfg.Clock.Now().Add(scrubStartDelay)}
	sc.load()
	s.scrub = sc
	go sc.run()
}

// stopScrub stops the scrub and waits for it; the cursor of a pass in
// progress is saved.
func (s *Store) stopScrub() {
	if s.scrub == nil {
		return
	}
	s.scrub.once.Do(func() { close(s.scrub.stop) })
	<-s.scrub.done
}

// ScrubStatus returns the progress of the scrub. It does not block on the
// scrub.
func (s *Store) ScrubStatus() ScrubStatus {
	sc := s.scrub
	sc.mu.Lock()
	defer sc.mu.Unlock()
	st := sc.st
	if !st.Running && s.cfg.ScrubPeriod > 0 {
		st.NextPass = sc.nextDueLocked()
	}
	return st
}

// StartScrub starts a scrub pass now, unless one is running, and returns
// the status and whether it started one. The pass runs in the background
// at the configured rate; ScrubStatus follows it.
func (s *Store) StartScrub() (ScrubStatus, bool) {
	sc := s.scrub
	sc.mu.Lock()
	started := !sc.st.Running && !s.closed.Load()
	select {
	case <-sc.stop: // closing: no goroutine to run it
		started = false
	default:
	}
	if started {
		// Running now, so that a caller polling ScrubStatus after this
		// returns never sees the pass before it began.
		sc.beginLocked(s.cfg.Clock.Now())
		select {
		case sc.kick <- struct{}{}:
		default:
		}
	}
	st := sc.st
	sc.mu.Unlock()
	return st, started
}

// beginLocked starts a new pass at now. Must hold sc.mu.
func (sc *scrubber) beginLocked(now time.Time) {
	sc.st = ScrubStatus{Running: true, PassStarted: now, LastCompleted: sc.st.LastCompleted,
		Passes: sc.st.Passes, Rate: sc.rate(), BytesTotal: sc.s.Stats().LiveBytes}
	sc.cursor = scrubCursor{}
	sc.saved = 0
}

// rate returns the pace of a pass starting now, in bytes per second.
func (sc *scrubber) rate() int64 {
	cfg := &sc.s.cfg
	if cfg.ScrubRate > 0 {
		return cfg.ScrubRate
	}
	period := cfg.ScrubPeriod
	if period <= 0 {
		period = DefaultScrubPeriod
	}
	var live int64
	for _, vr := range *sc.s.vols.Load() {
		live += vr.live.Load()
	}
	return max(MinScrubRate, int64(float64(live)/period.Seconds()))
}

// nextDueLocked is when the next background pass is due: ScrubPeriod after
// the last one began, and not before the start delay after Open. Must hold
// sc.mu.
func (sc *scrubber) nextDueLocked() time.Time {
	if sc.st.PassStarted.IsZero() {
		return sc.first
	}
	return later(sc.st.PassStarted.Add(sc.s.cfg.ScrubPeriod), sc.first)
}

// run waits for each pass (due, or kicked) and runs it, until stopped.
func (sc *scrubber) run() {
	defer close(sc.done)
	if !sc.sleep(scrubStartDelay, true) {
		return
	}
	for {
		sc.mu.Lock()
		running := sc.st.Running // resumed from scrub.state, or kicked
		var wait time.Duration
		if !running && sc.s.cfg.ScrubPeriod > 0 {
			wait = sc.nextDueLocked().Sub(sc.clock.Now())
		}
		sc.mu.Unlock()
		if !running {
			if sc.s.cfg.ScrubPeriod < 0 {
				wait = -1 // a kick or the stop
			}
			if !sc.sleep(wait, true) {
				return
			}
			sc.mu.Lock()
			if !sc.st.Running {
				sc.beginLocked(sc.clock.Now())
			}
			sc.mu.Unlock()
		}
		select {
		case <-sc.kick: // StartScrub's kick for this very pass: spent
		default:
		}
		if !sc.pass() {
			return
		}
	}
}

// sleep waits d on the clock (forever for d < 0; not at all for d == 0),
// or less if kickable and StartScrub kicks. It returns false once the
// scrub is stopped.
func (sc *scrubber) sleep(d time.Duration, kickable bool) bool {
	select {
	case <-sc.stop:
		return false
	default:
	}
	if d == 0 {
		return true
	}
	var fired chan struct{}
	if d > 0 {
		fired = make(chan struct{})
		cancel := sc.clock.AfterFunc(d, func() { close(fired) })
		defer cancel()
	}
	var kick chan struct{}
	if kickable {
		kick = sc.kick
	}
	if sc.sleeping != nil {
		sc.sleeping(max(d, 0))
	}
	select {
	case <-sc.stop:
		return false
	case <-fired:
	case <-kick:
	}
	return true
}

// pass runs (or resumes) the pass in sc.st from sc.cursor to its end. It
// returns false if the scrub was stopped first.
func (sc *scrubber) pass() bool {
	s := sc.s
	sc.mu.Lock()
	rate, cur := sc.st.Rate, sc.cursor
	sc.mu.Unlock()
	sc.due = sc.clock.Now()
	s.log.Info("scrub pass", "resumed_at_volume", cur.vol, "rate_bytes_per_sec", rate)
	for {
		vr, entries := sc.nextVolume(cur)
		if vr == nil {
			break
		}
		id := vr.v.ID()
		vr.release()
		for _, e := range entries {
			if !sc.check(id, e, rate) {
				sc.save()
				return false
			}
		}
		cur = scrubCursor{vol: id + 1}
		sc.mu.Lock()
		sc.cursor = cur
		sc.mu.Unlock()
		sc.save()
	}
	sc.mu.Lock()
	sc.st.Running = false
	sc.st.LastCompleted = sc.clock.Now()
	sc.st.Passes++
	st := sc.st
	sc.mu.Unlock()
	sc.buf = nil
	sc.save()
	lvl := s.log.Info
	if st.CorruptFound > 0 {
		lvl = s.log.Warn // each copy was logged at Error when found
	}
	lvl("scrub pass complete", "bytes", st.BytesChecked, "needles", st.NeedlesChecked,
		"corrupt", st.CorruptFound, "took", st.LastCompleted.Sub(st.PassStarted))
	return true
}

// nextVolume returns the first volume at or after cur (held: release it)
// and its indexed needles at or after cur's offset, in offset order; nil
// when none is left.
func (sc *scrubber) nextVolume(cur scrubCursor) (*volRef, []ckEntry) {
	s := sc.s
	for {
		next := uint32(0)
		for id := range *s.vols.Load() {
			if id >= cur.vol && (next == 0 || id < next) {
				next = id
			}
		}
		if next == 0 {
			return nil, nil
		}
		vr := s.acquire(next)
		if vr == nil { // retired by compaction meanwhile
			cur = scrubCursor{vol: next + 1}
			continue
		}
		var entries []ckEntry
		s.idx.forEach(func(key uint64, sb uint8, l loc) bool {
			if l.vol == next && l.offset() >= cur.off {
				entries = append(entries, ckEntry{key: key, sb: sb, l: l})
			}
			return true
		})
		slices.SortFunc(entries, func(a, b ckEntry) int { return cmp.Compare(a.l.off, b.l.off) })
		return vr, entries
	}
}

// check scrubs one needle of volume id, then waits as the rate asks. It
// returns false if the scrub was stopped.
func (sc *scrubber) check(id uint32, e ckEntry, rate int64) bool {
	s := sc.s
	select {
	case <-sc.stop:
		return false
	default:
	}
	vr := s.acquire(id)
	if vr == nil {
		return true // compacted away: its needles were copied to a newer volume
	}
	if !s.idx.hasKey(e.key, e.sb, e.l) { // deleted, moved or quarantined meanwhile
		vr.release()
		return true
	}
	need := volume.HeaderSize + int(e.l.n)
	if cap(sc.buf) < need {
		sc.buf = make([]byte, need)
	}
	hd, data, err := vr.v.ReadNeedle(e.l.offset(), int(e.l.n), sc.buf)
	if err == nil {
		if k, b := splitHash((*Hash)(&hd.Hash)); k != e.key || b != e.sb || hd.Tombstone() {
			err = fmt.Errorf("%w: needle %d@%d names blob %x, not the index's", volume.ErrCorrupt, id, e.l.offset(), hd.Hash[:9])
		} else if Sum(data) != Hash(hd.Hash) {
			err = fmt.Errorf("%w: needle %d@%d: data does not hash to %x", volume.ErrCorrupt, id, e.l.offset(), hd.Hash)
		}
	}
	corrupt := false
	switch {
	case err == nil:
		s.idx.markVerifiedKey(e.key, e.sb, e.l)
	case errors.Is(err, volume.ErrCorrupt):
		corrupt = true
		s.quarantine(vr, e.key, e.sb, e.l, "scrub", err)
	default:
		s.log.Warn("scrub: cannot read needle; the pass goes on", "volume", id, "offset", e.l.offset(), "err", err)
	}
	vr.release()
	size := volume.NeedleSize(int(e.l.n))
	sc.mu.Lock()
	sc.st.BytesChecked += size
	sc.st.NeedlesChecked++
	if corrupt {
		sc.st.CorruptFound++
	}
	sc.cursor = scrubCursor{vol: id, off: e.l.offset() + size}
	save := sc.st.BytesChecked-sc.saved >= scrubSaveEvery
	sc.mu.Unlock()
	if save {
		sc.save()
	}
	now := sc.clock.Now()
	sc.due = later(sc.due, now).Add(time.Duration(float64(size) / float64(rate) * float64(time.Second)))
	if ahead := sc.due.Sub(now); ahead >= scrubSlack {
		return sc.sleep(ahead, false)
	}
	return true
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// save writes scrub.state; a failure is logged at Warn (a restart then
// resumes from an older cursor, or starts over).
func (sc *scrubber) save() {
	sc.mu.Lock()
	st, cur := sc.st, sc.cursor
	sc.saved = st.BytesChecked
	sc.mu.Unlock()
	b := make([]byte, scrubStateSize)
	copy(b[0:4], scrubMagic[:])
	binary.LittleEndian.PutUint32(b[4:8], 1)
	if !st.PassStarted.IsZero() {
		binary.LittleEndian.PutUint64(b[8:16], uint64(st.PassStarted.UnixNano()))
	}
	if st.Running {
		b[28] = 1
	}
	if !st.LastCompleted.IsZero() {
		binary.LittleEndian.PutUint64(b[16:24], uint64(st.LastCompleted.UnixNano()))
	}
	binary.LittleEndian.PutUint32(b[24:28], cur.vol)
	binary.LittleEndian.PutUint64(b[32:40], uint64(cur.off))
	binary.LittleEndian.PutUint64(b[40:48], uint64(st.BytesChecked))
	binary.LittleEndian.PutUint64(b[48:56], uint64(st.NeedlesChecked))
	binary.LittleEndian.PutUint64(b[56:64], uint64(st.CorruptFound))
	binary.LittleEndian.PutUint32(b[64:68], crc32.Checksum(b[:64], castagnoli))
	if err := sc.s.writeFileDurable(scrubStateName, b); err != nil {
		sc.s.log.Warn("cannot save the scrub's progress", "err", err)
	}
}

// load reads scrub.state into sc (at Open, before the goroutine starts).
func (sc *scrubber) load() {
	s := sc.s
	f, err := s.fs.OpenFile(filepath.Join(s.cfg.Dir, scrubStateName), os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	var b [scrubStateSize]byte
	if err == nil {
		_, err = f.ReadAt(b[:], 0)
		f.Close()
		if errors.Is(err, io.EOF) {
			err = errors.New("short file")
		}
	}
	if err == nil && ([4]byte(b[0:4]) != scrubMagic || binary.LittleEndian.Uint32(b[4:8]) != 1 ||
		crc32.Checksum(b[:64], castagnoli) != binary.LittleEndian.Uint32(b[64:68])) {
		err = errors.New("bad magic, version or CRC")
	}
	if err != nil {
		s.log.Warn("ignoring the scrub's saved progress", "file", scrubStateName, "err", err)
		return
	}
	u64 := func(off int) int64 { return int64(binary.LittleEndian.Uint64(b[off : off+8])) }
	if t := u64(16); t != 0 {
		sc.st.LastCompleted = time.Unix(0, t)
	}
	if t := u64(8); t != 0 {
		sc.st.PassStarted = time.Unix(0, t)
	}
	if b[28]&1 != 0 && !sc.st.PassStarted.IsZero() {
		sc.st.Running = true
		sc.st.Rate = sc.rate()
		sc.st.BytesTotal = s.Stats().LiveBytes
		sc.st.BytesChecked, sc.st.NeedlesChecked, sc.st.CorruptFound = u64(40), u64(48), u64(56)
		sc.cursor = scrubCursor{vol: binary.LittleEndian.Uint32(b[24:28]), off: u64(32)}
		sc.saved = sc.st.BytesChecked
	}
}
