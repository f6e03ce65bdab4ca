package meta

import (
	"errors"
	"testing"

	"github.com/cairn-fs/cairn/internal/kv"
)

type ownTester struct {
	t     *testing.T
	db    kv.Store
	apply func(Command) Result
	now   int64
}

func newOwnTester(t *testing.T) *ownTester {
	db := kv.NewMem()
	ot := &ownTester{t: t, db: db, apply: applyVia(t, db)}
	if r := ot.do(Command{Op: OpCreateBucket, Bucket: &Bucket{Name: "own"}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	return ot
}

func (ot *ownTester) do(c Command) Result {
	ot.t.Helper()
	ot.now++
	c.TimeNs = ot.now
	if c.BucketName == "" && c.Op != OpCreateBucket {
		c.BucketName = "own"
	}
	return ot.apply(c)
}

func (ot *ownTester) ino(path string) Ino {
	ot.t.Helper()
	n, err := NewReader(ot.db).Lookup("own", path)
	if err != nil {
		ot.t.Fatalf("lookup %q: %v", path, err)
	}
	return n.Ino
}

func (ot *ownTester) claim(node, session uint64, dir Ino) *OwnResult {
	ot.t.Helper()
	r := ot.do(Command{Op: OpOwn, Own: &OwnCmd{Node: node, Session: session, LeaseNs: 5e9, Dir: dir}})
	if r.Err != nil {
		ot.t.Fatalf("claim %d by node %d: %v", dir, node, r.Err)
	}
	return r.Own
}

func held(node uint64, dirs ...DirEpoch) *OwnCmd { return &OwnCmd{Node: node, Held: dirs} }

// TestOwnership: a claim is granted to one node at a time; the owner's
// stamped changes apply, an unstamped one or another node's is refused
// (ErrOwned), and one stamped with a claim that moved is refused
// (ErrFenced) — after a disown and after the session's expiry.
func TestOwnership(t *testing.T) {
	ot := newOwnTester(t)
	if r := ot.do(Command{Op: OpMkdir, Path: "d"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	d := ot.ino("d")
	a := ot.claim(1, 100, d)
	if !a.Granted || a.Owner.Node != 1 || a.Owner.Epoch == 0 {
		t.Fatalf("first claim: %+v", a)
	}
	if again := ot.claim(1, 100, d); !again.Granted || again.Owner.Epoch != a.Owner.Epoch {
		t.Fatalf("the owner's second claim: %+v, want the same epoch %d", again, a.Owner.Epoch)
	}
	b := ot.claim(2, 200, d)
	if b.Granted || b.Owner.Node != 1 {
		t.Fatalf("a second node's claim: %+v, want refused naming node 1", b)
	}
	mine := held(1, DirEpoch{d, a.Owner.Epoch})

	// The owner's change applies; nobody else's does.
	if r := ot.do(Command{Op: OpPutFile, Path: "d/x", File: &Inode{}, Own: mine}); r.Err != nil {
		t.Fatalf("owner's create: %v", r.Err)
	}
	var oe *OwnedError
	if r := ot.do(Command{Op: OpPutFile, Path: "d/y", File: &Inode{}}); !errors.As(r.Err, &oe) || oe.Node != 1 || oe.Dir != d {
		t.Fatalf("unstamped create in an owned directory: %v, want ErrOwned by node 1", r.Err)
	}
	if r := ot.do(Command{Op: OpMkdir, Path: "d/z", Own: held(2, DirEpoch{d, a.Owner.Epoch})}); !errors.Is(r.Err, ErrFenced) {
		t.Fatalf("another node naming the owner's claim: %v, want ErrFenced", r.Err)
	}
	// Replacing a file's content changes no name.
	if r := ot.do(Command{Op: OpPutFile, Path: "d/x", File: &Inode{Mode: 0o600}}); r.Err != nil {
		t.Fatalf("content replace by a non-owner: %v", r.Err)
	}
	// A directory the owner makes is its own, under the same claim.
	if r := ot.do(Command{Op: OpMkdir, Path: "d/sub", Own: mine}); r.Err != nil {
		t.Fatal(r.Err)
	}
	sub := ot.ino("d/sub")
	if o, _ := NewReader(ot.db).DirOwner(sub); o == nil || o.Node != 1 || o.Epoch != a.Owner.Epoch {
		t.Fatalf("owner of a directory the owner made: %+v", o)
	}
	if r := ot.do(Command{Op: OpPutFile, Path: "d/sub/f", File: &Inode{}, Own: held(1, DirEpoch{sub, a.Owner.Epoch})}); r.Err != nil {
		t.Fatal(r.Err)
	}
	// A rename out of an owned directory needs its claim; rmdir of an
	// owned directory needs the directory's own claim too.
	if r := ot.do(Command{Op: OpRename, Path: "d/x", DstPath: "x"}); !errors.Is(r.Err, ErrOwned) {
		t.Fatalf("unstamped rename out of an owned directory: %v", r.Err)
	}

	// Disown: the old claim is fenced, a new claimant gets a new epoch.
	if r := ot.do(Command{Op: OpDisown, Own: &OwnCmd{Node: 1, Dir: d, Epoch: a.Owner.Epoch}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := ot.do(Command{Op: OpDisown, Own: &OwnCmd{Node: 1, Dir: d, Epoch: a.Owner.Epoch}}); !errors.Is(r.Err, ErrPrecondition) {
		t.Fatalf("second disown: %v", r.Err)
	}
	if r := ot.do(Command{Op: OpPutFile, Path: "d/late", File: &Inode{}, Own: mine}); !errors.Is(r.Err, ErrFenced) {
		t.Fatalf("a change decided under a claim given up: %v, want ErrFenced", r.Err)
	}
	b = ot.claim(2, 200, d)
	if !b.Granted || b.Owner.Epoch <= a.Owner.Epoch {
		t.Fatalf("claim after disown: %+v", b)
	}
	// Even if node 1 claims again, its old stamp stays fenced.
	if r := ot.do(Command{Op: OpDisown, Own: &OwnCmd{Node: 2, Dir: d, Epoch: b.Owner.Epoch}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	a2 := ot.claim(1, 100, d)
	if r := ot.do(Command{Op: OpPutFile, Path: "d/late", File: &Inode{}, Own: mine}); !errors.Is(r.Err, ErrFenced) {
		t.Fatalf("a change under an older claim of the same node: %v, want ErrFenced", r.Err)
	}
	if r := ot.do(Command{Op: OpPutFile, Path: "d/late", File: &Inode{}, Own: held(1, DirEpoch{d, a2.Owner.Epoch})}); r.Err != nil {
		t.Fatal(r.Err)
	}

	// Expiry of node 1's session drops its directories: its stamps are
	// fenced, and the directory is free.
	sess, _ := NewReader(ot.db).LockSession(1)
	if r := ot.do(Command{Op: OpLockExpire, Lock: &LockCmd{Lock: Lock{Owner: LockOwner{Node: 1, Epoch: 100}}, RenewNs: sess.RenewNs}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if o, _ := NewReader(ot.db).DirOwner(d); o != nil {
		t.Fatalf("owner after the session expired: %+v", o)
	}
	if o, _ := NewReader(ot.db).DirOwner(sub); o != nil {
		t.Fatalf("owner of the made directory after the session expired: %+v", o)
	}
	if r := ot.do(Command{Op: OpPutFile, Path: "d/after", File: &Inode{}, Own: held(1, DirEpoch{d, a2.Owner.Epoch})}); !errors.Is(r.Err, ErrFenced) {
		t.Fatalf("a change of an expired owner: %v, want ErrFenced", r.Err)
	}
	if r := ot.do(Command{Op: OpOwn, Own: &OwnCmd{Node: 1, Session: 100, Dir: d}}); !errors.Is(r.Err, ErrLockLost) {
		t.Fatalf("a claim by the expired session: %v, want ErrLockLost", r.Err)
	}
	if r := ot.do(Command{Op: OpPutFile, Path: "d/after", File: &Inode{}}); r.Err != nil {
		t.Fatalf("unstamped create in a free directory: %v", r.Err)
	}
}

// TestOwnershipRmdirAndRecall: rmdir needs the removed directory's claim
// (a node that owns it may have names there it has not published); a
// recall claims nothing.
func TestOwnershipRmdirAndRecall(t *testing.T) {
	ot := newOwnTester(t)
	ot.do(Command{Op: OpMkdir, Path: "p"})
	ot.do(Command{Op: OpMkdir, Path: "p/c"})
	c := ot.ino("p/c")
	a := ot.claim(1, 7, c)
	if r := ot.do(Command{Op: OpDelete, Path: "p/c"}); !errors.Is(r.Err, ErrOwned) {
		t.Fatalf("rmdir of a directory another node owns: %v, want ErrOwned", r.Err)
	}
	r := ot.do(Command{Op: OpOwn, Own: &OwnCmd{Node: 2, Session: 9, Dir: c, Recall: true}})
	if r.Err != nil || r.Own.Granted || r.Own.Owner == nil || r.Own.Owner.Node != 1 {
		t.Fatalf("recall: %+v %v", r.Own, r.Err)
	}
	if r := ot.do(Command{Op: OpDelete, Path: "p/c", Own: held(1, DirEpoch{c, a.Owner.Epoch})}); r.Err != nil {
		t.Fatalf("the owner's rmdir: %v", r.Err)
	}
	if o, _ := NewReader(ot.db).DirOwner(c); o != nil {
		t.Fatalf("owner record of a removed directory: %+v", o)
	}
	if any, _ := NewReader(ot.db).OwnsDirs(1); any {
		t.Fatal("node 1 still indexed as an owner")
	}
}

// TestExclusive: an exclusive mkdir or rename fails on an existing name;
// the plain ones keep mkdir -p and replace.
func TestExclusive(t *testing.T) {
	ot := newOwnTester(t)
	if r := ot.do(Command{Op: OpMkdir, Path: "d", Exclusive: true}); r.Err != nil || !r.Created {
		t.Fatalf("first exclusive mkdir: %+v", r)
	}
	if r := ot.do(Command{Op: OpMkdir, Path: "d", Exclusive: true}); !errors.Is(r.Err, ErrExists) {
		t.Fatalf("second exclusive mkdir: %v, want ErrExists", r.Err)
	}
	if r := ot.do(Command{Op: OpMkdir, Path: "d"}); r.Err != nil {
		t.Fatalf("mkdir -p of an existing directory: %v", r.Err)
	}
	ot.do(Command{Op: OpPutFile, Path: "a", File: &Inode{}})
	ot.do(Command{Op: OpPutFile, Path: "b", File: &Inode{}})
	if r := ot.do(Command{Op: OpRename, Path: "a", DstPath: "b", Exclusive: true}); !errors.Is(r.Err, ErrExists) {
		t.Fatalf("RENAME_NOREPLACE onto a file: %v", r.Err)
	}
	if r := ot.do(Command{Op: OpRename, Path: "a", DstPath: "b"}); r.Err != nil {
		t.Fatalf("rename onto a file: %v", r.Err)
	}
}

// TestOwnFit: below log version 11 a command's claims and Exclusive are
// dropped (no directory can be owned), and OpOwn is refused.
func TestOwnFit(t *testing.T) {
	c := Fit(Command{Op: OpMkdir, Exclusive: true, Own: &OwnCmd{Node: 1}}, trashVersion)
	if c.Exclusive || c.Own != nil {
		t.Fatalf("Fit at version 10 kept %+v", c)
	}
	if err := Allowed([]Command{{Op: OpOwn, Own: &OwnCmd{Node: 1, Dir: 2}}}, trashVersion); !errors.Is(err, ErrLogVersion) {
		t.Fatalf("OpOwn at version 10: %v", err)
	}
}

// TestOwnershipMadeParents: a command holding a directory's claim that
// makes missing directories in it (a put or mkdir -p of a deeper path)
// makes its names in them too: they are the same claim's (adopted) within
// the command, not owned by someone it must recall. (The store otherwise
// recalled an inode the refused command never made: an HTTP PUT of
// uploads/a.jpg into a mounted bucket answered 404.)
func TestOwnershipMadeParents(t *testing.T) {
	ot := newOwnTester(t)
	if r := ot.do(Command{Op: OpMkdir, Path: "d"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	d := ot.ino("d")
	a := ot.claim(1, 100, d)
	mine := held(1, DirEpoch{d, a.Owner.Epoch})
	if r := ot.do(Command{Op: OpPutFile, Path: "d/new/deeper/f", File: &Inode{}, Own: mine}); r.Err != nil {
		t.Fatalf("a put making its parents in an owned directory: %v", r.Err)
	}
	if r := ot.do(Command{Op: OpMkdir, Path: "d/p/q/r", Own: mine}); r.Err != nil {
		t.Fatalf("mkdir -p in an owned directory: %v", r.Err)
	}
	for _, p := range []string{"d/new", "d/new/deeper", "d/p", "d/p/q", "d/p/q/r"} {
		o, err := NewReader(ot.db).DirOwner(ot.ino(p))
		if err != nil || o == nil || o.Node != 1 || o.Epoch != a.Owner.Epoch {
			t.Errorf("%s: owner %+v (%v), want node 1's claim, epoch %d", p, o, err, a.Owner.Epoch)
		}
	}
	// Another node's unstamped command is still refused there.
	var oe *OwnedError
	if r := ot.do(Command{Op: OpPutFile, Path: "d/new/g", File: &Inode{}}); !errors.As(r.Err, &oe) || oe.Node != 1 {
		t.Errorf("an unstamped put in an adopted directory: %v, want owned by node 1", r.Err)
	}
}
