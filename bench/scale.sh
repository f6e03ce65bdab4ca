#!/usr/bin/env bash
# bench/scale.sh: a tree that grows to millions of files (issue 35).
#
# A 3-node cluster on loopback (bench/lib-cluster.sh), bucket "uploads" with R=3,
# node 1 mounting it (noflush, the default). For each size in STAGES, the
# tree grows to that many files (bench/scale: an upload tree, 100 files a
# directory, 100 B to 2 KB each, tar archives through the bulk path,
# STREAMS at a time over the three nodes), and the run reports:
#   - the ingest rate of the stage (files a second, every file on all
#     three nodes: the stage ends when each node holds a blob of every file);
#   - per node: the namespace's bytes on disk a file (the meta directory,
#     after a Pebble compaction: the node is stopped cleanly first at the
#     last stage only, see below; at the other stages as it stands), the
#     blob index's bytes of RAM a blob (cairn_node_blob_index_bytes) and
#     the RSS;
#   - the p50 and p99 of a GET of a random small file through node 2, a
#     listing of a random directory (100 entries) and a stat of a random
#     file through node 1's mount (bench/scale probe, PROBES of each): the
#     latencies that must not grow with the tree, once the nodes are idle
#     after the stage's ingest (their compactions done; SETTLE s at most,
#     600).
# After the last stage: node 2 is stopped cleanly and started again, node
# 3 is SIGKILLed and started again; for each, the time until it serves a
# GET and its RSS then. Then a fourth node joins (see "join" below).
#
# Disk: each node keeps about 1.6 KB a file (1.1 KB of content on average
# in its volumes, about 0.4 KB of namespace, the Raft log), so 10,000,000
# files need about 50 GB over the three nodes; the script refuses a stage
# that would not fit at 2 KB a file a node in the free space less 10 GB. Results under
# bench/.data/results/scale-DATE/. Knobs: STAGES ("100000 1000000"; the
# issue's full run: "100000 1000000 10000000"), STREAMS (3), BATCH (20000),
# PROBES (2000), PROFILE (1: each node's heap and a 20 s CPU profile of
# node 1 during each stage's ingest, into the results), CAIRN_BIN. Needs
# root (the mount) and Go.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/lib.sh
source "$HERE/lib.sh"
# shellcheck source=bench/lib-cluster.sh
source "$HERE/lib-cluster.sh"
STAGES=${STAGES:-"100000 1000000"}
STREAMS=${STREAMS:-3}
BATCH=${BATCH:-20000}
PROBES=${PROBES:-2000}
SETTLE=${SETTLE:-600}
[ "$(id -u)" -eq 0 ] || die "run as root: the mount uses allow_other"
bench_traps
trap cluster_cleanup EXIT
resolve_cairn_bin
OUT=$DATA_DIR/results/scale-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
SCALE=$OUT/scale
(cd "$HERE/.." && go build -o "$SCALE" ./bench/scale) || die "build bench/scale"
CLUSTER_SECRET=${CLUSTER_SECRET:-cairn-bench-scale-secret-000000}
SERVER_ARGS=${SERVER_ARGS:-}
PROFILE=${PROFILE:-0}
CL_MOUNT_MODES=noflush CL_MOUNT_BUCKET=uploads
cluster_start scale
MNT=$CL_DIR/mnt-noflush
# The mount made the bucket (the cluster's default R, 3): public, R=3.
deadline=$((SECONDS + 60))
until ccli 1 bucket set uploads public=true replicas=3 >>"$OUT/cli.log" 2>&1; do
	[ $SECONDS -lt $deadline ] || die "bucket set uploads failed for 60 s (see $OUT/cli.log)"
	sleep 0.5
done
machine_info >"$OUT/machine.txt" 2>/dev/null || true
urls="${NODE_URL[1]},${NODE_URL[2]},${NODE_URL[3]}"

# metric NODE NAME: a node's metric value (0 if absent).
metric() {
	curl -fsS --max-time 10 -H "Authorization: Bearer $CAIRN_ADMIN_KEY" "${NODE_URL[$1]}/_cairn/metrics" 2>/dev/null |
		awk -v m="$2" '$1 == m {printf "%.0f\n", $2; found=1} END {if (!found) print 0}'
}
# rss_mb PID: "RSS MB (anon MB, file MB)": anonymous memory, and the pages
# of mapped files (the blob volumes, which the kernel may drop and read
# again) the process has touched.
rss_mb() {
	awk '/^VmRSS/ {r = $2} /^RssAnon/ {a = $2} /^RssFile/ {f = $2}
		END {printf "%.0f (anon %.0f, file %.0f)", r / 1024, a / 1024, f / 1024}' "/proc/$1/status" 2>/dev/null || echo "?"
}
meta_bytes() { du -sb "$CL_DIR/n$1/meta" 2>/dev/null | cut -f1; }

