package meta

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Directory ownership (design 0008). A directory has at most one owner: a
// node's lock session and the epoch of its claim. While it owns a
// directory, a node decides the names in it locally and publishes them
// later, each command stamped with the claims it decided under
// (Command.Own.Held). Every change of a name (a dentry added or removed)
// is checked here, in the apply, against the directory's owner:
// nameChange. A claim's epoch comes from a counter in the log and is never
// reused, so a command decided under a claim that has since moved is
// refused (ErrFenced), however late it arrives, and whatever it changes
// by then (checkHeld, before the command applies).

// Owner keys: the owner record of a directory, and the index of a node's
// directories.
const (
	pOwner    = 'O' // O dir(8) -> owner record
	pOwnerIdx = 'Q' // Q node(8) dir(8) -> empty
)

var keyOwnEpoch = []byte("mownepoch") // the last claim epoch handed out

// ownerVersion is the owner record's encoding version.
const ownerVersion = 1

// ownVersion is the payload version that carries Command.Own and
// Command.Exclusive.
const ownVersion = 11

func ownerKey(dir Ino) []byte { return binary.BigEndian.AppendUint64([]byte{pOwner}, uint64(dir)) }

func ownerIdxPrefix(node uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{pOwnerIdx}, node)
}

func ownerIdxKey(node uint64, dir Ino) []byte {
	return binary.BigEndian.AppendUint64(ownerIdxPrefix(node), uint64(dir))
}

// DirOwner is the owner record of a directory.
type DirOwner struct {
	Dir     Ino
	Node    uint64 // the owning node
	Session uint64 // its lock session epoch (design 0006): ownership ends with it
	Epoch   uint64 // the claim: never reused
	SinceNs int64  // log time of the claim
}

// DirEpoch is a directory and the epoch of the claim a proposer holds on
// it.
type DirEpoch struct {
	Dir   Ino
	Epoch uint64
}

// OwnCmd is the body of OpOwn and OpDisown, and the claims a namespace
// command was decided under.
type OwnCmd struct {
	Node    uint64 // the proposing node
	Session uint64 // its lock session epoch (OpOwn)
	LeaseNs int64  // its lock lease (OpOwn)
	Dir     Ino    // OpOwn, OpDisown: the directory
	Epoch   uint64 // OpDisown: the claim given up
	// Recall, on OpOwn, asks the owner to give the directory up without
	// claiming it.
	Recall bool
	// Continues, on OpOwn, is the session this one replaces in the same
	// process (its node gave it up by its own clock, fearing expiry): if
	// the log has not expired it, its directories pass to the new
	// session with their claims unchanged, so the changes the process
	// queued under them still apply. A restarted node does not set it:
	// its old session's directories go (their queued changes died with
	// the process, and any of them still in flight must be fenced).
	Continues uint64
	// Held are, on a namespace command, the directories the proposer owns
	// and decided the command's names in, with their claim epochs
	// (sorted by Dir). A directory with an owner accepts a name change
	// only from the command that holds its current claim.
	Held []DirEpoch
}

// held returns the epoch c holds on dir.
func (c *OwnCmd) held(dir Ino) (uint64, bool) {
	if c == nil {
		return 0, false
	}
	i, ok := slices.BinarySearchFunc(c.Held, dir, func(h DirEpoch, d Ino) int { return cmp.Compare(h.Dir, d) })
	if !ok {
		return 0, false
	}
	return c.Held[i].Epoch, true
}

// OwnResult is the outcome of OpOwn: whether the claim was granted, and
// the directory's owner (the claim granted, or the owner that refused
// it; nil when nobody owns it).
type OwnResult struct {
	Granted bool
	Owner   *DirOwner
}

// Ownership errors (Result.Err).
var (
	// ErrOwned: another node owns a directory whose names the command
	// changes (OwnedError says which); it must be recalled first.
	ErrOwned = errors.New("meta: the directory is owned by another node")
	// ErrFenced: the command was decided under a claim of a directory
	// that has since moved (or lapsed): it is refused whole.
	ErrFenced = errors.New("meta: the directory's ownership moved since the change was decided")
)

// OwnedError is the ErrOwned of a directory: which one, and its owner.
type OwnedError struct {
	Dir  Ino
	Node uint64
}

func (e *OwnedError) Error() string {
	return fmt.Sprintf("meta: directory %d is owned by node %d", e.Dir, e.Node)
}

// Is makes errors.Is(err, ErrOwned) true.
func (e *OwnedError) Is(target error) bool { return target == ErrOwned }

