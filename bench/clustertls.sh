#!/usr/bin/env bash
# bench/clustertls.sh: the cost of node-to-node TLS (issue 11). Runs
# bench/cluster.sh's PARTS (default: propagation, reads through one node,
# kernel ingest) on a fresh 3-node cluster with --cluster-tls=off, then
# with it on (the default), alternating, ROUNDS_TLS rounds, so both see the
# same machine. Compare the tables of each pair (and ingest-cpu.csv: the
# server CPU of the ingest) in bench/.data/results/cluster-*/.
#
#   ROUNDS_TLS=2  PARTS="prop read ingest"  (other settings: bench/cluster.sh;
#   ROUNDS=1 ROUNDS_INGEST=1 by default here, the alternation makes the rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS_TLS=${ROUNDS_TLS:-2}
export PARTS=${PARTS:-"prop read ingest"} ROUNDS=${ROUNDS:-1} ROUNDS_INGEST=${ROUNDS_INGEST:-1}
for r in $(seq 1 "$ROUNDS_TLS"); do
	for m in off on; do
		echo "=== round $r --cluster-tls=$m $(date +%T)"
		SERVER_ARGS="${SERVER_ARGS:-} --cluster-tls=$m" bench/cluster.sh
	done
done
