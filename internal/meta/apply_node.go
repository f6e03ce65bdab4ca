package meta

import (
	"errors"
	"fmt"
	"math"
)

// setNode adds a cluster member or replaces its record. JoinedNs is kept
// from the first addition.
func (a *applier) setNode() (Result, error) {
	n := a.cmd.Node
	switch {
	case n == nil:
		return Result{}, fmt.Errorf("%w: OpSetNode without Node", ErrInvalid)
	case n.ID == 0:
		return Result{}, fmt.Errorf("%w: node ID 0", ErrInvalid)
	case n.Weight < 0 || math.IsNaN(n.Weight) || math.IsInf(n.Weight, 0):
		return Result{}, fmt.Errorf("%w: node weight %v", ErrInvalid, n.Weight)
	case n.URL == "" && !n.Witness:
		return Result{}, fmt.Errorf("%w: node %d has no URL", ErrInvalid, n.ID)
	}
	rec := *n
	if rec.Weight == 0 {
		rec.Weight = 1
	}
	if rec.State == 0 {
		rec.State = NodeActive
	}
	if rec.State != NodeActive && rec.State != NodeDraining && rec.State != NodeClient {
		return Result{}, fmt.Errorf("%w: node state %d", ErrInvalid, rec.State)
	}
	rec.JoinedNs = a.now
	if old, err := a.r.Node(rec.ID); err == nil {
		rec.JoinedNs = old.JoinedNs
	} else if !errors.Is(err, ErrNotFound) {
		return Result{}, err
	}
	a.t.set(nodeKey(rec.ID), encodeNode(&rec))
	return Result{}, nil
}

func (a *applier) removeNode() (Result, error) {
	if a.cmd.Node == nil {
		return Result{}, fmt.Errorf("%w: OpRemoveNode without Node", ErrInvalid)
	}
	if _, err := a.r.Node(a.cmd.Node.ID); err != nil {
		return Result{}, err
	}
	a.t.del(nodeKey(a.cmd.Node.ID))
	return Result{}, nil
}
