package meta

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cairn-fs/cairn/internal/kv"
)

type lockTester struct {
	t     *testing.T
	db    kv.Store
	apply func(Command) Result
	now   int64
}

func newLockTester(t *testing.T) *lockTester {
	db := kv.NewMem()
	return &lockTester{t: t, db: db, apply: applyVia(t, db)}
}

func owner(node, id uint64) LockOwner { return LockOwner{Node: node, Epoch: 1, ID: id} }

func (lt *lockTester) do(op Op, c LockCmd) Result {
	lt.t.Helper()
	lt.now++
	if c.LeaseNs == 0 && (op == OpLock || op == OpLockSession) {
		c.LeaseNs = 5e9
	}
	return lt.apply(Command{Op: op, TimeNs: lt.now, Lock: &c})
}

// set asks for a lock and returns its result, failing on an error.
func (lt *lockTester) set(ino Ino, o LockOwner, kind LockKind, typ LockType, start, end uint64, wait uint64) *LockResult {
	lt.t.Helper()
	r := lt.do(OpLock, LockCmd{Ino: ino, Wait: wait != 0,
		Lock: Lock{Owner: o, Kind: kind, Type: typ, Start: start, End: end, WaitID: wait, Pid: uint32(o.ID)}})
	if r.Err != nil {
		lt.t.Fatalf("lock %v %v [%d,%d] by %v: %v", kind, typ, start, end, o, r.Err)
	}
	return r.Lock
}

func (lt *lockTester) held(ino Ino) []Lock {
	lt.t.Helper()
	h, _, err := NewReader(lt.db).Locks(ino)
	if err != nil {
		lt.t.Fatal(err)
	}
	return h
}

func TestLockPOSIXSplitMerge(t *testing.T) {
	lt := newLockTester(t)
	a := owner(1, 10)
	lt.set(5, a, LockPOSIX, LockWrite, 0, 99, 0)
	lt.set(5, a, LockPOSIX, LockRead, 40, 49, 0) // splits the write lock in three
	h := lt.held(5)
	if len(h) != 3 || h[0].End != 39 || h[1].Type != LockRead || h[2].Start != 50 || h[2].End != 99 {
		t.Fatalf("after split: %+v", h)
	}
	lt.set(5, a, LockPOSIX, LockWrite, 40, 49, 0) // merges back into one
	if h := lt.held(5); len(h) != 1 || h[0].Start != 0 || h[0].End != 99 || h[0].Type != LockWrite {
		t.Fatalf("after merge: %+v", h)
	}
	lt.set(5, a, LockPOSIX, LockUnlock, 10, 19, 0)
	if h := lt.held(5); len(h) != 2 || h[0].End != 9 || h[1].Start != 20 {
		t.Fatalf("after unlock in the middle: %+v", h)
	}
	lt.set(5, a, LockPOSIX, LockWrite, 100, LockEOF, 0) // adjacent: merges to EOF
	if h := lt.held(5); len(h) != 2 || h[1].Start != 20 || h[1].End != LockEOF {
		t.Fatalf("after lock to EOF: %+v", h)
	}
	lt.set(5, a, 0, LockUnlock, 0, LockEOF, 0) // close
	if h := lt.held(5); len(h) != 0 {
		t.Fatalf("after close: %+v", h)
	}
	if s, _ := NewReader(lt.db).LockSession(1); s == nil || len(s.Inos) != 0 {
		t.Fatalf("session after close: %+v", s)
	}
}

func TestLockConflictsAndWaiters(t *testing.T) {
	lt := newLockTester(t)
	a, b, c := owner(1, 1), owner(2, 1), owner(3, 1)
	if r := lt.set(7, a, LockPOSIX, LockWrite, 0, 9, 0); !r.Granted {
		t.Fatal("first lock not granted")
	}
	if r := lt.set(7, b, LockPOSIX, LockWrite, 10, 19, 0); !r.Granted {
		t.Fatal("a disjoint range conflicted")
	}
	r := lt.set(7, b, LockPOSIX, LockRead, 5, 5, 0)
	if r.Granted || r.Queued || r.Conflict == nil || r.Conflict.Owner != a || r.Conflict.Pid != 1 {
		t.Fatalf("overlap: %+v", r)
	}
	if r := lt.set(7, c, LockFlock, LockWrite, 0, 0, 0); !r.Granted {
		t.Fatal("flock conflicted with a POSIX lock")
	}
	// b and c queue for a's range, in order.
	if r := lt.set(7, b, LockPOSIX, LockWrite, 0, 9, 100); !r.Queued {
		t.Fatalf("b did not queue: %+v", r)
	}
	if r := lt.set(7, c, LockPOSIX, LockRead, 0, 0, 200); !r.Queued {
		t.Fatalf("c did not queue: %+v", r)
	}
	r = lt.set(7, a, LockPOSIX, LockUnlock, 0, LockEOF, 0)
	if len(r.Grants) != 1 || r.Grants[0].Lock.Owner != b || r.Grants[0].Lock.WaitID != 100 {
		t.Fatalf("unlock granted %+v, want b first", r.Grants)
	}
	r = lt.set(7, b, 0, LockUnlock, 0, LockEOF, 0)
	if len(r.Grants) != 1 || r.Grants[0].Lock.Owner != c {
		t.Fatalf("b's close granted %+v, want c", r.Grants)
	}
	// A cancelled wait leaves the queue.
	if r := lt.set(7, a, LockPOSIX, LockWrite, 0, 0, 300); !r.Queued {
		t.Fatal("a did not queue")
	}
	if r := lt.do(OpLockCancel, LockCmd{Ino: 7, Lock: Lock{Owner: a, WaitID: 300}}); r.Err != nil || r.Lock.Granted {
		t.Fatalf("cancel: %+v", r)
	}
	if _, w, _ := NewReader(lt.db).Locks(7); len(w) != 0 {
		t.Fatalf("waiters after cancel: %+v", w)
	}
}

