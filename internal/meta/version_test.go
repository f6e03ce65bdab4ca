package meta

import (
	"errors"
	"reflect"
	"testing"

	"github.com/cairn-fs/cairn/internal/kv"
)

func TestPayloadVersions(t *testing.T) {
	plain := Command{Op: OpMkdir, BucketName: "b", Path: "d"}
	lock := Command{Op: OpLockSession, Lock: &LockCmd{LeaseNs: 5}}
	up := Command{Op: OpSetLogVersion, Upgrade: &LogUpgrade{To: 9, Members: []uint64{1, 2, 3}}}
	for _, tc := range []struct {
		cmds []Command
		want byte
	}{
		{[]Command{plain}, 7},
		{[]Command{plain, lock}, 8},
		{[]Command{up}, 9},
		{[]Command{lock, up}, 9},
		{[]Command{{Op: OpPutFile, BucketName: "b", Path: "f", File: &Inode{Type: TypeSymlink, Target: "x", Size: 1}}}, 7},
		{[]Command{plain, {Op: OpPutFile, BucketName: "b", Path: "p", File: &Inode{Type: TypeFIFO}}}, specialVersion},
		{[]Command{{Op: OpPutFile, BucketName: "b", Path: "d", File: &Inode{Type: TypeCharDev, Rdev: 0x0103}}}, specialVersion},
	} {
		p, err := EncodeCommands(tc.cmds)
		if err != nil {
			t.Fatal(err)
		}
		if p[0] != tc.want {
			t.Errorf("payload of %d commands: version %d, want %d", len(tc.cmds), p[0], tc.want)
		}
		got, err := DecodeCommands(p)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got[len(got)-1].Upgrade, tc.cmds[len(tc.cmds)-1].Upgrade) {
			t.Errorf("upgrade round trip: %+v", got[len(got)-1].Upgrade)
		}
	}
	// A payload from a newer binary is unsupported, not corrupt: the log
	// stops there and says to upgrade.
	p, _ := EncodeCommands([]Command{plain})
	p[0] = LogVersionMax + 1
	_, err := DecodeCommands(p)
	if !errors.Is(err, ErrUnsupported) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("newer payload: %v", err)
	}
	if _, err := EncodeCommands([]Command{{Op: OpSetLogVersion, Upgrade: &LogUpgrade{To: LogVersionMax + 1}}}); err == nil {
		t.Fatal("encoded a log version this binary does not know")
	}
}

func TestAllowed(t *testing.T) {
	plain := Command{Op: OpMkdir}
	lock := Command{Op: OpLock, Lock: &LockCmd{}}
	up := Command{Op: OpSetLogVersion, Upgrade: &LogUpgrade{To: 9}}
	for _, tc := range []struct {
		cmds   []Command
		active byte
		ok     bool
	}{
		{[]Command{plain}, LogVersionBaseline, true},
		{[]Command{lock}, LogVersionBaseline, false},
		{[]Command{plain, lock}, 8, true},
		{[]Command{up}, LogVersionBaseline, true},         // its proposer asked every member
		{[]Command{up, plain}, LogVersionBaseline, false}, // never smuggles others along
		{[]Command{plain}, 9, true},
		// An older binary refuses a special file's type: none is made
		// before every member reads them.
		{[]Command{{Op: OpPutFile, File: &Inode{Type: TypeFIFO}}}, ownVersion, false},
		{[]Command{{Op: OpPutFile, File: &Inode{Type: TypeSocket}}}, specialVersion, true},
	} {
		err := Allowed(tc.cmds, tc.active)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrLogVersion)) {
			t.Errorf("Allowed(%v at %d) = %v", tc.cmds, tc.active, err)
		}
	}
}

func TestSetLogVersion(t *testing.T) {
	db := kv.NewMem()
	r := NewReader(db)
	if v, err := r.LogVersion(); err != nil || v != LogVersionBaseline {
		t.Fatalf("fresh log version %d, %v", v, err)
	}
	for i, id := range []uint64{3, 1} {
		if res := applyOne(t, db, uint64(1+i), Command{Op: OpSetNode, Node: &Node{ID: id, URL: "http://x"}}); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	set := func(idx uint64, to byte, members ...uint64) error {
		return applyOne(t, db, idx, Command{Op: OpSetLogVersion, Upgrade: &LogUpgrade{To: to, Members: members}}).Err
	}
	// A member set other than the map's (a node joined since the check)
	// changes nothing.
	if err := set(3, 9, 1); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("upgrade checked without node 3: %v", err)
	}
	if v, _ := r.LogVersion(); v != LogVersionBaseline {
		t.Fatalf("moved to %d on a stale member set", v)
	}
	if err := set(4, 9, 1, 3); err != nil {
		t.Fatal(err)
	}
	if v, _ := r.LogVersion(); v != 9 {
		t.Fatalf("log version %d, want 9", v)
	}
	// Never down: a lower version is a no-op.
	if err := set(5, 8, 1, 3); err != nil {
		t.Fatal(err)
	}
	if v, _ := r.LogVersion(); v != 9 {
		t.Fatalf("log version went down to %d", v)
	}
	if err := set(6, LogVersionMax+1, 1, 3); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown version: %v", err)
	}
	if err := applyOne(t, db, 7, Command{Op: OpSetLogVersion}).Err; !errors.Is(err, ErrInvalid) {
		t.Fatalf("no body: %v", err)
	}
}
