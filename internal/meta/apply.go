package meta

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cairn-fs/cairn/internal/kv"
)

// ModeExplicit, set in a command's File.Mode (OpPutFile, OpMkdir), says
// that the mode is the proposer's even when it is 0 (a mount's chmod 0 or
// create with mode 0); without it a 0 takes the default. It is never
// stored.
const ModeExplicit = 1 << 31

// explicitMode is mode without ModeExplicit, or def when mode is 0 and
// not explicit.
func explicitMode(mode, def uint32) uint32 {
	if mode&ModeExplicit != 0 {
		return mode &^ ModeExplicit
	}
	if mode == 0 {
		return def
	}
	return mode
}

// Default modes when a command leaves File.Mode at 0.
const (
	defaultFileMode    = 0o644
	defaultDirMode     = 0o755
	defaultSymlinkMode = 0o777
)

// kvFailure marks an error of the KV layer: Apply stops and returns it
// instead of recording it in a Result.
type kvFailure struct{ err error }

func (e *kvFailure) Error() string { return "meta: kv: " + e.err.Error() }
func (e *kvFailure) Unwrap() error { return e.err }

// Apply applies cmds, in order, as log entry index onto b (which it does
// not commit), and records index as the applied index in the same batch.
// It returns one Result per command. A command that fails (Result.Err)
// changes nothing. err != nil only for a KV failure or a corrupt stored
// value; the batch must then be discarded. Apply is deterministic: it reads
// nothing but cmds and b. Not safe for concurrent use of the same b.
func Apply(b kv.Batch, index uint64, cmds []Command) ([]Result, error) {
	return ApplyOptions{}.Apply(b, index, cmds)
}

// ApplyOptions are the settings of an Apply. The zero value is the only
// one a node uses.
type ApplyOptions struct {
	// TestingUnfenced lets a command stamped with a directory claim that
	// is no longer current apply (no ErrFenced; owners.go). Only
	// internal/sim sets it, through consensus.RaftConfig.TestingUnfenced,
	// to show that its fencing invariant fails without the check; never
	// set it elsewhere.
	TestingUnfenced bool
	// TestingLockUnsafe grants every lock request, conflicting or not.
	// Only internal/sim sets it, through
	// consensus.RaftConfig.TestingLockUnsafe, to show that its lock
	// safety invariant fails without the conflict check; never set it
	// elsewhere.
	TestingLockUnsafe bool
}

// Apply is the package's Apply with these options.
func (o ApplyOptions) Apply(b kv.Batch, index uint64, cmds []Command) ([]Result, error) {
	if err := ensureRoot(b); err != nil {
		return nil, err
	}
	results := make([]Result, len(cmds))
	st := applyState{unfenced: o.TestingUnfenced, lockUnsafe: o.TestingLockUnsafe}
	for i := range cmds {
		t := &txn{b: b, w: map[string][]byte{}}
		a := &applier{t: t, r: NewReader(t), st: &st, index: index, cmd: &cmds[i], now: cmds[i].TimeNs}
		if cmds[i].Op == OpReap || cmds[i].Op == OpReapOrphans {
			st.reapedKnown = false // a reap writes and prunes markers
		}
		if id, err := a.snapshotFor(); err != nil { // apply_snapshot.go
			return nil, fmt.Errorf("apply entry %d command %d: %w", index, i, err)
		} else if id != 0 {
			t.cow = &cow{snap: id}
		}
		res, err := a.apply()
		if err == nil {
			err = a.finishCow()
		}
		if err != nil {
			var kf *kvFailure
			if errors.As(err, &kf) || errors.Is(err, ErrCorrupt) {
				return nil, fmt.Errorf("apply entry %d command %d: %w", index, i, err)
			}
			results[i] = Result{Err: err}
			continue
		}
		if err := t.flush(); err != nil {
			return nil, fmt.Errorf("apply entry %d command %d: %w", index, i, err)
		}
		results[i] = res
	}
	if err := b.Set(keyApplied, u64(index)); err != nil {
		return nil, fmt.Errorf("apply entry %d: %w", index, err)
	}
	return results, nil
}

// ensureRoot creates the root directory on the first Apply.
func ensureRoot(b kv.Batch) error {
	if _, err := b.Get(inodeKey(RootIno)); err == nil {
		return nil
	} else if !errors.Is(err, kv.ErrNotFound) {
		return fmt.Errorf("apply: read root: %w", err)
	}
	root := &Inode{Ino: RootIno, Type: TypeDir, Mode: defaultDirMode, Nlink: 2}
	if err := b.Set(inodeKey(RootIno), EncodeInode(root)); err != nil {
		return fmt.Errorf("apply: init root: %w", err)
	}
	if err := b.Set(keyNextIno, u64(uint64(RootIno)+1)); err != nil {
		return fmt.Errorf("apply: init root: %w", err)
	}
	return nil
}

// applyState is what one Apply call learns once for all its commands.
type applyState struct {
	// reapedKnown: anyReaped says whether a reaped marker (x key) exists.
	// Only OpReap and OpReapOrphans write or delete markers; Apply
	// forgets it before one.
	reapedKnown, anyReaped bool
	// snapKnown caches each bucket's newest snapshot id (0: none) for
	// copy on write; a snapshot command forgets it.
	snapKnown map[string]uint64
	// unfenced: ApplyOptions.TestingUnfenced.
	unfenced bool
	// lockUnsafe: ApplyOptions.TestingLockUnsafe.
	lockUnsafe bool
	// fenceKnown: anyFence says whether a bucket fence exists (fence.go);
	// OpFenceBucket forgets it.
	fenceKnown, anyFence bool
}