func TestLockFlockSharedExclusive(t *testing.T) {
	lt := newLockTester(t)
	a, b, c := owner(1, 1), owner(2, 2), owner(1, 3)
	lt.set(9, a, LockFlock, LockRead, 0, 0, 0)
	if r := lt.set(9, b, LockFlock, LockRead, 0, 0, 0); !r.Granted {
		t.Fatal("two shared flocks conflicted")
	}
	if r := lt.set(9, c, LockFlock, LockWrite, 0, 0, 0); r.Granted {
		t.Fatal("exclusive flock granted over shared ones")
	}
	if r := lt.set(9, c, LockFlock, LockWrite, 0, 0, 1); !r.Queued {
		t.Fatal("exclusive flock did not queue")
	}
	lt.set(9, a, LockFlock, LockUnlock, 0, 0, 0)
	r := lt.set(9, b, LockFlock, LockUnlock, 0, 0, 0)
	if len(r.Grants) != 1 || r.Grants[0].Lock.Owner != c {
		t.Fatalf("grants %+v", r.Grants)
	}
}

func TestLockDeadlock(t *testing.T) {
	lt := newLockTester(t)
	a, b := owner(1, 1), owner(2, 1)
	lt.set(1, a, LockPOSIX, LockWrite, 0, 0, 0)
	lt.set(2, b, LockPOSIX, LockWrite, 0, 0, 0)
	if r := lt.set(2, a, LockPOSIX, LockWrite, 0, 0, 1); !r.Queued {
		t.Fatal("a did not wait for b")
	}
	r := lt.do(OpLock, LockCmd{Ino: 1, Wait: true, Lock: Lock{Owner: b, Kind: LockPOSIX, Type: LockWrite, WaitID: 2}})
	if !errors.Is(r.Err, ErrDeadlock) {
		t.Fatalf("b waiting for a: %v, want EDEADLK", r.Err)
	}
	// A flock wait is never reported (Linux checks POSIX locks only).
	lt.set(3, a, LockFlock, LockWrite, 0, 0, 0)
	if r := lt.set(3, b, LockFlock, LockWrite, 0, 0, 3); !r.Queued {
		t.Fatal("flock wait refused")
	}
}

func TestLockSessionExpiry(t *testing.T) {
	lt := newLockTester(t)
	a, b := owner(1, 1), owner(2, 1)
	lt.set(4, a, LockPOSIX, LockWrite, 0, LockEOF, 0)
	lt.set(4, b, LockPOSIX, LockWrite, 0, 0, 7)
	s, err := NewReader(lt.db).LockSession(1)
	if err != nil || s == nil || len(s.Inos) != 1 {
		t.Fatalf("session %+v %v", s, err)
	}
	if r := lt.do(OpLockExpire, LockCmd{Lock: Lock{Owner: a}, RenewNs: s.RenewNs - 1}); !errors.Is(r.Err, ErrPrecondition) {
		t.Fatalf("expiry of a renewed session: %v", r.Err)
	}
	r := lt.do(OpLockExpire, LockCmd{Lock: Lock{Owner: a}, RenewNs: s.RenewNs})
	if r.Err != nil || len(r.Lock.Grants) != 1 || r.Lock.Grants[0].Lock.Owner != b {
		t.Fatalf("expiry: %+v", r)
	}
	// The expired session's node learns it on its next command.
	if r := lt.do(OpLockSession, LockCmd{Lock: Lock{Owner: a}}); !errors.Is(r.Err, ErrLockLost) {
		t.Fatalf("renewal of an expired session: %v", r.Err)
	}
	if r := lt.do(OpLock, LockCmd{Ino: 4, Lock: Lock{Owner: a, Kind: LockPOSIX, Type: LockRead}}); !errors.Is(r.Err, ErrLockLost) {
		t.Fatalf("lock in an expired session: %v", r.Err)
	}
	// A new epoch starts a new session; a newer epoch drops the old one's locks.
	a2 := LockOwner{Node: 1, Epoch: 2, ID: 1}
	lt.set(5, a2, LockPOSIX, LockWrite, 0, 0, 0)
	a3 := LockOwner{Node: 1, Epoch: 3, ID: 1}
	if r := lt.set(5, a3, LockPOSIX, LockWrite, 0, 0, 0); !r.Granted {
		t.Fatal("a restarted node's old lock still held")
	}
}

