package placement

import (
	"errors"
	"fmt"
)

// Policy is a bucket's replication policy for the write of one blob.
type Policy struct {
	// Replicas is R: a count >= 1, or Mirror (every data node). It is
	// capped at the number of data nodes (Live or Dead) in the map: a
	// cluster of one or two data nodes works with the default R of 3.
	Replicas int
	// WriteQuorum is W, the durable copies a write waits for: 0 means a
	// majority of the capped R; larger than the capped R means all of it.
	WriteQuorum int
	// Strict refuses a write that cannot reach W copies. Without it (the
	// default) a write with fewer than W reachable targets still succeeds
	// once every target it could reach holds a durable copy (at least
	// one), and is under-replicated until repair restores R.
	Strict bool
}

// Wanted returns the copies a blob should have under p in m: R capped at
// the number of data nodes (every data node for Mirror). It is 0 when m
// has no data node. It panics on an R that is neither Mirror nor >= 1, as
// Replicas does.
func (p Policy) Wanted(m *Map) int { return count(p.Replicas, m.nHome) }

// Quorum returns W under p in m: WriteQuorum capped at Wanted, or a
// majority of Wanted when WriteQuorum is 0. It is 0 when m has no data
// node.
func (p Policy) Quorum(m *Map) int {
	want := p.Wanted(m)
	if p.WriteQuorum > 0 {
		return min(p.WriteQuorum, want)
	}
	if want == 0 {
		return 0
	}
	return want/2 + 1
}

// Copies is the outcome of one blob's write as replication decided it.
type Copies struct {
	// Made is how many copies the write made or is still making when it
	// was acknowledged: the targets it was sent to, less those that
	// already failed. (With W < R the last copies are still in flight
	// when the write returns; they are counted.)
	Made int
	// Wanted is Policy.Wanted: R capped at the data nodes.
	Wanted int
}

// Under reports whether the write left the blob with fewer copies than
// wanted: it is under-replicated until repair makes the missing ones.
func (c Copies) Under() bool { return c.Made < c.Wanted }

// Errors of a replicated write or read under a Policy. Placement does no
// I/O and returns none of them: replication (internal/replica) does, and
// the store maps them to its own kinds. They live here, beside Policy and
// Copies, so that the store and replication share them without importing
// each other. The messages name replication, which returns them.
var (
	// ErrNoQuorum: fewer than W replicas could take the blob.
	ErrNoQuorum = errors.New("replica: write quorum not reached")
	// ErrUnavailable: no replica could serve the read.
	ErrUnavailable = errors.New("replica: no replica available")
)

// QuorumError is the failure of a write that could not make the copies its
// policy requires. errors.Is(err, ErrNoQuorum) holds.
type QuorumError struct {
	// Reachable is how many copies could be made: the live targets less
	// those that failed (0 when no data node is live).
	Reachable int
	// Required is W.
	Required int
	// Strict: the bucket asked for a strict quorum (otherwise the write
	// failed because no copy at all could be made).
	Strict bool
	// Err joins the failures of the targets, if any.
	Err error
}

func (e *QuorumError) Error() string {
	msg := fmt.Sprintf("write quorum not reached: %d copies reachable, %d required", e.Reachable, e.Required)
	if e.Strict {
		msg += " (strict bucket)"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is reports ErrNoQuorum.
func (e *QuorumError) Is(target error) bool { return target == ErrNoQuorum }

// Unwrap returns the targets' failures.
func (e *QuorumError) Unwrap() error { return e.Err }