func encodeOwner(o *DirOwner) []byte {
	e := encoder{}
	e.byte1(ownerVersion)
	e.uvarint(o.Node)
	e.uvarint(o.Session)
	e.uvarint(o.Epoch)
	e.varint(o.SinceNs)
	return e.b
}

func decodeOwner(dir Ino, p []byte) (*DirOwner, error) {
	d := decoder{b: p}
	if v := d.byte1(); d.err == nil && v != ownerVersion {
		return nil, errCorrupt("owner record version %d", v)
	}
	o := &DirOwner{Dir: dir, Node: d.uvarint(), Session: d.uvarint(), Epoch: d.uvarint(), SinceNs: d.varint()}
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("owner of directory %d: %w", dir, err)
	}
	return o, nil
}

func appendOwnCmd(e *encoder, c *OwnCmd) {
	e.uvarint(c.Node)
	e.uvarint(c.Session)
	e.varint(c.LeaseNs)
	e.uvarint(uint64(c.Dir))
	e.uvarint(c.Epoch)
	e.bool1(c.Recall)
	e.uvarint(c.Continues)
	e.uvarint(uint64(len(c.Held)))
	for _, h := range c.Held {
		e.uvarint(uint64(h.Dir))
		e.uvarint(h.Epoch)
	}
}

func decodeOwnCmd(d *decoder) *OwnCmd {
	c := &OwnCmd{Node: d.uvarint(), Session: d.uvarint(), LeaseNs: d.varint(), Dir: Ino(d.uvarint()),
		Epoch: d.uvarint(), Recall: d.bool1(), Continues: d.uvarint()}
	n := d.count(1 << 10)
	for i := 0; i < n && d.err == nil; i++ {
		c.Held = append(c.Held, DirEpoch{Dir: Ino(d.uvarint()), Epoch: d.uvarint()})
	}
	return c
}

// --- reader ---

// DirOwner returns the owner of directory dir, or nil.
func (r *Reader) DirOwner(dir Ino) (*DirOwner, error) {
	v, ok, err := r.get(ownerKey(dir))
	if err != nil || !ok {
		return nil, err
	}
	return decodeOwner(dir, v)
}

// OwnsDirs reports whether node owns any directory.
func (r *Reader) OwnsDirs(node uint64) (bool, error) {
	p := ownerIdxPrefix(node)
	any := false
	err := r.r.Scan(p, prefixEnd(p), func(k, v []byte) bool {
		any = true
		return false
	})
	return any, err
}

// DirOwners returns up to limit owner records, by directory, after the
// directory after (0: from the start).
func (r *Reader) DirOwners(after Ino, limit int) ([]DirOwner, error) {
	var out []DirOwner
	var derr error
	lower := ownerKey(after + 1)
	err := r.r.Scan(lower, []byte{pOwner + 1}, func(k, v []byte) bool {
		if len(k) != 9 {
			derr = errCorrupt("owner key of %d bytes", len(k))
			return false
		}
		o, err := decodeOwner(Ino(binary.BigEndian.Uint64(k[1:])), v)
		if err != nil {
			derr = err
			return false
		}
		out = append(out, *o)
		return len(out) < limit
	})
	return out, cmp.Or(err, derr)
}

// NodeDirCount is how many directories a node owns according to the
// owner index.
type NodeDirCount struct {
	Node uint64
	Dirs int
	// More: the count stopped at the limit; the node owns more.
	More bool
}

// DirOwnerCounts counts, for every node that owns a directory, its
// directories by the owner index (Q node dir), by node. Each node's count
// stops after limit directories (More): a status view stays cheap however
// many directories an untar made. It reads at most limit+1 keys per node.
func (r *Reader) DirOwnerCounts(limit int) ([]NodeDirCount, error) {
	var out []NodeDirCount
	lower, upper := []byte{pOwnerIdx}, []byte{pOwnerIdx + 1}
	for {
		var c *NodeDirCount
		var derr error
		err := r.r.Scan(lower, upper, func(k, v []byte) bool {
			if len(k) != 17 {
				derr = errCorrupt("owner index key of %d bytes", len(k))
				return false
			}
			node := binary.BigEndian.Uint64(k[1:9])
			switch {
			case c == nil:
				c = &NodeDirCount{Node: node}
			case node != c.Node:
				return false // the next node's: the next scan starts there
			}
			if c.Dirs == limit {
				c.More = true
				return false
			}
			c.Dirs++
			return true
		})
		if err = cmp.Or(err, derr); err != nil || c == nil {
			return out, err
		}
		out = append(out, *c)
		lower = prefixEnd(ownerIdxPrefix(c.Node))
		if lower == nil { // node 2^64-1: nothing after it
			return out, nil
		}
	}
}

