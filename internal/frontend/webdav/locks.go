package webdav

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	xwebdav "golang.org/x/net/webdav"
)

// Locks is the WebDAV lock system of every node: the locks clients take
// with LOCK live in the cluster's log (records of kind meta.RecordDAVLock,
// named by token), so a lock taken through node 1 holds on node 3. Each
// node keeps them in memory (Load, called when the records change) and
// decides conflicts there.
//
// The x/net/webdav handler also takes a short "temporary" lock around
// every write without an If header, to find conflicts with clients'
// locks; those stay on the node (no log entry per PUT): they conflict
// with the replicated locks and with the node's other temporary locks.
//
// A LOCK through two nodes at once can race: each checks its view, then
// commits. The log orders them, and the loser's lock still exists; it is
// the one with the later expiry check that a client sees fail at UNLOCK
// or at its next write. Cairn accepts this window (milliseconds) rather
// than evaluate lock conflicts inside the namespace state machine.
type Locks struct {
	mu    sync.Mutex
	repl  map[string]lockRecord // token → lock, from the log
	temps map[string]lockRecord // token → temporary lock, this node only
	// Put and Delete persist a lock record; set by the node.
	put func(ctx context.Context, token string, value []byte) error
	del func(ctx context.Context, token string) error
	now func() time.Time
	// gen counts this node's changes to replicated locks; recent holds
	// the latest change of each token made here (nil: released) that a
	// Load may not reflect yet. A reload lists the records in the
	// background, so it can finish after a LOCK or UNLOCK through this
	// node that its list missed: Load re-applies the changes made after
	// the Generation the reload started from.
	gen    uint64
	recent map[string]recentChange
}

// recentChange is a change of a replicated lock made through this node.
type recentChange struct {
	gen uint64
	rec *lockRecord // nil: released
}

// lockRecord is a lock as stored in its record (JSON).
type lockRecord struct {
	Root      string    `json:"root"`
	ZeroDepth bool      `json:"zero_depth"`
	OwnerXML  string    `json:"owner,omitempty"`
	Duration  int64     `json:"duration_ns"` // negative: infinite
	Expires   time.Time `json:"expires,omitzero"`
	Shared    bool      `json:"shared,omitempty"` // a shared lock (several may cover a resource)
}

func (l lockRecord) expired(now time.Time) bool {
	return !l.Expires.IsZero() && !now.Before(l.Expires)
}

// NewLocks returns a lock system that persists locks with put and del.
func NewLocks(put func(ctx context.Context, token string, value []byte) error, del func(ctx context.Context, token string) error) *Locks {
	return &Locks{repl: map[string]lockRecord{}, temps: map[string]lockRecord{}, put: put, del: del, now: time.Now,
		recent: map[string]recentChange{}}
}

// Generation returns the count of this node's lock changes so far: read it
// before listing the records, and pass it to Load.
func (ls *Locks) Generation() uint64 {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.gen
}

