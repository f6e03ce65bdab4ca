package meta

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cairn-fs/cairn/internal/kv"
)

// The cluster's log version (issue 22, docs/operations.md "Upgrades").
//
// A log entry's payload carries a version byte (EncodeCommands). A binary
// reads payload versions 2 to LogVersionMax; a newer payload stops its log
// (ErrUnsupported), because skipping an entry would fork its state from the
// other nodes'. So that a cluster upgraded one node at a time never makes
// an old node meet such an entry, the cluster keeps its active log version
// in the log: no node proposes a payload above it (Allowed). It starts at
// LogVersionBaseline, and moves up only by OpSetLogVersion, which a node
// proposes once every member reports a binary that reads the new version;
// the command names those members, and applies only if the cluster map
// still holds exactly them (a node that joined since was not asked).
const (
	// LogVersionBaseline is the active version of a cluster whose log
	// never recorded one: the payload version every binary since the
	// version-7 commands (records, xattrs) reads, and the highest that
	// binaries from before the cluster version (issue 22) read.
	LogVersionBaseline = lockFreeVersion
	// LogVersionMax is the newest payload version this binary reads and
	// writes: version 8 adds lock commands, 9 OpSetLogVersion, 10 the
	// trash and commands' origins, 11 directory ownership (Command.Own,
	// Command.Exclusive), 12 special files (FIFOs, sockets, devices), 13
	// lock rights (Command.Right, OpLockReturn), 14 bucket fences
	// (OpFenceBucket), 15 client nodes (NodeClient).
	LogVersionMax = commandVersion
	// upgradeVersion is the payload version that carries OpSetLogVersion.
	upgradeVersion = 9
	// trashVersion carries commands' origins, the trash commands and
	// bucket bodies of version 6 (trash retention).
	trashVersion = 10
	// specialVersion carries special files (TypeFIFO to TypeBlockDev): an
	// older binary refuses their type, so no command makes one before
	// every member reads them.
	specialVersion = 12
)

// commandBucketVersion is the bucket body version a command payload of
// the given version carries.
func commandBucketVersion(payload byte) byte {
	switch {
	case payload >= trashVersion:
		return 6
	case payload >= 7:
		return 5
	case payload >= 4:
		return 4
	}
	return payload
}

// Fit drops what cmd carries only for information and the active log
// version cannot hold (a command's origin, before version 10), so that
// ordinary writes go on during a rolling upgrade. What a command needs
// stays, and Allowed refuses it.
func Fit(cmd Command, active byte) Command {
	if active < trashVersion {
		cmd.Origin = nil
	}
	if active < ownVersion && cmd.Op != OpOwn && cmd.Op != OpDisown {
		// No directory can be owned before version 11, so a claim is
		// void, and an exclusive mkdir or rename is the old one.
		cmd.Own, cmd.Exclusive, cmd.NoParents = nil, false, false
	}
	if active < lockRightVersion && cmd.Op != OpLockReturn {
		// No lock right exists before version 13: a request asks for none
		// and a write is made under none.
		cmd.Right = nil
	}
	return cmd
}

// LogUpgrade is the body of OpSetLogVersion.
type LogUpgrade struct {
	To byte // the new active log version
	// Members are the IDs of the cluster map's nodes the proposer found
	// running a binary that reads To, sorted.
	Members []uint64
}

// ErrUnsupported marks a log entry this binary cannot decode: a payload
// version newer than it reads. The node stops applying there.
var ErrUnsupported = errors.New("meta: log entry encoded by a newer version")

// ErrLogVersion is returned for a proposal that needs a newer log version
// than the cluster's active one (a member still runs an older binary).
var ErrLogVersion = errors.New("meta: the cluster's log version does not allow this command yet")

var keyLogVersion = []byte("mlogversion")

// InitLogVersion sets the active log version of a new cluster's store
// (bootstrapped by members that all run this binary) to v, or to
// LogVersionMax for 0.
func InitLogVersion(b kv.Batch, v byte) error {
	if v == 0 {
		v = LogVersionMax
	}
	if v < LogVersionBaseline || v > LogVersionMax {
		return fmt.Errorf("%w: log version %d", ErrInvalid, v)
	}
	return b.Set(keyLogVersion, []byte{v})
}

// LogVersion returns the cluster's active log version.
func (r *Reader) LogVersion() (byte, error) {
	v, ok, err := r.get(keyLogVersion)
	if err != nil || !ok {
		return LogVersionBaseline, err
	}
	if len(v) != 1 {
		return 0, errCorrupt("log version value of %d bytes", len(v))
	}
	return v[0], nil
}

