#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# bench/rebalance.sh: web reads during a rebalance, for each repair rate
# (issue 8, "Repair that an operator can live with").
#
# For each rate in RATES (bytes/s for --repair-rate; 0 = unlimited), a new
# cluster of 3 nodes on 127.0.0.1, all started with that rate:
#
#   1. fill: the medium corpus (500-800 KB files, SCALE of 2,000) into a
#      bucket with R=2 ("bulk"), and the small corpus (15 KB median, SCALE
#      of 20,000) into a mirror bucket ("hot": every node holds every blob,
#      so node 1 reads it locally whatever moves);
#   2. baseline: wrk (THREADS threads, CONNS connections, DURATION s, random
#      paths of the small corpus) against node 1: p50, p99;
#   3. rebalance: start a 4th node with --join; it pulls its share of both
#      buckets and the old nodes hand theirs off, each node's moves paced at
#      the rate; wrk runs against node 1 for DURATION s from the join: p50,
#      p99 (DURATION should not exceed the rebalance much, or the window
#      is mostly after it);
#   4. the rebalance time: from the join to the last change of the 4th
#      node's blob count (sampled every 0.2 s from the join; settled once
#      it has not changed for 3 s, bounded by SETTLE_MAX s), and the bytes
#      it then holds (pulled by it, or handed to it by the others).
#
# Reported per rate: baseline and during-rebalance p99 and their ratio,
# the rebalance time and the bytes moved to the new node. The cluster is
# stopped between rates. Every load is bounded (wrk -d, SETTLE_MAX).
#
# Settings: RATES="0 33554432 8388608" (repeat a rate for more rounds)
# SCALE=0.25 SEED=1 DURATION=10
# CONNS=20 THREADS=2 SETTLE_MAX=300 CAIRN_BIN KEEP=1.
# Output: a table on stdout and in bench/.data/results/rebalance-DATE/.
set -euo pipefail
SCALE=${SCALE:-0.25}
. "$(dirname "$0")/lib.sh"

RATES=${RATES:-"0 33554432 8388608"}
DURATION=${DURATION:-10}
CONNS=${CONNS:-20}
THREADS=${THREADS:-2}
SETTLE_MAX=${SETTLE_MAX:-300}
CLUSTER_SECRET=${CAIRN_CLUSTER_SECRET:-cairn-bench-cluster-secret-0000000000}
[ "$SCALE" = 1 ] || CORPUS_DIR=$DATA_DIR/corpus-scale$SCALE

need_tools curl:curl wrk:wrk jq:jq
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
resolve_cairn_bin

OUT=$DATA_DIR/results/rebalance-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
TABLE=$OUT/table.md
emit() { printf '%s\n' "$@" | tee -a "$TABLE"; }

ensure_corpus small
ensure_corpus medium
SMALL=$CORPUS_DIR/small
MEDIUM=$CORPUS_DIR/medium

declare -a URL PID LOGF
# start_node I RATE [JOIN]: start node I on a free port.
start_node() {
	local i=$1 rate=$2 join=() port
	port=$(pick_port)
	URL[i]=http://127.0.0.1:$port
	LOGF[i]=$OUT/rate$rate-r$round-n$i.log
	[ -z "${3:-}" ] || join=(--join "$3")
	CAIRN_CLUSTER_SECRET=$CLUSTER_SECRET "$CAIRN_BIN" server --data "$RUN/n$i" --listen "127.0.0.1:$port" \
		--gossip-listen "127.0.0.1:$(pick_port)" --repair-rate "$rate" "${join[@]}" >"${LOGF[i]}" 2>&1 &
	PID[i]=$!
	BENCH_PIDS+=("${PID[i]}")
	wait_http "${URL[i]}/_cairn/health" "${PID[i]}" 60 "${LOGF[i]}"
}

ccli() { CAIRN_SERVER=${URL[1]} "$CAIRN_BIN" "$@"; }

# blobs_on I: node I's blob count from its own report.
blobs_on() {
	curl -s --max-time 5 -H "Authorization: Bearer $CAIRN_ADMIN_KEY" "${URL[$1]}/_cairn/status?local=1" | jq -r '.disk.blobs // -1'
}