// Load replaces the replicated locks with the records' (token → value),
// listed after Generation returned since. The changes made through this
// node after that are applied again on top: the list may predate them (a
// change is counted once its record applied here, so the earlier ones are
// in any list made after since was read). Records that do not decode are
// skipped.
func (ls *Locks) Load(records map[string][]byte, since uint64) {
	m := make(map[string]lockRecord, len(records))
	for tok, v := range records {
		var r lockRecord
		if json.Unmarshal(v, &r) == nil {
			m[tok] = r
		}
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for tok, c := range ls.recent {
		if c.gen <= since {
			delete(ls.recent, tok)
			continue
		}
		if c.rec == nil {
			delete(m, tok)
		} else {
			m[tok] = *c.rec
		}
	}
	ls.repl = m
}

// setLocked records a change of a replicated lock made through this node,
// once its record applied; rec nil releases it. ls.mu is held.
func (ls *Locks) setLocked(token string, rec *lockRecord) {
	ls.gen++
	ls.recent[token] = recentChange{gen: ls.gen, rec: rec}
	if rec == nil {
		delete(ls.repl, token)
	} else {
		ls.repl[token] = *rec
	}
}

var _ xwebdav.LockSystem = (*Locks)(nil)

func slashClean(name string) string {
	if name == "" || name[0] != '/' {
		name = "/" + name
	}
	return path.Clean(name)
}

// covers reports whether lock l covers resource name.
func (l lockRecord) covers(name string) bool {
	if name == l.Root {
		return true
	}
	if l.ZeroDepth {
		return false
	}
	return l.Root == "/" || strings.HasPrefix(name, l.Root+"/")
}

// conflicts reports whether a new lock of (name, zeroDepth, shared)
// would conflict with lock l: shared locks do not conflict with each other.
func (l lockRecord) conflicts(name string, zeroDepth, shared bool) bool {
	if shared && l.Shared {
		return false
	}
	if l.covers(name) {
		return true
	}
	// The new lock covers l's root (an infinite lock over a locked
	// descendant).
	return !zeroDepth && (name == "/" || strings.HasPrefix(l.Root, name+"/"))
}

// each calls fn for every live lock (replicated and temporary).
func (ls *Locks) each(now time.Time, fn func(token string, l lockRecord) bool) {
	for tok, l := range ls.repl {
		if !l.expired(now) && !fn(tok, l) {
			return
		}
	}
	for tok, l := range ls.temps {
		if !l.expired(now) && !fn(tok, l) {
			return
		}
	}
}

// Confirm implements webdav.LockSystem for one list of an If header:
// every token condition must hold (a token names a live lock covering
// name0; with Not, it does not), and each of name0 and name1 (when not
// "") must be covered by a lock the list names, or by no lock at all.
func (ls *Locks) Confirm(now time.Time, name0, name1 string, conditions ...xwebdav.Condition) (func(), error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	held := map[string]bool{}
	for _, c := range conditions {
		l, found := ls.lookup(c.Token)
		ok := found && !l.expired(now) && name0 != "" && l.covers(slashClean(name0))
		if ok == c.Not {
			return nil, xwebdav.ErrConfirmationFailed
		}
		if ok {
			held[c.Token] = true
		}
	}
	if len(held) == 0 {
		// A list that names no lock confirms nothing: the handler then
		// answers 412 (Precondition Failed).
		return nil, xwebdav.ErrConfirmationFailed
	}
	for _, name := range []string{name0, name1} {
		if name == "" {
			continue
		}
		name = slashClean(name)
		free := true
		ls.each(now, func(tok string, l lockRecord) bool {
			if l.covers(name) && !held[tok] {
				// Covered by a lock this list does not name: unless the
				// list holds another lock covering it, it is locked.
				free = false
				for t := range held {
					if hl, ok := ls.lookup(t); ok && hl.covers(name) {
						free = true
					}
				}
				return free
			}
			return true
		})
		if !free {
			return nil, xwebdav.ErrConfirmationFailed
		}
	}
	return func() {}, nil
}

func (ls *Locks) lookup(token string) (lockRecord, bool) {
	if l, ok := ls.repl[token]; ok {
		return l, true
	}
	l, ok := ls.temps[token]
	return l, ok
}

// temporary reports whether details are the handler's per-request lock.
func temporary(d xwebdav.LockDetails) bool {
	return d.OwnerXML == "" && d.Duration < 0 && d.ZeroDepth
}

// Create implements webdav.LockSystem: an exclusive lock.
func (ls *Locks) Create(now time.Time, details xwebdav.LockDetails) (string, error) {
	return ls.create(now, details, false)
}

// CreateShared makes a shared lock, which x/net/webdav's handler does not
// know (the Handler answers those LOCK requests itself).
func (ls *Locks) CreateShared(now time.Time, details xwebdav.LockDetails) (string, error) {
	return ls.create(now, details, true)
}

func (ls *Locks) create(now time.Time, details xwebdav.LockDetails, shared bool) (string, error) {
	name := slashClean(details.Root)
	rec := lockRecord{Root: name, ZeroDepth: details.ZeroDepth, OwnerXML: details.OwnerXML, Duration: int64(details.Duration), Shared: shared}
	if details.Duration >= 0 {
		rec.Expires = now.Add(details.Duration)
	}
	ls.mu.Lock()
	locked := false
	ls.each(now, func(_ string, l lockRecord) bool {
		locked = l.conflicts(name, details.ZeroDepth, shared)
		return !locked
	})
	if locked {
		ls.mu.Unlock()
		return "", xwebdav.ErrLocked
	}
	token := newToken()
	if !shared && temporary(details) {
		ls.temps[token] = rec
		ls.mu.Unlock()
		return token, nil
	}
	ls.mu.Unlock()
	v, _ := json.Marshal(rec)
	if err := ls.put(context.Background(), token, v); err != nil {
		return "", fmt.Errorf("webdav: lock %s: %w", name, err)
	}
	ls.mu.Lock()
	ls.setLocked(token, &rec) // visible at once here; Load brings it everywhere
	ls.mu.Unlock()
	return token, nil
}

// Refresh implements webdav.LockSystem.
func (ls *Locks) Refresh(now time.Time, token string, duration time.Duration) (xwebdav.LockDetails, error) {
	ls.mu.Lock()
	l, ok := ls.repl[token]
	ls.mu.Unlock()
	if !ok || l.expired(now) {
		return xwebdav.LockDetails{}, xwebdav.ErrNoSuchLock
	}
	l.Duration = int64(duration)
	l.Expires = time.Time{}
	if duration >= 0 {
		l.Expires = now.Add(duration)
	}
	v, _ := json.Marshal(l)
	if err := ls.put(context.Background(), token, v); err != nil {
		return xwebdav.LockDetails{}, fmt.Errorf("webdav: refresh lock: %w", err)
	}
	ls.mu.Lock()
	ls.setLocked(token, &l)
	ls.mu.Unlock()
	return xwebdav.LockDetails{Root: l.Root, Duration: time.Duration(l.Duration), OwnerXML: l.OwnerXML, ZeroDepth: l.ZeroDepth}, nil
}

// Unlock implements webdav.LockSystem.
func (ls *Locks) Unlock(now time.Time, token string) error {
	ls.mu.Lock()
	if _, ok := ls.temps[token]; ok {
		delete(ls.temps, token)
		ls.mu.Unlock()
		return nil
	}
	l, ok := ls.repl[token]
	ls.mu.Unlock()
	if !ok || l.expired(now) {
		return xwebdav.ErrNoSuchLock
	}
	if err := ls.del(context.Background(), token); err != nil && !errors.Is(err, errNoRecord) {
		return fmt.Errorf("webdav: unlock: %w", err)
	}
	ls.mu.Lock()
	ls.setLocked(token, nil)
	ls.mu.Unlock()
	return nil
}

// errNoRecord is what del returns for a lock already gone (the node maps
// the store's ErrNotFound to it).
var errNoRecord = errors.New("webdav: no such lock record")

// ErrNoRecord is returned by the node's del function for a missing record.
var ErrNoRecord = errNoRecord

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "urn:uuid:" + hex.EncodeToString(b[:4]) + "-" + hex.EncodeToString(b[4:6]) + "-" +
		hex.EncodeToString(b[6:8]) + "-" + hex.EncodeToString(b[8:10]) + "-" + hex.EncodeToString(b[10:])
}