// applier applies one command through a txn.
type applier struct {
	t     *txn
	r     *Reader
	st    *applyState
	index uint64
	cmd   *Command
	now   int64
	// made are the directories this command made under a claim it holds,
	// with the claim's epoch: its later name changes in them pass
	// (owners.go).
	made map[Ino]uint64
}

func (a *applier) apply() (Result, error) {
	if err := a.checkFence(); err != nil { // fence.go
		return Result{}, err
	}
	if err := a.checkHeld(); err != nil { // owners.go
		return Result{}, err
	}
	if err := a.checkRight(); err != nil { // lockrights.go
		return Result{}, err
	}
	switch a.cmd.Op {
	case OpCreateBucket:
		return a.createBucket()
	case OpUpdateBucket:
		return a.updateBucket()
	case OpDeleteBucket:
		return a.deleteBucket()
	case OpPutFile:
		return a.putFile()
	case OpMkdir:
		return a.mkdirP()
	case OpDelete:
		return a.delete()
	case OpRename:
		return a.rename()
	case OpReap:
		return a.reap()
	case OpSetAttr:
		return a.setAttr()
	case OpSetNode:
		return a.setNode()
	case OpRemoveNode:
		return a.removeNode()
	case OpReplicated:
		return a.replicated()
	case OpLink:
		return a.link()
	case OpReserveInos:
		return a.reserveInos()
	case OpPutRecord:
		return a.putRecord()
	case OpDeleteRecord:
		return a.deleteRecord()
	case OpReapOrphans:
		return a.reapOrphans()
	case OpLock:
		return a.lock()
	case OpLockCancel:
		return a.lockCancel()
	case OpLockSession:
		return a.lockRenew()
	case OpLockExpire:
		return a.lockExpire()
	case OpSetLogVersion:
		return a.setLogVersion()
	case OpTrashRestore:
		return a.trashRestore()
	case OpTrashPurge:
		return a.trashPurge()
	case OpSnapshotCreate:
		return a.snapshotCreate()
	case OpSnapshotDelete:
		return a.snapshotDelete()
	case OpSnapshotDrain:
		return a.snapshotDrain()
	case OpTrashDrop:
		return a.trashDrop()
	case OpVersionDelete:
		return a.versionDelete()
	case OpOwn:
		return a.own() // owners.go
	case OpDisown:
		return a.disown()
	case OpLockReturn:
		return a.lockReturn() // lockrights.go
	case OpFenceBucket:
		return a.fenceBucket() // fence.go
	default:
		return Result{}, fmt.Errorf("%w: unknown op %d", ErrInvalid, a.cmd.Op)
	}
}

func (a *applier) changed(path string) string { return a.cmd.BucketName + "/" + path }

// --- small state helpers ---

func (a *applier) putInode(n *Inode) { a.t.set(inodeKey(n.Ino), EncodeInode(n)) }

// maxReserve bounds one OpReserveInos.
const maxReserve = 1 << 16

// reserveInos hands out Count inode numbers, never allocated otherwise,
// for the proposer's new files (a mount creates files before they are
// committed and needs their numbers at once).
func (a *applier) reserveInos() (Result, error) {
	if a.cmd.Count < 1 || a.cmd.Count > maxReserve {
		return Result{}, fmt.Errorf("%w: reserve %d inode numbers (1..%d)", ErrInvalid, a.cmd.Count, maxReserve)
	}
	next, err := a.r.getU64(keyNextIno)
	if err != nil {
		return Result{}, err
	}
	a.t.set(keyNextIno, u64(next+a.cmd.Count))
	return Result{Inode: &Inode{Ino: Ino(next)}}, nil
}

// newIno is the inode number of a file or directory the command creates:
// want, a number the proposer reserved, when it was handed out and is
// free, else a new one.
func (a *applier) newIno(want Ino) (Ino, error) {
	if want > RootIno {
		next, err := a.r.getU64(keyNextIno)
		if err != nil {
			return 0, err
		}
		if uint64(want) < next {
			if _, err := a.r.Inode(want); errors.Is(err, ErrNotFound) {
				return want, nil
			}
		}
	}
	return a.allocIno()
}

func (a *applier) allocIno() (Ino, error) {
	next, err := a.r.getU64(keyNextIno)
	if err != nil {
		return 0, err
	}
	a.t.set(keyNextIno, u64(next+1))
	return Ino(next), nil
}

func (a *applier) addCounts(files, dirs, nbytes int64) error {
	c, err := a.r.counts()
	if err != nil {
		return err
	}
	c.files += files
	c.dirs += dirs
	c.bytes += nbytes
	v := binary.BigEndian.AppendUint64(nil, uint64(c.files))
	v = binary.BigEndian.AppendUint64(v, uint64(c.dirs))
	v = binary.BigEndian.AppendUint64(v, uint64(c.bytes))
	a.t.set(keyCounts, v)
	return nil
}