// indexedDirs lists the directories the owner index files under node.
func (r *Reader) indexedDirs(node uint64) ([]Ino, error) {
	p := ownerIdxPrefix(node)
	var dirs []Ino
	var derr error
	err := r.r.Scan(p, prefixEnd(p), func(k, v []byte) bool {
		if len(k) != 17 {
			derr = errCorrupt("owner index key of %d bytes", len(k))
			return false
		}
		dirs = append(dirs, Ino(binary.BigEndian.Uint64(k[9:])))
		return true
	})
	return dirs, cmp.Or(err, derr)
}

// --- apply ---

// nameChange checks that the command may add or remove a name in
// directory dir: dir has no owner and the command holds no claim on it,
// or the command holds dir's current claim. It returns the owner record
// when the command holds it (nil: nobody owns dir).
func (a *applier) nameChange(dir Ino) (*DirOwner, error) {
	o, err := a.r.DirOwner(dir)
	if err != nil {
		return nil, err
	}
	c := a.cmd.Own
	epoch, held := c.held(dir)
	if e, ok := a.made[dir]; ok {
		epoch, held = e, true // made by this command under a claim it holds (adopt)
	}
	switch {
	case o == nil && !held:
		return nil, nil
	case o != nil && held && o.Node == c.Node && o.Epoch == epoch:
		return o, nil
	case held && a.st.unfenced:
		return nil, nil // ApplyOptions.TestingUnfenced: the sabotage of internal/sim
	case held:
		return nil, fmt.Errorf("directory %d: the claim of node %d, epoch %d: %w", dir, c.Node, epoch, ErrFenced)
	}
	return nil, &OwnedError{Dir: dir, Node: o.Node}
}

// checkHeld refuses, whole, a command stamped with a directory claim that
// is no longer that directory's (ErrFenced): it was decided under a claim
// that has moved, whatever it changes by the time it applies. nameChange
// alone would let such a command through when it adds no name: a create
// decided under a moved claim, of a name another node made since under
// its own claim, would replace that node's file (and both creates would
// have succeeded); a mkdir -p of a directory made since would succeed.
func (a *applier) checkHeld() error {
	c := a.cmd.Own
	if c == nil || len(c.Held) == 0 || a.cmd.Op == OpOwn || a.cmd.Op == OpDisown || a.st.unfenced {
		return nil
	}
	for _, h := range c.Held {
		o, err := a.r.DirOwner(h.Dir)
		if err != nil {
			return err
		}
		if o == nil || o.Node != c.Node || o.Epoch != h.Epoch {
			return fmt.Errorf("directory %d: the claim of node %d, epoch %d: %w", h.Dir, c.Node, h.Epoch, ErrFenced)
		}
	}
	return nil
}

// adopt makes dir, just made in a directory whose claim the command holds
// (parent, its owner record), the same claim's: a node that owns a
// directory owns what it makes in it.
func (a *applier) adopt(dir Ino, parent *DirOwner) {
	if parent == nil {
		return
	}
	a.setOwner(&DirOwner{Dir: dir, Node: parent.Node, Session: parent.Session, Epoch: parent.Epoch, SinceNs: a.now})
	if a.made == nil {
		a.made = map[Ino]uint64{}
	}
	a.made[dir] = parent.Epoch
}

func (a *applier) setOwner(o *DirOwner) {
	a.t.set(ownerKey(o.Dir), encodeOwner(o))
	a.t.set(ownerIdxKey(o.Node, o.Dir), nil)
}

// dropOwner removes dir's owner record (the directory is gone).
func (a *applier) dropOwner(dir Ino) error {
	o, err := a.r.DirOwner(dir)
	if err != nil || o == nil {
		return err
	}
	a.t.del(ownerKey(dir))
	a.t.del(ownerIdxKey(o.Node, dir))
	return nil
}

// dropSessionDirs removes the owner records of node's session epoch (an
// expired or replaced session), returning the directories.
func (a *applier) dropSessionDirs(node, session uint64) ([]Ino, error) {
	dirs, err := a.r.indexedDirs(node)
	if err != nil {
		return nil, err
	}
	var dropped []Ino
	for _, dir := range dirs {
		o, err := a.r.DirOwner(dir)
		if err != nil {
			return nil, err
		}
		if o != nil && o.Node == node && o.Session != session {
			continue
		}
		a.t.del(ownerIdxKey(node, dir))
		if o != nil && o.Node == node {
			a.t.del(ownerKey(dir))
			dropped = append(dropped, dir)
		}
	}
	return dropped, nil
}

