package node

// Forced single-survivor recovery (`cairn recover --force-new-cluster`).
//
// When a cluster has lost its majority of voters for good (two of three
// machines destroyed), the survivor cannot commit anything: no write, no
// membership change. ForceNewCluster rewrites the stopped survivor's Raft
// state so that it is the only voter (consensus.ForceNewCluster: etcd's
// --force-new-cluster) and drops every other member from the cluster map
// (OpRemoveNode, in the same forced log). The namespace is kept as applied;
// blobs are untouched. The node then starts as usual, elects itself and
// takes writes (for buckets whose write quorum one node can meet).
//
// The removed members must never run again on their old data: they would
// form, or try to form, a second cluster (split brain). Wipe their data
// directories and join them anew. docs/operations.md has the procedure.

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-fs/cairn/internal/consensus"
	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
)

// ForceReport says what ForceNewCluster did.
type ForceReport struct {
	consensus.ForceResult
	// Dropped lists the cluster map members removed with it (their public
	// URLs by ID).
	Dropped map[uint64]string
}

// ClusterMembers returns the cluster map of the stopped node in dataDir
// (ID → public URL) and the node's own ID, without changing anything.
func ClusterMembers(dataDir string) (self uint64, members map[uint64]string, err error) {
	self, db, err := openForRecovery(dataDir)
	if err != nil {
		return 0, nil, err
	}
	defer db.Close()
	nodes, err := meta.NewReader(db).Nodes()
	if err != nil {
		return 0, nil, fmt.Errorf("read cluster map: %w", err)
	}
	members = map[uint64]string{}
	for _, nd := range nodes {
		members[nd.ID] = nd.URL
	}
	return self, members, nil
}

// ForceNewCluster makes the stopped node in dataDir the only member of its
// cluster (see above). It fails if the node is running (the namespace store
// is locked) or never was a cluster member. The outcome is also appended to
// DATA/force-new-cluster.log.
func ForceNewCluster(dataDir string, logger *slog.Logger) (ForceReport, error) {
	if logger == nil {
		logger = slog.Default()
	}
	var rep ForceReport
	id, db, err := openForRecovery(dataDir)
	if err != nil {
		return rep, err
	}
	defer db.Close()
	nodes, err := meta.NewReader(db).Nodes()
	if err != nil {
		return rep, fmt.Errorf("read cluster map: %w", err)
	}
	rep.Dropped = map[uint64]string{}
	var cmds []meta.Command
	now := time.Now().UnixNano()
	for _, nd := range nodes {
		if nd.ID == id {
			if nd.Witness || nd.State == meta.NodeClient {
				return rep, fmt.Errorf("node %d holds no file content (a witness or a client node); force a surviving data node instead", id)
			}
			continue
		}
		rep.Dropped[nd.ID] = nd.URL
		cmds = append(cmds, meta.Command{Op: meta.OpRemoveNode, TimeNs: now, Node: &meta.Node{ID: nd.ID}})
	}
	res, err := consensus.ForceNewCluster(db, id, cmds)
	if errors.Is(err, consensus.ErrNoRaftState) {
		return rep, fmt.Errorf("%s: not a cluster member (no Raft state): nothing to recover", dataDir)
	}
	if err != nil {
		return rep, err
	}
	rep.ForceResult = res
	logger.Warn("FORCED A NEW CLUSTER: this node is now the only voter; the other members must be wiped before they rejoin",
		"node", id, "removed_voters_learners", res.Removed, "dropped_members", len(rep.Dropped),
		"discarded_uncommitted_entries", res.Discarded, "applied", res.Applied, "log_index", res.Index)
	line := fmt.Sprintf("%s force-new-cluster node=%d removed=%v dropped=%v discarded=%d applied=%d index=%d term=%d\n",
		time.Now().UTC().Format(time.RFC3339), id, res.Removed, rep.Dropped, res.Discarded, res.Applied, res.Index, res.Term)
	if f, err := os.OpenFile(filepath.Join(dataDir, "force-new-cluster.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		f.WriteString(line)
		f.Close()
	}
	return rep, nil
}

// openForRecovery opens the namespace store of a stopped cluster node.
func openForRecovery(dataDir string) (uint64, kv.Store, error) {
	if dataDir == "" {
		return 0, nil, errors.New("a data directory is required (--data)")
	}
	if _, err := os.Stat(filepath.Join(dataDir, "node.id")); err != nil {
		return 0, nil, fmt.Errorf("%s is not a cluster node's data directory: %w", dataDir, err)
	}
	id, err := loadOrCreateNodeID(dataDir) // it exists: this only reads it
	if err != nil {
		return 0, nil, err
	}
	mdir := filepath.Join(dataDir, "meta")
	if _, err := os.Stat(mdir); err != nil {
		return 0, nil, fmt.Errorf("%s has no namespace store: %w", dataDir, err)
	}
	db, err := kv.OpenPebble(mdir, kv.PebbleConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return 0, nil, fmt.Errorf("open %s (is the node still running? stop it first): %w", mdir, err)
	}
	return id, db, nil
}
