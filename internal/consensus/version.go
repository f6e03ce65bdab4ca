package consensus

import (
	"fmt"

	"github.com/cairn-fs/cairn/internal/meta"
)

// The cluster's log version (meta/version.go): Raft refuses a proposal
// that needs a newer payload version than the active one, so that no
// member meets an entry its binary cannot decode.

// loadLogVersion reads the active log version from the applied state (at
// open, after an OpSetLogVersion applied, after a snapshot install).
func (r *Raft) loadLogVersion() error {
	v, err := meta.NewReader(r.cfg.KV).LogVersion()
	if err != nil {
		return fmt.Errorf("consensus: read log version: %w", err)
	}
	if old := byte(r.logVersion.Swap(uint32(v))); old != 0 && old != v {
		r.log.Info("cluster log version moved", "from", old, "to", v)
	}
	return nil
}

// allowed checks cmd against the active log version.
func (r *Raft) allowed(cmd meta.Command) error {
	if err := meta.Allowed([]meta.Command{cmd}, byte(r.logVersion.Load())); err != nil {
		return fmt.Errorf("consensus: propose: %w", err)
	}
	return nil
}

// upgrades reports whether cmds hold an OpSetLogVersion.
func upgrades(cmds []meta.Command) bool {
	for i := range cmds {
		if cmds[i].Op == meta.OpSetLogVersion {
			return true
		}
	}
	return false
}
