package store

import (
	"context"
	"errors"

	"github.com/cairn-fs/cairn/internal/consensus"
	"github.com/cairn-fs/cairn/internal/meta"
)

// ChangeKind is what one Change of a ChangeMany call does.
type ChangeKind uint8

// The changes a batch may hold.
const (
	ChangeMkdir    ChangeKind = iota + 1 // Mkdir(Path, Attrs)
	ChangeSetAttrs                       // SetAttrs(Path, Set)
	ChangeDelete                         // Delete(Path, "")
)

// Change is one namespace change of a ChangeMany call.
type Change struct {
	Kind  ChangeKind
	Path  string
	Attrs Attrs    // ChangeMkdir
	Set   SetAttrs // ChangeSetAttrs
	// Decided and Claims: as PutOptions' (a holder's change, decided
	// under those directory claims).
	Decided bool
	Claims  []Claim
}

// BatchChanger is implemented by a Store that proposes many namespace
// changes of one bucket at once, in order (the mount's write-back queue:
// an rm -rf, a chmod -R, a tar's directories cost a few log entries, not
// one round trip each).
type BatchChanger interface {
	// ChangeMany makes cs in bucket, in that order, as that many calls of
	// Mkdir, SetAttrs and Delete would, and returns one error per change
	// (their errors). The changes are independent: one that fails changes
	// nothing and the others still apply. A SetAttrs reads the path's
	// current attributes before any change of the batch is made: it must
	// not name a path an earlier change of the same batch creates. Safe
	// for concurrent use; it blocks until every change is committed and
	// applied on this node, or ctx ends.
	ChangeMany(ctx context.Context, bucket string, cs []Change) []error
}

var _ BatchChanger = (*Local)(nil)

// ChangeMany implements BatchChanger: the commands go to the log in one
// ProposeMany (one or a few entries) when it takes ordered proposals.
func (s *Local) ChangeMany(ctx context.Context, bucket string, cs []Change) []error {
	errs := make([]error, len(cs))
	cmds := make([]meta.Command, 0, len(cs))
	idx := make([]int, 0, len(cs))
	for i, c := range cs {
		cmd, err := s.changeCommand(ctx, bucket, c)
		if err != nil {
			errs[i] = err
			continue
		}
		if c.Decided {
			cmd.Own = s.heldOwn(c.Claims)
		}
		cmds = append(cmds, cmd)
		idx = append(idx, i)
	}
	op, ok := s.log.(consensus.OrderedProposer)
	if !ok || len(cmds) < 2 {
		for k, i := range idx {
			if cs[i].Decided {
				_, errs[i] = s.proposeDecided(ctx, cmds[k])
			} else {
				_, errs[i] = s.propose(ctx, cmds[k])
			}
		}
		return errs
	}
	now := s.cfg.Now().UnixNano()
	for k := range cmds {
		if cmds[k].TimeNs == 0 {
			cmds[k].TimeNs = now
		}
		s.withOrigin(ctx, &cmds[k]) // trash.go
	}
	results, perrs := op.ProposeMany(ctx, cmds)
	for k, i := range idx {
		switch {
		case perrs[k] != nil:
			errs[i] = mapErr(perrs[k])
		case !cs[i].Decided && errors.Is(results[k].Err, meta.ErrOwned):
			// Decided in the log, in a directory a node owns: again,
			// alone, with its claim or after a recall (owners.go).
			_, errs[i] = s.propose(ctx, cmds[k])
		default:
			if errors.Is(results[k].Err, meta.ErrFenced) {
				s.owners.fenced.Add(1)
			}
			errs[i] = mapErr(results[k].Err)
		}
	}
	return errs
}

// proposeDecided proposes a holder's command as it is (stamped with the
// claims it was decided under): no flush, no recall, no retry.
func (s *Local) proposeDecided(ctx context.Context, cmd meta.Command) (meta.Result, error) {
	if cmd.TimeNs == 0 {
		cmd.TimeNs = s.cfg.Now().UnixNano()
	}
	s.withOrigin(ctx, &cmd) // trash.go
	res, err := s.log.Propose(ctx, cmd)
	if err != nil {
		return res, mapErr(err)
	}
	if errors.Is(res.Err, meta.ErrFenced) {
		s.owners.fenced.Add(1)
	}
	return res, mapErr(res.Err)
}

// changeCommand is the command of one Change: what Mkdir, SetAttrs or
// Delete would propose.
func (s *Local) changeCommand(ctx context.Context, bucket string, c Change) (meta.Command, error) {
	switch c.Kind {
	case ChangeMkdir:
		return s.mkdirCommand(ctx, bucket, c.Path, c.Attrs)
	case ChangeSetAttrs:
		return s.setAttrsCommand(ctx, bucket, c.Path, c.Set)
	case ChangeDelete:
		return s.deleteCommand(bucket, c.Path, "")
	}
	return meta.Command{}, ErrInvalidName
}
