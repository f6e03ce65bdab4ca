package node

// A removed node stops.
//
// `cairn node remove` takes a member out of the Raft group and the cluster
// map. The removed node itself usually never learns it from Raft: once the
// leader applies the change it stops sending to the node, so the node often
// never sees the change committed. Left alone it would go on serving a
// namespace that no longer changes, and keep campaigning.
//
// So every cluster node watches its own membership (watchMembership):
//
//   - Locally: once its Raft configuration is non-empty (it bootstrapped,
//     or received the leader's snapshot or log) and no longer lists it,
//     it was removed. A node that joins is in the configuration (as a
//     learner) before it receives anything, so this never fires early.
//   - By asking: when it has known no leader for probeAfter, it asks its
//     peers (a join RPC marked "probe", which changes nothing) whether it
//     is still a member. A peer that does not list it in its Raft
//     configuration, and has applied at least as much of the log as this
//     node, has applied its removal: this node was removed. Unreachable
//     peers and peers behind it prove nothing.
//
// A removed node logs an Error, writes DATA/removed (the reason and time),
// and stops: Node.Wait returns an error wrapping ErrRemoved and `cairn
// server` exits with status 1. Start refuses a data directory holding
// DATA/removed, or whose Raft configuration no longer lists the node: its
// data is stale and its ID is gone from the cluster. Wipe the directory and
// join the node anew.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/internal/transport"
	pb "go.etcd.io/raft/v3/raftpb"
)

// ErrRemoved is returned by Start, and by Node.Wait, for a node that was
// removed from its cluster.
var ErrRemoved = errors.New("node: this node was removed from the cluster")

const (
	removedFile = "removed"
	// membershipTick is the period of the local membership check.
	membershipTick = 500 * time.Millisecond
	// probeAfter: without a known leader for this long, ask the peers.
	probeAfter = 2 * time.Second
	// probeEvery is the period of the probes while leaderless.
	probeEvery = 2 * time.Second
)

// checkNotRemoved refuses a data directory marked removed.
func checkNotRemoved(dataDir string) error {
	b, err := os.ReadFile(filepath.Join(dataDir, removedFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%w (%s): its data is stale; wipe %s (or move it away) and join the node anew",
		ErrRemoved, strings.TrimSpace(string(b)), dataDir)
}

// inConf reports whether id is a voter or learner of cs (either half of a
// joint configuration).
func inConf(cs *pb.ConfState, id uint64) bool {
	return slices.Contains(cs.GetVoters(), id) || slices.Contains(cs.GetVotersOutgoing(), id) ||
		slices.Contains(cs.GetLearners(), id) || slices.Contains(cs.GetLearnersNext(), id)
}

func confEmpty(cs *pb.ConfState) bool {
	return len(cs.GetVoters())+len(cs.GetVotersOutgoing())+len(cs.GetLearners())+len(cs.GetLearnersNext()) == 0
}

// removedLocally reports whether this node's own Raft configuration says it
// was removed.
func (c *clusterNode) removedLocally() bool {
	cs := c.raft.Members()
	return !confEmpty(cs) && !inConf(cs, c.id)
}

// markRemoved records the removal in DATA/removed and returns the error
// the node stops with.
func (c *clusterNode) markRemoved(how string) error {
	reason := fmt.Sprintf("node %d removed, %s, noticed %s", c.id, how, time.Now().UTC().Format(time.RFC3339))
	if err := os.WriteFile(filepath.Join(c.cfg.DataDir, removedFile), []byte(reason+"\n"), 0o644); err != nil {
		c.cfg.Logger.Error("record the removal", "err", err)
	}
	return fmt.Errorf("%w (%s): wipe %s before this machine rejoins", ErrRemoved, reason, c.cfg.DataDir)
}

// watchMembership stops the node when it finds it was removed (see above).
func (c *clusterNode) watchMembership() {
	t := time.NewTicker(membershipTick)
	defer t.Stop()
	leaderSeen := time.Now()
	var lastProbe time.Time
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		var how string
		switch {
		case c.removedLocally():
			how = "as this node's Raft configuration shows"
		default:
			st := c.raft.Status()
			if st.Leader != 0 {
				leaderSeen = time.Now()
				continue
			}
			if time.Since(leaderSeen) < probeAfter || time.Since(lastProbe) < probeEvery {
				continue
			}
			lastProbe = time.Now()
			peer, ok := c.probePeers()
			if !ok {
				continue
			}
			how = "as member " + peer + " says"
		}
		err := c.markRemoved(how)
		c.cfg.Logger.Error("this node was removed from the cluster: stopping; wipe its data directory before it rejoins",
			"node", c.id, "how", how, "data", c.cfg.DataDir)
		c.n.stopWith(err)
		return
	}
}

// probePeers asks every other known member whether this node is still a
// member; ok reports that one (named by peer) says it was removed.
func (c *clusterNode) probePeers() (peer string, ok bool) {
	if confEmpty(c.raft.Members()) {
		return "", false // not joined yet: nothing to be removed from
	}
	applied := c.raft.AppliedIndex()
	addrs := *c.addrs.Load()
	req := transport.JoinRequest{ID: transport.NodeID(c.id), PublicURL: c.n.URL, ClusterURL: c.n.ClusterURL,
		Extra: joinExtra{Probe: true}.marshal()}
	for id, u := range addrs {
		if id == c.id || u == "" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := c.client.Join(ctx, u, req)
		cancel()
		if err != nil {
			continue
		}
		e := parseJoinExtra(resp.Extra)
		if e.Member != nil && !*e.Member && e.Applied >= applied {
			return fmt.Sprintf("%d at %s", id, u), true
		}
	}
	return "", false
}

// answerProbe is a member's answer to a probe from node id.
func (c *clusterNode) answerProbe(id uint64) transport.JoinResponse {
	cs := c.raft.Members()
	if confEmpty(cs) {
		return transport.JoinResponse{} // not joined itself: no opinion
	}
	member := inConf(cs, id)
	return transport.JoinResponse{Extra: joinExtra{Member: &member, Applied: c.raft.AppliedIndex()}.marshal()}
}