// payloadVersion is the version EncodeCommands writes for cmds: the lowest
// that holds them, so that a payload of ordinary commands reads on every
// binary since version 7.
func payloadVersion(cmds []Command) byte {
	v := byte(lockFreeVersion)
	for i := range cmds {
		switch {
		case cmds[i].Upgrade != nil:
			v = max(v, upgradeVersion, cmds[i].Upgrade.To)
		case cmds[i].Lock != nil:
			v = max(v, 8)
		}
		if c := &cmds[i]; c.Own != nil || c.Exclusive || c.NoParents {
			v = max(v, ownVersion)
		}
		if c := &cmds[i]; c.File != nil && c.File.Type.Special() {
			v = max(v, specialVersion)
		}
		if c := &cmds[i]; c.Right != nil || c.Op == OpLockReturn {
			v = max(v, lockRightVersion)
		}
		if c := &cmds[i]; c.Op == OpFenceBucket || (c.Record != nil && (c.Record.Kind == RecordGroup || c.Record.Kind == RecordMove)) {
			v = max(v, fenceVersion)
		}
		if c := &cmds[i]; c.Node != nil && c.Node.State == NodeClient {
			v = max(v, clientVersion)
		}
		if c := &cmds[i]; c.Origin != nil || c.Trash != nil || c.Snap != nil || (c.Bucket != nil && bucketBodyVersion(c.Bucket) >= 6) ||
			(c.Record != nil && c.Record.Kind == RecordSnapSchedule) {
			v = max(v, trashVersion)
		}
	}
	return v
}

// Allowed checks that a payload of cmds may be proposed in a cluster whose
// active log version is active. A payload of OpSetLogVersion commands alone
// is allowed up to its own version: its proposer asked every member.
func Allowed(cmds []Command, active byte) error {
	v := payloadVersion(cmds)
	if v <= active {
		return nil
	}
	if v > LogVersionMax {
		return fmt.Errorf("%w: log version %d is newer than this binary's %d", ErrLogVersion, v, LogVersionMax)
	}
	upgrades := true
	for i := range cmds {
		upgrades = upgrades && cmds[i].Op == OpSetLogVersion
	}
	if upgrades {
		return nil
	}
	what := "this command"
	for i := range cmds {
		switch {
		case cmds[i].Lock != nil:
			what = "a cluster-wide lock"
		case cmds[i].Trash != nil || cmds[i].Bucket != nil:
			what = "the trash"
		case cmds[i].Snap != nil:
			what = "a snapshot"
		case cmds[i].Own != nil:
			what = "directory ownership"
		case cmds[i].Op == OpFenceBucket:
			what = "a bucket fence"
		case cmds[i].Node != nil && cmds[i].Node.State == NodeClient:
			what = "a client node"
		}
	}
	return fmt.Errorf("%w: %s needs log version %d, the cluster runs %d until every node runs a binary that reads %d (cairn status shows each node's version)",
		ErrLogVersion, what, v, active, v)
}

func appendUpgrade(e *encoder, u *LogUpgrade) {
	e.byte1(u.To)
	e.uvarint(uint64(len(u.Members)))
	for _, id := range u.Members {
		e.uvarint(id)
	}
}

func decodeUpgrade(d *decoder) *LogUpgrade {
	u := &LogUpgrade{To: d.byte1()}
	n := d.count(1 << 16)
	for i := 0; i < n && d.err == nil; i++ {
		u.Members = append(u.Members, d.uvarint())
	}
	return u
}

// setLogVersion applies OpSetLogVersion: the version moves up only if the
// cluster map holds exactly the members the proposer asked. Asking for the
// current version or a lower one changes nothing and succeeds.
func (a *applier) setLogVersion() (Result, error) {
	u := a.cmd.Upgrade
	if u == nil {
		return Result{}, fmt.Errorf("%w: OpSetLogVersion without Upgrade", ErrInvalid)
	}
	if u.To > LogVersionMax || u.To < LogVersionBaseline {
		return Result{}, fmt.Errorf("%w: log version %d", ErrInvalid, u.To)
	}
	cur, err := a.r.LogVersion()
	if err != nil {
		return Result{}, err
	}
	if u.To <= cur {
		return Result{}, nil
	}
	nodes, err := a.r.Nodes()
	if err != nil {
		return Result{}, err
	}
	ids := make([]uint64, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID
	}
	slices.Sort(ids)
	if !slices.Equal(ids, u.Members) {
		return Result{}, fmt.Errorf("%w: the cluster map changed since the members' versions were checked (now %v, checked %v)",
			ErrPrecondition, ids, u.Members)
	}
	a.t.set(keyLogVersion, []byte{u.To})
	return Result{}, nil
}