# wrk_p: run wrk against node 1; print "p50_ms p99_ms rps".
wrk_p() {
	local out=$1
	wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --timeout 10s --latency \
		-s "$BENCH_DIR/wrk/random.lua" "${URL[1]}" -- "$SMALL/paths.txt" "/hot/" "$SEED" >"$out" 2>&1 || true
	awk '/^BENCH_RESULT/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		print v["p50_ms"], v["p99_ms"], v["rps"] }' "$out"
}

emit "## Reads during a rebalance ($(date -u +%Y-%m-%d), rev $(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo ?), SCALE=$SCALE)" ""
emit "| --repair-rate | p99 before (ms) | p99 during (ms) | ratio | p50 before / during (ms) | rebalance time (s) | moved to node 4 (MiB) |"
emit "|---|---|---|---|---|---|---|"
round=0
for rate in $RATES; do
	round=$((round + 1))
	scratch_dir RUN "rebalance-$rate"
	start_node 1 "$rate"
	start_node 2 "$rate" "${URL[1]}"
	start_node 3 "$rate" "${URL[1]}"
	deadline=$((SECONDS + 60))
	until ccli bucket create bulk --public --replicas 2 >>"$OUT/cli.log" 2>&1; do
		[ $SECONDS -lt $deadline ] || die "bucket create failed for 60 s ($OUT/cli.log)"
		sleep 0.2
	done
	ccli bucket create hot --public --replicas mirror >>"$OUT/cli.log" 2>&1 || die "bucket create hot failed"
	log "rate $rate: filling"
	ccli sync "$MEDIUM" bulk >>"$OUT/cli.log" 2>&1 || die "sync medium failed"
	ccli sync "$SMALL" hot >>"$OUT/cli.log" 2>&1 || die "sync small failed"
	read -r b50 b99 brps <<<"$(wrk_p "$OUT/rate$rate-r$round-before.wrk")"
	log "rate $rate: baseline p50 $b50 ms p99 $b99 ms ($brps req/s); node 4 joins"
	# Sample node 4's blob count every 0.2 s from the join, in the
	# background, to time the rebalance while wrk runs.
	samples=$OUT/rate$rate-r$round-blobs.txt
	: >"$samples"
	t0=$EPOCHREALTIME
	start_node 4 "$rate" "${URL[1]}"
	(
		end=$((SECONDS + SETTLE_MAX))
		while [ $SECONDS -lt "$end" ]; do
			echo "$EPOCHREALTIME $(blobs_on 4)" >>"$samples"
			sleep 0.2
		done
	) &
	sampler=$!
	read -r d50 d99 drps <<<"$(wrk_p "$OUT/rate$rate-r$round-during.wrk")"
	log "rate $rate: during p50 $d50 ms p99 $d99 ms ($drps req/s)"
	# Settled: the count has not changed for 3 s (bounded by SETTLE_MAX).
	while kill -0 "$sampler" 2>/dev/null; do
		last=$(tail -n 1 "$samples" | awk '{print $2}')
		since=$(awk -v v="$last" '$2 != v {t = $1} END {print t}' "$samples")
		[ -n "$since" ] || since=$t0
		awk -v a="$since" -v b="$EPOCHREALTIME" 'BEGIN {exit !(b - a >= 3)}' && break
		sleep 0.5
	done
	kill "$sampler" 2>/dev/null || true
	wait "$sampler" 2>/dev/null || true
	took=$(awk -v t0="$t0" 'BEGIN {v = 0} $2 != v {t = $1; v = $2} END {printf "%.1f", (t ? t : t0) - t0}' "$samples")
	ccli status >"$OUT/rate$rate-r$round-status.txt" 2>&1 || true
	moved=$(curl -s -H "Authorization: Bearer $CAIRN_ADMIN_KEY" "${URL[4]}/_cairn/status?local=1" |
		jq -r '((.disk.live_bytes // 0) / 1048576 | floor)')
	ratio=$(awk -v a="$b99" -v b="$d99" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "?" }')
	emit "| $rate | $b99 | $d99 | $ratio | $b50 / $d50 | $took | $moved |"
	for i in 4 3 2 1; do stop_pid "${PID[i]}"; done
	[ "${KEEP:-0}" = 1 ] || rm -rf -- "$RUN"
done
log "results in $OUT"
