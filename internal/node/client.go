package node

// Client nodes (`cairn server --role client`).
//
// A client node is a member that stores no blob and never votes: a web
// server that should serve the site without holding a share of it (a
// small VM, an autoscaled PHP worker). It keeps what resolving a path
// locally needs: the namespace, as a Raft learner the leader never
// promotes (consensus.RaftConfig.NeverPromote), in DATA/meta as any node.
//
//   - Its cluster map record has State meta.NodeClient (from its join
//     request and registerLoop; log version 15), so placement never ranks
//     it: no write, repair or rebalance sends it a copy, none is read from
//     it, and the failure detector's view of it moves no data. A copy a
//     peer still sends is refused (errClientBlob, answered 400).
//   - Its local blob store, under DATA/cache, is its cache of the blobs
//     it read from the nodes that hold them (replica.DiskCache,
//     --cache-size: least recently used out, each blob checked against
//     its hash on fill; core wires the store to it): a cached blob is a
//     local copy to every front end, served as a data node serves its
//     own. Only the cache adds copies there: writes send their blobs to
//     the data nodes placement picks (a write that still ranks this node,
//     before its record says client, fails that target:
//     replica.Config.NoLocalCopies), the repair loop does not run on a
//     client, and peers' copies are refused. The store's own work still
//     runs there (the namespace's garbage collection deletes reaped
//     blobs, the scrub quarantines a bad copy: the cache hears of both
//     through blob.Config.OnDelete). A data node's DATA/blobs is refused
//     (checkClient): it must leave the cluster first.
//   - Joining and leaving move no data; a client that is down costs the
//     cluster nothing (no repair, nothing under-replicated), and the
//     status shows it as a client, not as a missing data node.

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/transport"
)

// errClientBlob answers a blob copy sent to a client node.
var errClientBlob = fmt.Errorf("%w: this node is a client: it stores no blobs", transport.ErrBadRequest)

// checkClient rejects client settings that cannot work.
func checkClient(cfg Config) error {
	if !cfg.Client {
		return nil
	}
	switch {
	case cfg.Witness:
		return errors.New("node: a node is a witness or a client, not both")
	case cfg.ClusterSecret == "":
		return errors.New("node: a client node needs the cluster secret (CAIRN_CLUSTER_SECRET or --secret-file)")
	case cfg.Join == "":
		return errors.New("node: a client node joins an existing cluster: give --join URL (a member's public URL)")
	}
	// A data node's copies are in DATA/blobs: restarted as a client it
	// would abandon them (and, until its record changes, take copies into
	// its cache, which evicts them).
	if vols, _ := filepath.Glob(filepath.Join(cfg.DataDir, "blobs", "*.vol")); len(vols) > 0 {
		return fmt.Errorf("node: %s holds blob volumes: this node was a data node. Drain and remove it from the cluster (cairn node drain, cairn node remove), then start the client with an empty --data directory", filepath.Join(cfg.DataDir, "blobs"))
	}
	return nil
}

// joinState is the state a join request records: NodeClient for a client
// node, else the default (active).
func joinState(extra joinExtra) meta.NodeState {
	if extra.Client {
		return meta.NodeClient
	}
	return 0
}
