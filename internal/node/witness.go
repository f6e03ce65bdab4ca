package node

// Witness nodes (`cairn witness`).
//
// A witness is a cluster member that votes in Raft and stores no file
// content: the third voter that lets a two-web-server cluster survive the
// loss of either server. It keeps what voting needs: the Raft log and the
// namespace (every member applies the whole log; a voter must hold the log
// to vote, and may even become the leader), in DATA/meta as any node.
//
// It never holds blobs:
//
//   - Its cluster map record has Witness set (from its join request and
//     registerLoop), so placement never ranks it: no write, repair or
//     rebalance sends it a copy. Should a peer still send one, its RPC
//     handler refuses it (errWitnessBlob, answered 400).
//   - Its local blob store is an empty in-memory one (vfs.NewMem): nothing
//     is written under DATA/blobs, which is never created.
//
// Its public HTTP API is the full one, served by proxy: every read of a
// file fetches the blobs from their replicas (the hedged remote read every
// node uses for blobs it lacks) and every write sends them to the data
// nodes placement picks, then commits the namespace change as any member.
// So a load balancer can send requests to the witness too, at the cost of
// one more network hop per blob; usually it is kept out of the pool.
//
// Raft voters: the leader promotes a caught-up witness before data-node
// learners (consensus.RaftConfig.PromoteFirst), so that in a cluster of
// data nodes plus a witness the witness always holds one of the votes.

import (
	"errors"
	"fmt"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/transport"
	"github.com/cairn-fs/cairn/internal/vfs"
)

// errWitnessBlob answers a blob copy sent to a witness.
var errWitnessBlob = fmt.Errorf("%w: this node is a witness: it stores no blobs", transport.ErrBadRequest)

// checkWitness rejects witness settings that cannot work.
func checkWitness(cfg Config) error {
	if !cfg.Witness {
		return nil
	}
	if cfg.ClusterSecret == "" {
		return errors.New("node: a witness needs the cluster secret (CAIRN_CLUSTER_SECRET or --secret-file)")
	}
	if cfg.Join == "" {
		return errors.New("node: a witness joins an existing cluster: give --join URL (a member's public URL)")
	}
	return nil
}

// witnessBlobConfig makes a witness's blob store an empty in-memory one.
func witnessBlobConfig(c *blob.Config) {
	c.FS = vfs.NewMem()
	c.Dir = "/blobs"
	c.DisableMmap = true
	c.OnFsync = nil
}