# settle: wait until the three nodes together use under a tenth of a core
# over 5 s (their compactions after an ingest are done), SETTLE s at most.
settle() {
	local deadline=$((SECONDS + SETTLE)) t0 t1 hz
	hz=$(getconf CLK_TCK)
	while [ $SECONDS -lt $deadline ]; do
		t0=$(pid_ticks "${NODE_PID[1]}" "${NODE_PID[2]}" "${NODE_PID[3]}")
		sleep 5
		t1=$(pid_ticks "${NODE_PID[1]}" "${NODE_PID[2]}" "${NODE_PID[3]}")
		if [ $(((t1 - t0) * 100 / hz / 5)) -lt 10 ]; then
			return
		fi
	done
	log "the nodes were still busy after $SETTLE s; probing anyway"
}

prev=0
for stage in $STAGES; do
	free_kb=$(df -Pk "$CL_DIR" | awk 'NR == 2 {print $4}')
	need_kb=$(((stage - prev) * 3 * 2))
	[ "$need_kb" -lt $((free_kb - 10 * 1024 * 1024)) ] || die "stage $stage needs about $((need_kb / 1024 / 1024)) GB more, $((free_kb / 1024 / 1024)) GB free"
	log "stage $stage: ingest files $prev to $((stage - 1))"
	t0=$(date +%s.%N)
	if [ "$PROFILE" -gt 0 ]; then
		curl -fsS --max-time 40 -o "$OUT/cpu-$stage-n1.pb.gz" "http://${NODE_DEBUG[1]}/debug/pprof/profile?seconds=20" &
		cpu_pid=$!
	fi
	"$SCALE" ingest -urls "$urls" -bucket uploads -from "$prev" -to "$stage" -batch "$BATCH" -streams "$STREAMS" >"$OUT/ingest-$stage.txt" ||
		die "ingest to $stage failed (see $OUT)"
	# Every file on all three nodes: each holds a blob of each (R=3).
	deadline=$((SECONDS + 3600))
	for i in 1 2 3; do
		until [ "$(metric "$i" cairn_node_blobs)" -ge "$stage" ]; do
			[ $SECONDS -lt $deadline ] || die "node $i holds $(metric "$i" cairn_node_blobs) blobs of $stage after an hour"
			sleep 1
		done
	done
	t1=$(date +%s.%N)
	rate=$(echo "($stage - $prev) / ($t1 - $t0)" | bc -l)
	line=$(printf 'stage %d: ingest %.0f files/s (%s)' "$stage" "$rate" "$(cat "$OUT/ingest-$stage.txt")")
	for i in 1 2 3; do
		blobs=$(metric "$i" cairn_node_blobs)
		line+=$(printf '; node %d: namespace %.0f B/file, blob index %.1f B/blob, RSS %s MB' "$i" \
			"$(echo "$(meta_bytes "$i") / $stage" | bc -l)" \
			"$(echo "$(metric "$i" cairn_node_blob_index_bytes) / ($blobs + ($blobs == 0))" | bc -l)" "$(rss_mb "${NODE_PID[i]}")")
	done
	echo "$line" | tee -a "$OUT/results.txt"
	if [ "$PROFILE" -gt 0 ]; then
		wait "$cpu_pid" || true
		for i in 1 2 3; do
			curl -fsS --max-time 20 -o "$OUT/heap-$stage-n$i.pb.gz" "http://${NODE_DEBUG[i]}/debug/pprof/heap?gc=1" || true
		done
	fi
	settle # the nodes' compactions after the ingest are not what the probe measures
	p=$("$SCALE" probe -url "${NODE_URL[2]}" -bucket uploads -files "$stage" -n "$PROBES" -mount "$MNT/") || die "probe at $stage failed"
	echo "stage $stage: probe $p" | tee -a "$OUT/results.txt"
	prev=$stage
done

