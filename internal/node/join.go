package node

import (
	"errors"
	"fmt"
	"time"

	"github.com/cairn-fs/cairn/internal/transport"
)

// ErrSecretRejected: the member named by --join refused this node's
// requests as unauthenticated (401) joinRejections times in a row. The
// node stops (Wait returns an error wrapping it): retrying cannot help,
// since every node needs the same cluster secret, and an operator watching
// a node that says "serving" would not see the join fail.
var ErrSecretRejected = errors.New("node: the member rejected this node's cluster secret")

// ErrClusterTLSMismatch: the member named by --join and this node differ
// in --cluster-tls (one speaks node-to-node TLS, the other does not). The
// node stops, as for ErrSecretRejected.
var ErrClusterTLSMismatch = errors.New("node: the member and this node differ in --cluster-tls")

// joinRejections is how many 401 answers (or TLS mismatches) in a row
// stop a joining node;
// any other error (the member down, no leader yet) is retried forever.
const joinRejections = 3

// errGiveUp, returned by a retry function, makes retry stop at once.
var errGiveUp = errors.New("node: give up")

// secretRejected is the error a joining node stops with. It names the
// settings to check; a 401 can also come from clocks further apart than
// the transport allows (skew).
func secretRejected(join string, skew time.Duration, cause error) error {
	if errors.Is(cause, transport.ErrTLSRequired) {
		return fmt.Errorf("join %s: %w: every node of a cluster needs the same --cluster-tls setting (on by default; "+
			"off only on trusted private links) (answer: %v)", join, ErrClusterTLSMismatch, cause)
	}
	return fmt.Errorf("join %s: %w: every node needs the same CAIRN_CLUSTER_SECRET / --secret-file, "+
		"and clocks within %s of each other (answer: %v)", join, ErrSecretRejected, skew, cause)
}