// TestLockModel applies random lock commands from a few owners on a few
// inodes and checks the table against a byte-by-byte model of fcntl and
// flock semantics after each: the same bytes locked by the same owners,
// ranges merged (no two touching locks of one owner and type), waiters
// granted in FIFO order as soon as they no longer conflict.
func TestLockModel(t *testing.T) {
	const size = 12
	type model struct {
		posix map[LockOwner]*[size]LockType
		flock map[LockOwner]LockType
	}
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			lt := newLockTester(t)
			owners := []LockOwner{owner(1, 1), owner(1, 2), owner(2, 1)}
			m := model{posix: map[LockOwner]*[size]LockType{}, flock: map[LockOwner]LockType{}}
			for _, o := range owners {
				m.posix[o] = &[size]LockType{}
			}
			conflicts := func(o LockOwner, kind LockKind, typ LockType, s, e uint64) bool {
				for _, p := range owners {
					if p == o {
						continue
					}
					if kind == LockFlock {
						if f := m.flock[p]; f != 0 && (f == LockWrite || typ == LockWrite) {
							return true
						}
						continue
					}
					for i := s; i <= e; i++ {
						if b := m.posix[p][i]; b != 0 && (b == LockWrite || typ == LockWrite) {
							return true
						}
					}
				}
				return false
			}
			for step := range 300 {
				o := owners[rng.IntN(len(owners))]
				kind := LockPOSIX
				if rng.IntN(4) == 0 {
					kind = LockFlock
				}
				typ := LockType(1 + rng.IntN(3))
				s := uint64(rng.IntN(size))
				e := s + uint64(rng.IntN(size-int(s)))
				if kind == LockFlock {
					s, e = 0, LockEOF
				}
				r := lt.set(1, o, kind, typ, s, e, 0)
				// The model.
				switch {
				case typ == LockUnlock && kind == LockFlock:
					delete(m.flock, o)
				case typ == LockUnlock:
					for i := s; i <= e; i++ {
						m.posix[o][i] = 0
					}
				case kind == LockFlock:
					if m.flock[o] != typ {
						delete(m.flock, o)
						if !conflicts(o, kind, typ, s, e) {
							m.flock[o] = typ
						}
					}
				case !conflicts(o, kind, typ, s, e):
					for i := s; i <= e; i++ {
						m.posix[o][i] = typ
					}
				}
				wantGranted := typ == LockUnlock || (kind == LockFlock && m.flock[o] == typ) ||
					(kind == LockPOSIX && !conflicts(o, kind, typ, s, e))
				if r.Granted != wantGranted {
					t.Fatalf("step %d: %v %v %v [%d,%d]: granted %v, model %v", step, o, kind, typ, s, e, r.Granted, wantGranted)
				}
				// Compare the table with the model.
				var got = map[LockOwner]*[size]LockType{}
				gotFlock := map[LockOwner]LockType{}
				for _, o := range owners {
					got[o] = &[size]LockType{}
				}
				held := lt.held(1)
				for i, h := range held {
					if h.Kind == LockFlock {
						gotFlock[h.Owner] = h.Type
						continue
					}
					for j := h.Start; j <= h.End && j < size; j++ {
						if got[h.Owner][j] != 0 {
							t.Fatalf("step %d: owner %v holds byte %d twice: %+v", step, h.Owner, j, held)
						}
						got[h.Owner][j] = h.Type
					}
					for _, g := range held[i+1:] {
						if g.Kind == LockPOSIX && g.Owner == h.Owner && g.Type == h.Type && (overlaps(&g, &h) || adjacent(&g, &h)) {
							t.Fatalf("step %d: unmerged locks %+v and %+v", step, h, g)
						}
					}
				}
				for _, o := range owners {
					if *got[o] != *m.posix[o] || gotFlock[o] != m.flock[o] {
						t.Fatalf("step %d: owner %v table %v flock %v, model %v flock %v", step, o, *got[o], gotFlock[o], *m.posix[o], m.flock[o])
					}
				}
			}
		})
	}
}