# restart_node NODE HOW: stop node NODE (TERM: cleanly; KILL), start it
# again on its data, and print how long until it serves a GET, and its RSS.
restart_node() {
	local i=$1 how=$2 port t0 t1 deadline
	port=${NODE_URL[i]##*:}
	kill -"$how" "${NODE_PID[i]}"
	wait "${NODE_PID[i]}" 2>/dev/null || true
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086 # SERVER_ARGS: words
	CAIRN_CLUSTER_SECRET=$CLUSTER_SECRET "$CAIRN_BIN" server --data "$CL_DIR/n$i" \
		--listen "127.0.0.1:$port" $SERVER_ARGS >>"${NODE_LOG[i]}" 2>&1 &
	NODE_PID[i]=$!
	BENCH_PIDS+=("${NODE_PID[i]}")
	deadline=$((SECONDS + 600))
	until curl -fsS -o /dev/null --max-time 2 "${NODE_URL[i]}/uploads/$(printf 'd%06d/f%08d.bin' 0 7)"; do
		[ $SECONDS -lt $deadline ] || die "node $i does not serve 10 minutes after its restart"
		sleep 0.1
	done
	t1=$(date +%s.%N)
	printf 'restart of node %d after %s: serves a GET after %.1f s, RSS %s MB\n' "$i" "$how" \
		"$(echo "$t1 - $t0" | bc -l)" "$(rss_mb "${NODE_PID[i]}")" | tee -a "$OUT/results.txt"
}
restart_node 2 TERM
restart_node 3 KILL
for i in 1 2 3; do
	printf 'after the restarts, node %d: namespace %.0f B/file (meta directory %s bytes)\n' "$i" \
		"$(echo "$(meta_bytes "$i") / $prev" | bc -l)" "$(meta_bytes "$i")" | tee -a "$OUT/results.txt"
done
# join: a fourth node joins the cluster of $prev files. It catches up on
# the namespace (a Raft snapshot, then the log's tail), serves reads, and
# pulls its share of the blobs (R=3 of 4 nodes: three quarters of them)
# in its first repair pass. Reported: the time to each, and its peak RSS
# (VmHWM) over the whole catch-up. JOIN=0 skips it; JOIN_WAIT (3600) s at
# most for each part. PROFILE=1: node 4's heap after its repair pass too.
# JOIN_ARGS: more flags of node 4 ("--role client": a client node, which
# pulls no blob; its repair pass has nothing to do).
if [ "${JOIN:-1}" = 1 ]; then
	JOIN_WAIT=${JOIN_WAIT:-3600}
	port4=$(pick_port)
	NODE_URL[4]=http://127.0.0.1:$port4
	NODE_LOG[4]=$OUT/scale-join-n4.log
	target=$(metric 1 cairn_raft_applied_index)
	t0=$(date +%s.%N)
	debug4=()
	if [ "$PROFILE" -gt 0 ]; then
		NODE_DEBUG[4]=127.0.0.1:$(pick_port)
		debug4=(--debug-listen "${NODE_DEBUG[4]}")
	fi
	# shellcheck disable=SC2086 # SERVER_ARGS, JOIN_ARGS: words
	CAIRN_CLUSTER_SECRET=$CLUSTER_SECRET "$CAIRN_BIN" server --data "$CL_DIR/n4" \
		--listen "127.0.0.1:$port4" --join "${NODE_URL[1]}" "${debug4[@]}" $SERVER_ARGS ${JOIN_ARGS:-} >"${NODE_LOG[4]}" 2>&1 &
	NODE_PID[4]=$!
	BENCH_PIDS+=("${NODE_PID[4]}")
	peak() { awk '/^VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/${NODE_PID[4]}/status" 2>/dev/null || echo "?"; }
	since() { echo "$(date +%s.%N) - $t0" | bc -l; }
	deadline=$((SECONDS + JOIN_WAIT))
	until [ "$(metric 4 cairn_raft_applied_index)" -ge "$target" ]; do
		kill -0 "${NODE_PID[4]}" 2>/dev/null || die "node 4 exited while joining (see ${NODE_LOG[4]})"
		[ $SECONDS -lt $deadline ] || die "node 4 has applied $(metric 4 cairn_raft_applied_index) of $target after $JOIN_WAIT s"
		sleep 0.5
	done
	t_ns=$(since)
	deadline=$((SECONDS + JOIN_WAIT))
	until curl -fsS -o /dev/null --max-time 2 "${NODE_URL[4]}/uploads/$(printf 'd%06d/f%08d.bin' 0 7)"; do
		[ $SECONDS -lt $deadline ] || die "node 4 does not serve a GET $JOIN_WAIT s after it caught up"
		sleep 0.2
	done
	t_get=$(since)
	deadline=$((SECONDS + JOIN_WAIT))
	until [ "$(metric 4 cairn_repair_passes_total)" -ge 1 ] && [ "$(metric 4 cairn_repair_active)" = 0 ]; do
		[ $SECONDS -lt $deadline ] || { log "node 4's first repair pass has not ended after $JOIN_WAIT s"; break; }
		sleep 1
	done
	t_blobs=$(since)
	if [ "$PROFILE" -gt 0 ]; then
		curl -fsS --max-time 20 -o "$OUT/heap-join-n4.pb.gz" "http://${NODE_DEBUG[4]}/debug/pprof/heap" || true
	fi
	printf 'join of node 4 (%s) to %d files: namespace caught up after %.1f s, serves a GET after %.1f s, first repair pass done after %.0f s holding %d blobs (pulled %d); peak RSS %s MB, RSS then %s MB\n' \
		"${JOIN_ARGS:-a data node}" "$prev" "$t_ns" "$t_get" "$t_blobs" "$(metric 4 cairn_node_blobs)" "$(metric 4 cairn_repair_pulled_blobs_total)" \
		"$(peak)" "$(rss_mb "${NODE_PID[4]}")" | tee -a "$OUT/results.txt"
fi
log "results in $OUT/results.txt"