func (a *applier) checkOwnCmd() (*OwnCmd, error) {
	c := a.cmd.Own
	if c == nil || c.Node == 0 || c.Dir == 0 {
		return nil, fmt.Errorf("%w: %v needs Own with a node and a directory", ErrInvalid, a.cmd.Op)
	}
	return c, nil
}

// own applies OpOwn: a claim of c.Dir by c.Node's session (granted when
// nobody, or that session, owns it), or a recall (Recall: nothing is
// claimed). A claim or recall the owner refuses is not an error: the
// result names the owner, whose node gives the directory up when it
// applies the entry.
func (a *applier) own() (Result, error) {
	if c := a.cmd.Own; c != nil && c.Node != 0 && c.Dir == 0 && c.Continues != 0 && !c.Recall {
		// A session continued, no claim.
		if c.Continues < c.Session {
			if err := a.continueSession(c.Node, c.Continues, c.Session); err != nil {
				return Result{}, err
			}
		}
		s, grants, err := a.lockSession(c.Node, c.Session, c.LeaseNs)
		if err != nil {
			return Result{}, err
		}
		a.putSession(s)
		res := Result{Own: &OwnResult{}}
		if len(grants) > 0 {
			res.Lock = &LockResult{Granted: true, Grants: grants}
		}
		return res, nil
	}
	c, err := a.checkOwnCmd()
	if err != nil {
		return Result{}, err
	}
	n, err := a.r.Inode(c.Dir)
	if err != nil {
		return Result{}, err
	}
	if n.Type != TypeDir {
		return Result{}, fmt.Errorf("own inode %d: %w", c.Dir, ErrNotDir)
	}
	var res Result
	if !c.Recall && c.Continues != 0 && c.Continues < c.Session {
		if err := a.continueSession(c.Node, c.Continues, c.Session); err != nil {
			return Result{}, err
		}
	}
	if !c.Recall {
		s, grants, err := a.lockSession(c.Node, c.Session, c.LeaseNs) // apply_lock.go
		if err != nil {
			return Result{}, err
		}
		a.putSession(s)
		if len(grants) > 0 {
			res.Lock = &LockResult{Granted: true, Grants: grants}
		}
	}
	o, err := a.r.DirOwner(c.Dir)
	if err != nil {
		return Result{}, err
	}
	switch {
	case o == nil && c.Recall:
		res.Own = &OwnResult{}
	case o == nil:
		epoch, err := a.r.getU64(keyOwnEpoch)
		if err != nil {
			return Result{}, err
		}
		epoch++
		a.t.set(keyOwnEpoch, u64(epoch))
		o = &DirOwner{Dir: c.Dir, Node: c.Node, Session: c.Session, Epoch: epoch, SinceNs: a.now}
		a.setOwner(o)
		res.Own = &OwnResult{Granted: true, Owner: o}
	case o.Node == c.Node && o.Session == c.Session && !c.Recall:
		res.Own = &OwnResult{Granted: true, Owner: o}
	default:
		res.Own = &OwnResult{Owner: o}
	}
	return res, nil
}

// continueSession passes the directories of node's session from to
// session to, claims unchanged, when from is the node's live session in
// the log (not expired, not replaced).
func (a *applier) continueSession(node, from, to uint64) error {
	s, err := a.r.LockSession(node)
	if err != nil || s == nil || s.Epoch != from || s.Expired {
		return err
	}
	dirs, err := a.r.indexedDirs(node)
	if err != nil {
		return err
	}
	for _, dir := range dirs {
		o, err := a.r.DirOwner(dir)
		if err != nil {
			return err
		}
		if o != nil && o.Node == node && o.Session == from {
			o.Session = to
			a.setOwner(o)
		}
	}
	return nil
}

// disown applies OpDisown: the owner gives c.Dir up (ErrPrecondition if
// that claim is no longer the directory's).
func (a *applier) disown() (Result, error) {
	c, err := a.checkOwnCmd()
	if err != nil {
		return Result{}, err
	}
	o, err := a.r.DirOwner(c.Dir)
	if err != nil {
		return Result{}, err
	}
	if o == nil || o.Node != c.Node || o.Epoch != c.Epoch {
		return Result{}, fmt.Errorf("disown directory %d: the claim of node %d epoch %d is not current: %w", c.Dir, c.Node, c.Epoch, ErrPrecondition)
	}
	a.t.del(ownerKey(c.Dir))
	a.t.del(ownerIdxKey(c.Node, c.Dir))
	return Result{Own: &OwnResult{Owner: o}}, nil
}
