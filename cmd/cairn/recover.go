package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/cairn-fs/cairn/internal/node"
	"github.com/spf13/cobra"
)

const forceWarning = `
  !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!
  !!  FORCE NEW CLUSTER: this node becomes the ONLY member of its cluster.  !!
  !!                                                                        !!
  !!  Use it only when the other voters are gone for good. Files whose      !!
  !!  last write did not reach this node are lost. Every other member is    !!
  !!  dropped: if one of them ever starts again on its old data, the        !!
  !!  cluster splits in two (split brain). WIPE their data directories      !!
  !!  before they rejoin with --join.                                       !!
  !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!
`

func newRecoverCmd() *cobra.Command {
	var dataDir string
	var force, yes bool
	cmd := &cobra.Command{
		Use:   "recover --data DIR --force-new-cluster --yes-i-know",
		Short: "Offline recovery of a stopped node (force a lone survivor to go on alone)",
		Long: `Offline recovery of a STOPPED cluster node.

--force-new-cluster makes the node in --data the only voter and the only
member of its cluster, when the cluster lost its majority for good (e.g.
two of three nodes destroyed): the Raft configuration is rewritten to this
node alone (uncommitted log entries are discarded, the namespace is kept),
and the other members are removed from the cluster map. Then start the node
as usual with "cairn server". The other members must be wiped before they
rejoin. See docs/operations.md, "Lone survivor".

Without --yes-i-know it only prints what it would do.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !force {
				return errors.New("nothing to do: the only recovery is --force-new-cluster")
			}
			return runForceNewCluster(cmd.ErrOrStderr(), cmd.OutOrStdout(), dataDir, yes)
		},
	}
	cmd.Flags().StringVar(&dataDir, "data", os.Getenv("CAIRN_DATA"), "data directory of the stopped node (env CAIRN_DATA)")
	cmd.Flags().BoolVar(&force, "force-new-cluster", false, "make this node the only voter and member of its cluster")
	cmd.Flags().BoolVar(&yes, "yes-i-know", false, "confirm: the other members are gone and will be wiped before they rejoin")
	return cmd
}

func runForceNewCluster(warn, out io.Writer, dataDir string, yes bool) error {
	fmt.Fprint(warn, forceWarning)
	self, members, err := node.ClusterMembers(dataDir)
	if err != nil {
		return err
	}
	ids := make([]uint64, 0, len(members))
	for id := range members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var b strings.Builder
	for _, id := range ids {
		if id != self {
			fmt.Fprintf(&b, "  %d %s\n", id, members[id])
		}
	}
	fmt.Fprintf(warn, "\nnode %d (%s) keeps its namespace; members to drop:\n%s", self, dataDir, b.String())
	if !yes {
		return errors.New("not done: add --yes-i-know to force a new cluster")
	}
	logger, err := newLogger("info")
	if err != nil {
		return err
	}
	rep, err := node.ForceNewCluster(dataDir, logger)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "forced a new cluster: node %d is the only voter (removed from Raft: %v; uncommitted entries discarded: %d; log now ends at %d)\n",
		rep.ID, rep.Removed, rep.Discarded, rep.Index)
	fmt.Fprintf(out, "next: start it with \"cairn server --data %s ...\"; lower write quorums one node cannot meet (cairn bucket set NAME write-quorum=1); wipe the old members before they rejoin\n", dataDir)
	return nil
}
