#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# bench/cluster.sh: benchmarks of a 3-node Cairn cluster on loopback (issue 3).
#
# Every part starts a new 3-node cluster on 127.0.0.1 (own data directory per
# node under bench/.data/run/, the same CAIRN_CLUSTER_SECRET, nodes 2 and 3
# started with --join node 1), waits for three Raft voters and for a bucket
# create to succeed, and stops it afterwards. Parts (PARTS, in this order):
#
#   prop      propagation: bench/propagate writes PROP_N files of PROP_SIZE
#             bytes one at a time through node 1, then through node 2, and
#             after each acknowledged PUT polls the two other nodes with HEAD
#             in a tight loop (deadline PROP_DEADLINE per file): the delay from
#             the acknowledgement to the first 200, p50/p99/max per node.
#             Then (as root, with /dev/fuse) a new cluster whose node 1
#             mounts a bucket once per mode of PROP_MOUNT_MODES (default
#             "flush noflush handles"; empty: none), and PROP_N files written
#             through each mount (create, write, close, no fsync): the delay
#             from close's return to the first 200 on nodes 2 and 3, the
#             mode's visibility bound (target p99 <= 1 s; over it, the
#             script exits 1).
#   read      random GETs of the small corpus (SCALE, 0.25 by default here)
#             (READ_CLIENT=1, the default: also through a fourth node, a
#             client node, cairn server --role client, with its disk cache of
#             CLIENT_CACHE bytes, 1 GiB by default; its RSS, anonymous and
#             mapped, and the size of DATA/cache are logged after the runs;
#             with PROFILE=S, the CPU profiles of node READ_NODE during the
#             first R=1 round and of the client during its first round)
#             through node READ_NODE, from a bucket with --replicas 3 (every
#             read local) and one with --replicas 1 (about two thirds remote),
#             against nginx serving the same files from the local disk; wrk
#             with THREADS threads and CONNS connections, DURATION s per run,
#             ROUNDS rounds alternating nginx, R=3, R=1 (after a WARMUP s
#             unrecorded warm-up of each), as bench/read.sh does.
#   ingest    cairn sync of the kernel tree (bench/.data/kernel/tree) into the
#             cluster (bucket --replicas 3, through node 1) against tar -x of
#             the kernel tarball into a local directory, each followed by sync,
#             alternating, ROUNDS_INGEST rounds; a new cluster per Cairn round.
#   s3sync    upload of the small corpus (SCALE) into the cluster through
#             node 1 (bucket --replicas 3, a new bucket per run) with cairn
#             sync, aws s3 sync and rclone copy, alternating, ROUNDS_S3SYNC
#             rounds: seconds and files/s, and each S3 tool's rate against
#             cairn sync's. The S3 tools use an access key with write on
#             every bucket and S3SYNC_CONC concurrent requests (aws:
#             max_concurrent_requests; rclone: --transfers and --checkers);
#             cairn sync uses --jobs SYNC_JOBS. The aws CLI and rclone come
#             from `make s3-clients` (.venv-s3, Debian's rclone). Each run
#             also reports the CPU seconds of the client (bash `times`), of
#             each server process (/proc/PID/stat) and the machine's busy
#             share (/proc/stat). S3SYNC_TOOLS picks and orders the tools;
#             RCLONE_FLAGS adds rclone flags (e.g. --s3-no-head). With
#             S3SYNC_SEAWEED=1 (default) the same aws and rclone runs go to
#             a SeaweedFS S3 server on loopback too (weed built once from
#             its Go module into ~/.cache/cairn-bench, never into the
#             repository; skipped with a message when it cannot be built),
#             so that the clients' own cost shows against another server.
#             With PROFILE=S, node 1's CPU profile is taken for S seconds
#             during each S3 tool's first run against Cairn.
#   failover  under a write load through a follower (FO_WRITERS sequential PUT
#             loops) and a read load of existing files through the third node,
#             SIGKILL the Raft leader, then (new cluster) SIGSTOP it and SIGCONT
#             it FO_AFTER s later: the longest time without an acknowledged
#             write, read failures and read p99. The leader is the one named by
#             the nodes' last "raft leader changed" log lines.
#
# Ratios are against nginx / tar measured in the same run, interleaved: the
# machine has 2 cores shared with the client and other work.
#
# Settings (environment): PARTS="prop read ingest failover" CAIRN_BIN (default:
# lib.sh's resolve_cairn_bin) SCALE=0.25 SEED=1 PROP_N=500 PROP_SIZE=1024
# PROP_DEADLINE=5s DURATION=10 ROUNDS=2 CONNS=20 THREADS=2 WARMUP=5 READ_NODE=2
# ROUNDS_INGEST=2 SYNC_JOBS=64 SPOT_CHECK=20 VERIFY=1 FO_BEFORE=3 FO_AFTER=10
# FO_WRITERS=4 FO_READERS=2 ROUNDS_S3SYNC=2 S3SYNC_CONC=16 KEEP=1 (keep scratch data) SERVER_ARGS="" (extra
# flags for every node) PROFILE=0 (seconds:
# nodes get --debug-listen and the first ingest round takes CPU profiles of
# node 1 and node 2, and of the whole cairn sync, saved next to the results).
#
# The ingest part also reports each node's CPU (utime + stime) over the
# cairn sync, per 1000 files, and its blob fsyncs; the read part reports the
# read node's cache of remote blobs (cairn_remote_cache_*).
#
# Output: tables on stdout; everything raw (node logs, CSVs, wrk output,
# table.md) under bench/.data/results/cluster-DATE/.
set -euo pipefail
SCALE=${SCALE:-0.25}
. "$(dirname "$0")/lib.sh"
# shellcheck source=bench/lib-cluster.sh
. "$(dirname "$0")/lib-cluster.sh"

PARTS=${PARTS:-"prop read ingest s3sync failover"}
ROUNDS_S3SYNC=${ROUNDS_S3SYNC:-2}
S3SYNC_CONC=${S3SYNC_CONC:-16}
S3SYNC_TOOLS=${S3SYNC_TOOLS:-"cairn aws rclone"}
S3SYNC_SEAWEED=${S3SYNC_SEAWEED:-1}
RCLONE_FLAGS=${RCLONE_FLAGS:-}
PROP_N=${PROP_N:-500}
PROP_SIZE=${PROP_SIZE:-1024}
PROP_DEADLINE=${PROP_DEADLINE:-5s}
PROP_MOUNT_MODES=${PROP_MOUNT_MODES-"flush noflush handles"}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-2}
CONNS=${CONNS:-20}
THREADS=${THREADS:-2}
WARMUP=${WARMUP:-5}
WRK_TIMEOUT=${WRK_TIMEOUT:-10s}
READ_NODE=${READ_NODE:-2}
READ_CLIENT=${READ_CLIENT:-1}
ROUNDS_INGEST=${ROUNDS_INGEST:-2}
SYNC_JOBS=${SYNC_JOBS:-64}
SPOT_CHECK=${SPOT_CHECK:-20}
VERIFY=${VERIFY:-1}
FO_BEFORE=${FO_BEFORE:-3}
FO_AFTER=${FO_AFTER:-10}
FO_WRITERS=${FO_WRITERS:-4}
FO_READERS=${FO_READERS:-2}
KERNEL_PKG=${KERNEL_PKG:-linux-source-6.1}
PROFILE=${PROFILE:-0}
# SERVER_ARGS: extra flags for every node (word-split), e.g. "--disable-mmap".
SERVER_ARGS=${SERVER_ARGS:-}
CLUSTER_SECRET=${CAIRN_CLUSTER_SECRET:-cairn-bench-cluster-secret-0000000000}
# The shared corpus directory stays at scale 1 for read.sh/ingest.sh.
[ "$SCALE" = 1 ] || CORPUS_DIR=$DATA_DIR/corpus-scale$SCALE

need_tools curl:curl wrk:wrk nginx:nginx tar:tar sha256sum:coreutils
trap cluster_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
check_quiet
resolve_cairn_bin

OUT=$DATA_DIR/results/cluster-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT" "$DATA_DIR/bin"
log "building bench/propagate"
(cd "$REPO_DIR" && go build -o "$DATA_DIR/bin/propagate" ./bench/propagate) >&2 || die "go build ./bench/propagate failed"
PROPAGATE=$DATA_DIR/bin/propagate
REV=$(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo unknown)
# CAIRN_REV: the revision CAIRN_BIN was built from, when not the checkout's HEAD.
BIN_REV=${CAIRN_REV:-$REV}
TABLE=$OUT/table.md
: >"$TABLE"
FAILED=0

# emit TEXT...: print to stdout and to table.md.
emit() { printf '%s\n' "$@" | tee -a "$TABLE"; }

kv() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }

# ---------------------------------------------------------------- prop
# prop_run LABEL FILE BUCKET PREFIX WHAT ARG...: one bench/propagate run
# through WHAT (ARG: -write URL or -dir MOUNT), polling the caller's
# others (URLs) and names; its lines go to the caller's res as
# "LABEL|node|p50|p99|max|missed" (node "put": the write itself).
prop_run() {
	local label=$1 file=$2 bucket=$3 prefix=$4 what=$5 line
	shift 5
	log "propagation: $PROP_N files of $PROP_SIZE B through $what, polling ${names[*]}"
	"$PROPAGATE" -mode prop "$@" -poll "$(IFS=,; echo "${others[*]}")" \
		-names "$(IFS=,; echo "${names[*]}")" -bucket "$bucket" -prefix "$prefix" -n "$PROP_N" \
		-size "$PROP_SIZE" -deadline "$PROP_DEADLINE" -csv "$OUT/$file.csv" \
		>"$OUT/$file.txt" 2>"$OUT/$file.err" ||
		{ cat "$OUT/$file.err" >&2; die "propagation through $what failed"; }
	cat "$OUT/$file.txt" >&2
	while read -r line; do
		case "$line" in
		PUT*) res+=("$label|put|$(kv p50_ms "$line")|$(kv p99_ms "$line")|$(kv max_ms "$line")|0") ;;
		PROP*) res+=("$label|$(kv node "$line")|$(kv p50_ms "$line")|$(kv p99_ms "$line")|$(kv max_ms "$line")|$(kv missed "$line")") ;;
		esac
	done <"$OUT/$file.txt"
}

part_prop() {
	cluster_start prop
	bucket_create prop 3
	local via others names res=()
	for via in 1 2; do
		others=() names=()
		for i in 1 2 3; do
			[ "$i" = "$via" ] && continue
			others+=("${NODE_URL[i]}")
			names+=("node$i")
		done
		prop_run "$via" "prop-via$via" prop "via$via" "node $via" -write "${NODE_URL[via]}"
	done
	local leader
	leader=$(leader_node)
	cluster_stop
	# Through node 1's mount, one mount per mode: the visibility bound of
	# each mode (written, closed, no fsync; docs/operations.md).
	local mode modes_run=()
	if [ -n "$PROP_MOUNT_MODES" ] && [ "$(id -u)" = 0 ] && [ -c /dev/fuse ]; then
		CL_MOUNT_MODES=$PROP_MOUNT_MODES CL_MOUNT_BUCKET=propm cluster_start prop-mount
		others=("${NODE_URL[2]}" "${NODE_URL[3]}") names=(node2 node3)
		for mode in $PROP_MOUNT_MODES; do
			local deadline=$((SECONDS + 60))
			until mountpoint -q "$CL_DIR/mnt-$mode"; do
				[ $SECONDS -lt $deadline ] || die "node 1's $mode mount is not mounted after 60 s"
				sleep 0.2
			done
			prop_run "1 ($mode mount)" "prop-mount-$mode" propm "$mode" "node 1's $mode mount" -dir "$CL_DIR/mnt-$mode"
			modes_run+=("$mode")
		done
		cluster_stop
	elif [ -n "$PROP_MOUNT_MODES" ]; then
		log "propagation through a mount skipped: it needs root and /dev/fuse"
	fi
	local mount_note=""
	[ ${#modes_run[@]} -eq 0 ] ||
		mount_note=" Rows \"node 1 (MODE mount)\": a second cluster, the files written through node 1's mount in that mode (${modes_run[*]}) with create, write, close and no fsync; delay = the return of close → first 200."
	emit "### Propagation" "" \
		"3-node cluster on 127.0.0.1, bucket --replicas 3; $PROP_N files of $PROP_SIZE B written one at a time; after each acknowledged PUT the other two nodes are polled with HEAD in a tight loop; delay = acknowledgement → first 200 (includes that HEAD's round trip). Raft leader during the run: node $leader.$mount_note" \
		"$(date -u +%Y-%m-%dT%H:%MZ); $(machine_info); cairn binary built from git $BIN_REV" \
		"command: PARTS=prop PROP_N=$PROP_N PROP_SIZE=$PROP_SIZE bench/cluster.sh" "" \
		"| written through | polled node | p50 ms | p99 ms | max ms | not visible within $PROP_DEADLINE |" \
		"|---|---|---:|---:|---:|---:|"
	local r f
	for r in "${res[@]}"; do
		IFS='|' read -r -a f <<<"$r"
		if [ "${f[1]}" = put ]; then
			case "${f[0]}" in
			*mount*) emit "| node ${f[0]} | (create, write, close itself) | ${f[2]} | ${f[3]} | ${f[4]} | — |" ;;
			*) emit "| node ${f[0]} | (PUT latency itself) | ${f[2]} | ${f[3]} | ${f[4]} | — |" ;;
			esac
		else
			emit "| node ${f[0]} | ${f[1]} | ${f[2]} | ${f[3]} | ${f[4]} | ${f[5]} |"
			[ "${f[5]}" = 0 ] || FAILED=1
			# A mount's bound (docs/operations.md): p99 <= 1 s.
			case "${f[0]}" in
			*mount*) awk -v p="${f[3]}" 'BEGIN { exit !(p + 0 > 1000) }' && { log "p99 over 1 s through node ${f[0]}"; FAILED=1; } ;;
			esac
		fi
	done
	emit ""
}

# ---------------------------------------------------------------- read
# run_wrk URL PREFIX OUTFILE SECS PATHS: one wrk run; prints "requests rps mbps p50 p99 bytes".
run_wrk() {
	local url=$1 prefix=$2 out=$3 secs=$4 paths=$5 rc=0 threads=$THREADS line
	[ "$threads" -le "$CONNS" ] || threads=$CONNS
	wrk -t"$threads" -c"$CONNS" -d"${secs}s" --timeout "$WRK_TIMEOUT" --latency \
		-s "$BENCH_DIR/wrk/random.lua" "$url" \
		-- "$paths" "$prefix" "$SEED" >"$out" 2>&1 || rc=$?
	line=$(grep '^BENCH_RESULT ' "$out" || true)
	if [ -z "$line" ]; then
		tail -n 20 "$out" >&2
		echo "0 0 0 0 0 0"
		return 1
	fi
	awk '{
		for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		print v["requests"], v["rps"], v["mbps"], v["p50_ms"], v["p99_ms"], v["bytes"]
	}' <<<"$line"
	[ "$rc" -eq 0 ] || { grep '^BENCH_FAIL' "$out" >&2 || true; return 1; }
}

part_read() {
	ensure_corpus small
	# The R=1 bucket gets its own corpus (seed SEED+1, same size distribution):
	# blobs are content-addressed, so the same files would share the R=3
	# bucket's local copies and no read would be remote.
	local c1=$CORPUS_DIR/small1 stamp1="seed=$((SEED + 1)) scale=$SCALE"
	if [ ! -f "$c1/paths.txt" ] || [ "$(cat "$c1.stamp" 2>/dev/null)" != "$stamp1" ]; then
		log "generating corpus small1 ($stamp1) in $c1"
		rm -rf -- "$c1" "$c1.stamp"
		(cd "$REPO_DIR" && go run ./bench/corpus -profile small -seed $((SEED + 1)) -scale "$SCALE" -out "$c1") ||
			die "corpus generation failed"
		echo "$stamp1" >"$c1.stamp"
	fi
	local corpus=$CORPUS_DIR/small mean files mean1
	files=$(wc -l <"$corpus/paths.txt")
	mean=$(find "$corpus" -type f -printf '%s\n' | awk '{s += $1; n++} END {printf "%d", s / n}')
	mean1=$(find "$c1" -type f -printf '%s\n' | awk '{s += $1; n++} END {printf "%d", s / n}')
	cluster_start read
	[ "$READ_CLIENT" != 1 ] || client_start
	bucket_create small 3
	bucket_create small1 1
	local b
	for b in small small1; do
		log "loading $CORPUS_DIR/$b into bucket $b (cairn sync through node 1)"
		ccli 1 sync "$CORPUS_DIR/$b" "$b" --no-progress --jobs "$SYNC_JOBS" >>"$OUT/cli.log" 2>&1 ||
			die "cairn sync into $b failed (see $OUT/cli.log)"
	done
	local nport
	nport=$(pick_port)
	nginx_start "$CORPUS_DIR" "$nport"
	local nurl=http://127.0.0.1:$nport curl_=${NODE_URL[READ_NODE]}
	# Every node must resolve every file before the load: wait for the last
	# path of each bucket on the read node (and the client node).
	local last deadline u
	for u in "$curl_" ${NODE_URL[4]:+"${NODE_URL[4]}"}; do
		for b in small small1; do
			last=$(tail -n1 "$CORPUS_DIR/$b/paths.txt")
			deadline=$((SECONDS + 60))
			until [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$u/$b/$last")" = 200 ]; do
				[ $SECONDS -lt $deadline ] || die "$b/$last not visible on $u"
				sleep 0.1
			done
		done
	done
	BLOBS=""
	for i in 1 2 3; do
		BLOBS+="${BLOBS:+, }node $i $(curl -fsS --max-time 5 "${NODE_URL[i]}/_cairn/metrics" | awk '/^cairn_node_blobs/ {print $2}')"
	done
	log "blobs per node after loading both buckets ($files files each): $BLOBS"
	local bn
	bn=$(curl -fsS --max-time 5 "$curl_/_cairn/metrics" | awk '/^cairn_node_blobs/ {print int($2)}')
	[ "${bn:-0}" -lt $((files * 2)) ] || die "node $READ_NODE holds $bn blobs: the R=1 bucket is not spread over the nodes"
	spot_check "$nurl/small" "$corpus" "$corpus/paths.txt" 20
	spot_check "$curl_/small" "$corpus" "$corpus/paths.txt" 20
	spot_check "$curl_/small1" "$c1" "$c1/paths.txt" 20
	local -A URL=([nginx]=$nurl [r3]=$curl_ [r1]=$curl_) PFX=([nginx]=/small/ [r3]=/small/ [r1]=/small1/) \
		PATHS=([nginx]=$corpus/paths.txt [r3]=$corpus/paths.txt [r1]=$c1/paths.txt) MEAN=([nginx]=$mean [r3]=$mean [r1]=$mean1)
	local servers="nginx r3 r1"
	if [ "$READ_CLIENT" = 1 ]; then
		# The client node (issue 36): bucket small, every blob fetched from
		# the data nodes once, then from its disk cache.
		servers+=" client"
		URL[client]=${NODE_URL[4]} PFX[client]=/small/ PATHS[client]=$corpus/paths.txt MEAN[client]=$mean
	fi
	local csv=$OUT/read.csv s r res reqs rps mbps p50 p99 bytes status
	echo "round,server,requests,rps,mbps,p50,p99,status" >"$csv"
	for s in $servers; do
		log "warm-up $s ${WARMUP}s"
		run_wrk "${URL[$s]}" "${PFX[$s]}" "$OUT/wrk-warmup-$s.txt" "$WARMUP" "${PATHS[$s]}" >/dev/null ||
			die "warm-up against $s failed (see $OUT/wrk-warmup-$s.txt)"
	done
	for r in $(seq 1 "$ROUNDS"); do
		for s in $servers; do
			status=ok
			if [ "$PROFILE" -gt 0 ] && [ "$r" = 1 ] && { [ "$s" = r1 ] || [ "$s" = client ]; }; then
				# The serving node's CPU profile (node READ_NODE for r1, the
				# client node 4 for client), PROFILE s from 1 s into round 1.
				local pn=$READ_NODE
				[ "$s" = r1 ] || pn=4
				(sleep 1 && curl -fsS --max-time $((PROFILE + 30)) -o "$OUT/read-$s-n$pn.cpu.pprof" \
					"http://${NODE_DEBUG[pn]}/debug/pprof/profile?seconds=$PROFILE") &
			fi
			res=$(run_wrk "${URL[$s]}" "${PFX[$s]}" "$OUT/wrk-r$r-$s.txt" "$DURATION" "${PATHS[$s]}") || status=FAIL
			read -r reqs rps mbps p50 p99 bytes <<<"$res"
			if [ "$status" = ok ] && [ "${reqs:-0}" -ge 500 ] &&
				! awk -v b="$bytes" -v n="$reqs" -v m="${MEAN[$s]}" 'BEGIN {exit !(b / n >= 0.8 * m)}'; then
				log "$s: responses average $((bytes / reqs)) B, the files ${MEAN[$s]} B"
				status=FAIL
			fi
			[ "$status" = ok ] || FAILED=1
			log "read round $r $s: $rps req/s, $mbps MB/s, p50 $p50 ms, p99 $p99 ms ($status)"
			echo "$r,$s,$reqs,$rps,$mbps,$p50,$p99,$status" >>"$csv"
		done
	done
	local mtx
	mtx=$(curl -fsS --max-time 5 "$curl_/_cairn/metrics")
	BLOBS_AFTER=$(awk '/^cairn_node_blobs/ {print $2}' <<<"$mtx")
	# The in-memory cache of remote blobs (--remote-cache-bytes; 0 when the
	# binary has none).
	CACHE=$(awk '/^cairn_remote_cache_(hits_total|misses_total|entries|max_bytes) / {sub(/^cairn_remote_cache_/, "", $1); printf "%s%s %.0f", sep, $1, $2; sep = ", "}' <<<"$mtx")
	log "blobs on node $READ_NODE after the runs: $BLOBS_AFTER; remote cache: ${CACHE:-none}"
	local CCACHE=""
	if [ "$READ_CLIENT" = 1 ]; then
		CCACHE=$(curl -fsS --max-time 5 "${NODE_URL[4]}/_cairn/metrics" | awk '/^cairn_remote_cache_(hits_total|misses_total|entries|bytes|evictions_total) / {sub(/^cairn_remote_cache_/, "", $1); printf "%s%s %.0f", sep, $1, $2; sep = ", "}')
		CCACHE+="; RSS $(awk '/VmRSS/ {r = int($2 / 1024)} /RssAnon/ {a = int($2 / 1024)} /RssFile/ {f = int($2 / 1024)} END {print r " MB (anonymous " a " MB, mapped files " f " MB)"}' "/proc/${NODE_PID[4]}/status"); DATA/cache $(du -sm "$CL_DIR/n4/cache" | cut -f1) MB (bound ${CLIENT_CACHE:-1073741824} B)"
		log "client node 4's disk cache after the runs: $CCACHE"
	fi
	local leader
	leader=$(leader_node)
	stop_pid "$NGINX_PID"
	cluster_stop
	emit "### Reads on one node of the cluster" "" \
		"Random GET of the small corpus ($files files, SCALE=$SCALE, mean $mean B) through node $READ_NODE of a 3-node cluster (leader: node $leader): bucket small with --replicas 3 (every read local) and bucket small1 with --replicas 1 holding a second corpus of the same profile (seed $((SEED + 1)), mean $mean1 B; its own content, so about 2/3 of its reads are fetched from another node), vs nginx serving the seed-$SEED corpus from the local disk. Blobs per node after loading both (expect about $files + $files/3 each): $BLOBS; on node $READ_NODE after the runs: $BLOBS_AFTER (the cache of remote blobs is in memory: it does not add to this count). Remote-blob cache of node $READ_NODE after the runs (warm-ups included): ${CACHE:-none (binary without one)}. ${CCACHE:+With READ_CLIENT=1 a fourth node, a client node (--role client: no blob of its own, a disk cache), reads bucket small; its cache after the runs: $CCACHE. }wrk $THREADS threads, $CONNS connections, ${DURATION}s per run, $ROUNDS rounds alternating nginx, R=3, R=1${CCACHE:+, client}; best round and mean." \
		"$(date -u +%Y-%m-%dT%H:%MZ); $(machine_info); cairn binary built from git $BIN_REV" \
		"command: PARTS=read SCALE=$SCALE DURATION=$DURATION ROUNDS=$ROUNDS CONNS=$CONNS bench/cluster.sh" ""
	awk -F, '
	NR == 1 { next }
	{ if ($8 != "ok") { fail[$2] = 1; next }
	  sum[$2] += $4; cnt[$2]++
	  if (!($2 in best) || $4 > best[$2]) { best[$2] = $4; mb[$2] = $5; p50[$2] = $6; p99[$2] = $7 }
	  raw[$2] = raw[$2] (raw[$2] == "" ? "" : " / ") sprintf("%.0f", $4) }
	function r(a, b) { return (b + 0 == 0) ? "—" : sprintf("%.2f", a / b) }
	END {
		print "| server | req/s (best) | rounds req/s | MB/s | p50 ms | p99 ms | /nginx (best) | /nginx (mean) |"
		print "|---|---:|---|---:|---:|---:|---:|---:|"
		n = split("nginx r3 r1 client", order, " ")
		label["nginx"] = "nginx (local disk)"; label["r3"] = "Cairn R=3 (local)"; label["r1"] = "Cairn R=1 (2/3 remote)"
		label["client"] = "Cairn client node (R=3 bucket, disk cache)"
		for (i = 1; i <= n; i++) {
			if (order[i] == "client" && !("client" in cnt) && !("client" in fail)) continue
			s = order[i]
			if (!(s in best)) { printf "| %s | FAILED | | | | | | |\n", label[s]; continue }
			mn = sum[s] / cnt[s]; mng = ("nginx" in cnt) ? sum["nginx"] / cnt["nginx"] : 0
			printf "| %s | %.0f | %s | %.1f | %.2f | %.2f | %s | %s |\n", label[s], best[s], raw[s], mb[s], p50[s], p99[s],
				(s == "nginx" ? "—" : r(best[s], best["nginx"])), (s == "nginx" ? "—" : r(mn, mng))
		}
		for (s in fail) printf "\nFAILED: %s (see the raw wrk output)\n", s
	}' "$csv" | tee -a "$TABLE"
	emit ""
}

# ---------------------------------------------------------------- ingest
# cairn_count NODE BUCKET: the number of files in BUCKET (listing API).
cairn_count() { cairn_count_at "${NODE_URL[$1]}" "$2"; }

now() { echo "$EPOCHREALTIME"; }
# metric NODE NAME: the value of metric NAME on node NODE (0 if absent).
metric() {
	curl -fsS --max-time 5 "${NODE_URL[$1]}/_cairn/metrics" 2>/dev/null |
		awk -v n="$2" '$1 == n {v = $2} END {printf "%.0f", v + 0}'
}
# machine_ticks: "busy total" clock ticks of all CPUs so far (/proc/stat; idle
# and iowait count as not busy).
# shellcheck disable=SC2317 # called from part_s3sync
machine_ticks() { awk '$1 == "cpu" {t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t}' /proc/stat; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", b - a}'; }

part_ingest() {
	local kdir=$DATA_DIR/kernel ktar tree files links bytes
	ktar=$kdir/$KERNEL_PKG.tar
	{ [ -f "$ktar" ] && [ -f "$kdir/tree.done" ]; } ||
		die "no $ktar or extracted tree: run WORKLOADS=kernel BASELINE_ONLY=1 ROUNDS=1 bench/ingest.sh once"
	tree=$(find "$kdir/tree" -mindepth 1 -maxdepth 1 -type d | head -n1)
	(cd "$tree" && find . -type f -printf '%P\n') >"$OUT/kernel.paths"
	files=$(wc -l <"$OUT/kernel.paths")
	links=$(find "$tree" -type l | wc -l)
	bytes=$(find "$tree" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
	log "kernel: $files files, $links symlinks, $bytes bytes; reading tree and tarball once"
	tar -cf - -C "$tree" . | cat >/dev/null
	cat "$ktar" >/dev/null
	local csv=$OUT/ingest.csv r t0 t1 dest got status leader="" c0 c1 f0 i
	echo "round,method,seconds,status" >"$csv"
	echo "round,n1_cpu_s,n2_cpu_s,n3_cpu_s,n1_fsyncs,n2_fsyncs,n3_fsyncs,batches,batched_blobs,client_cpu_s,machine_busy" >"$OUT/ingest-cpu.csv"
	for r in $(seq 1 "$ROUNDS_INGEST"); do
		scratch_dir dest ingest-tar
		sync
		t0=$(now)
		status=ok
		tar -xf "$ktar" -C "$dest" || status=FAIL
		sync
		t1=$(now)
		echo "$r,tar -x,$(elapsed "$t0" "$t1"),$status" >>"$csv"
		log "ingest round $r: tar -x + sync $(elapsed "$t0" "$t1") s ($status)"
		rm -rf -- "$dest"
		[ "$status" = ok ] || FAILED=1

		cluster_start ingest
		bucket_create kernel 3
		leader+="${leader:+, }$(leader_node)"
		sync
		c0=() f0=()
		for i in 1 2 3; do
			c0[i]=$(pid_ticks "${NODE_PID[i]}")
			f0[i]=$(metric "$i" cairn_fsync_duration_seconds_count)
		done
		t0=$(now)
		status=ok
		local prof=()
		if [ "$PROFILE" -gt 0 ] && [ "$r" = 1 ]; then
			# CPU profiles of node 1 (takes the writes) and node 2 (a
			# replica), PROFILE s long, starting 3 s into the first round.
			for i in 1 2; do
				(sleep 3 && curl -fsS --max-time $((PROFILE + 30)) -o "$OUT/ingest-n$i.cpu.pprof" \
					"http://${NODE_DEBUG[i]}/debug/pprof/profile?seconds=$PROFILE") &
				prof+=($!)
			done
		fi
		local m0 m1 cli_cpu
		m0=$(machine_ticks)
		# The client's CPU (user + system) from bash's own `time`.
		local cliprof=""
		[ "$PROFILE" -gt 0 ] && [ "$r" = 1 ] && cliprof=$OUT/ingest-client.cpu.pprof
		cli_cpu=$({ TIMEFORMAT='%U %S'; time CAIRN_CPUPROFILE=$cliprof ccli 1 sync "$tree" kernel --no-progress --jobs "$SYNC_JOBS" >>"$OUT/ingest-cli-r$r.log" 2>&1 || echo FAIL >"$OUT/ingest-status"; } 2>&1 | awk '{printf "%.1f", $1 + $2}')
		if [ -f "$OUT/ingest-status" ]; then status=FAIL; rm -f "$OUT/ingest-status"; fi
		m1=$(machine_ticks)
		sync
		t1=$(now)
		echo "$r,cairn sync,$(elapsed "$t0" "$t1"),$status" >>"$csv"
		c1=$r
		for i in 1 2 3; do c1+=,$(awk -v a="${c0[i]}" -v b="$(pid_ticks "${NODE_PID[i]}")" -v t="$CLK_TCK" 'BEGIN {printf "%.1f", (b - a) / t}'); done
		for i in 1 2 3; do c1+=,$(($(metric "$i" cairn_fsync_duration_seconds_count) - f0[i])); done
		c1+=,$(metric 1 cairn_replica_put_batches_total),$(metric 1 cairn_replica_put_batched_blobs_total)
		c1+=,$cli_cpu,$(awk -v a="$m0" -v b="$m1" 'BEGIN {split(a, x, " "); split(b, y, " "); if (y[2] > x[2]) printf "%.2f", (y[1] - x[1]) / (y[2] - x[2]); else print 0}')
		echo "$c1" >>"$OUT/ingest-cpu.csv"
		log "ingest round $r: server CPU s (node 1, 2, 3): ${c1#*,}"
		log "ingest round $r: cairn sync (3 nodes, R=3) + sync $(elapsed "$t0" "$t1") s ($status)"
		if [ "$status" != ok ]; then
			tail -n 20 "$OUT/ingest-cli-r$r.log" >&2
			FAILED=1
		else
			if [ "$VERIFY" = 1 ]; then
				for i in 1 3; do
					got=$(cairn_count "$i" kernel) || die "listing bucket kernel on node $i failed"
					if [ "$got" -ne "$files" ] && [ "$got" -ne $((files + links)) ]; then
						log "node $i lists $got files; source has $files (+$links symlinks)"
						FAILED=1
					else
						log "node $i lists $got files"
					fi
				done
			fi
			spot_check "${NODE_URL[3]}/kernel" "$tree" "$OUT/kernel.paths" "$SPOT_CHECK"
		fi
		if [ ${#prof[@]} -gt 0 ]; then
			wait "${prof[@]}" || log "a CPU profile could not be taken"
			log "CPU profiles: $OUT/ingest-n1.cpu.pprof, $OUT/ingest-n2.cpu.pprof, $OUT/ingest-client.cpu.pprof (whole sync) (go tool pprof $CAIRN_BIN FILE)"
		fi
		du -sh "$CL_DIR"/n1 "$CL_DIR"/n2 "$CL_DIR"/n3 >&2 || true
		cluster_stop
	done
	emit "### Ingest: kernel tree into the cluster" "" \
		"cairn sync --jobs $SYNC_JOBS of the Linux 6.1 tree ($files files, $links symlinks, $(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1e6}') MB) through node 1 into a new 3-node cluster, bucket --replicas 3 (write quorum 2), vs tar -xf of the plain tarball into a local directory on the same disk; each followed by sync; $ROUNDS_INGEST rounds alternating. Leader per round: node $leader." \
		"$(date -u +%Y-%m-%dT%H:%MZ); $(machine_info); cairn binary built from git $BIN_REV" \
		"command: PARTS=ingest ROUNDS_INGEST=$ROUNDS_INGEST SYNC_JOBS=$SYNC_JOBS bench/cluster.sh" ""
	awk -F, -v files="$files" '
	NR == 1 { next }
	{ raw[$2] = raw[$2] (raw[$2] == "" ? "" : " / ") ($4 == "ok" ? sprintf("%.2f", $3) : "FAIL") }
	$4 != "ok" { next }
	{ sum[$2] += $3; cnt[$2]++; if (!($2 in best) || $3 < best[$2]) best[$2] = $3 }
	END {
		print "| method | rounds s | best s | mean s | files/s (best) | Cairn/tar (best) | Cairn/tar (mean) |"
		print "|---|---|---:|---:|---:|---:|---:|"
		split("tar -x|cairn sync", m, "|")
		for (i = 1; i <= 2; i++) {
			k = m[i]
			if (!(k in best)) { printf "| %s | %s | FAILED | | | | |\n", k, raw[k]; continue }
			rb = "—"; rm = "—"
			if (k == "cairn sync" && ("tar -x" in best)) {
				rb = sprintf("%.2f", best[k] / best["tar -x"])
				rm = sprintf("%.2f", (sum[k] / cnt[k]) / (sum["tar -x"] / cnt["tar -x"]))
			}
			printf "| %s | %s | %.2f | %.2f | %.0f | %s | %s |\n", (k == "tar -x" ? "tar -x + sync" : "cairn sync, 3 nodes R=3, + sync"), raw[k], best[k], sum[k] / cnt[k], files / best[k], rb, rm
		}
	}' "$csv" | tee -a "$TABLE"
	emit "" "Server CPU (utime + stime from /proc/PID/stat over the cairn sync; node 1 takes the writes; less sensitive to other load than the wall time), blob-store fsyncs (cairn_fsync_duration_seconds_count) node 1's batched blob writes (cairn_replica_put_batches_total / _batched_blobs_total; 0 for a binary without batching), the client's CPU (cairn sync) and the share of the machine's CPUs busy over the cairn sync (all processes, /proc/stat; 1.00 = both cores saturated):" ""
	awk -F, -v files="$files" '
	NR == 1 { print "| round | CPU s node 1 / 2 / 3 | CPU s per 1000 files, node 1 / 2 / 3 | blob fsyncs node 1 / 2 / 3 | batches / blobs in them | client CPU s | machine busy |"; print "|---|---|---|---|---|---:|---:|"; next }
	{ printf "| %s | %s / %s / %s | %.3f / %.3f / %.3f | %s / %s / %s | %s / %s | %s | %s |\n", $1, $2, $3, $4, $2 / files * 1000, $3 / files * 1000, $4 / files * 1000, $5, $6, $7, $8, $9, $10, $11 }' "$OUT/ingest-cpu.csv" | tee -a "$TABLE"
	emit ""
}

# ---------------------------------------------------------------- failover
part_failover() {
	local sig res=() leader w rd line
	for sig in KILL STOP; do
		cluster_start "failover-$sig"
		bucket_create failover 3
		leader=$(leader_node)
		[ "$leader" != "?" ] || die "could not find the Raft leader in the node logs"
		# writes through a follower, reads through the third node
		w="" rd=""
		for i in 1 2 3; do
			[ "$i" = "$leader" ] && continue
			if [ -z "$w" ]; then w=$i; else rd=$i; fi
		done
		log "failover $sig: leader node $leader (pid ${NODE_PID[leader]}), writes via node $w, reads via node $rd"
		"$PROPAGATE" -mode failover -write "${NODE_URL[w]}" -read "${NODE_URL[rd]}" -bucket failover \
			-pid "${NODE_PID[leader]}" -signal "$sig" -before "${FO_BEFORE}s" -after "${FO_AFTER}s" \
			-writers "$FO_WRITERS" -readers "$FO_READERS" -size 4096 \
			>"$OUT/failover-$sig.txt" 2>"$OUT/failover-$sig.err" ||
			{ cat "$OUT/failover-$sig.err" >&2; die "failover helper ($sig) failed"; }
		cat "$OUT/failover-$sig.txt" "$OUT/failover-$sig.err" >&2
		line=$(grep '^FAILOVER' "$OUT/failover-$sig.txt")
		local newl
		newl=$(grep -h 'msg="raft leader changed"' "${NODE_LOG[w]}" "${NODE_LOG[rd]}" | tail -n1 | sed -n 's/.*\(time=[^ ]*\).* leader=\([0-9]*\).*/\1 \2/p')
		res+=("$sig|$leader|$w|$rd|$(kv gap_ms "$line")|$(kv first_ok_ms "$line")|$(kv writes_before "$line")|$(kv writes_after "$line")|$(kv write_errors "$line")|$(kv reads "$line")|$(kv read_failures "$line")|$(kv read_p99_ms "$line")|$(kv read_max_ms "$line")")
		local newid newnode="?"
		newid=${newl##* }
		for i in 1 2 3; do [ "${NODE_ID[i]}" = "$newid" ] && newnode=$i; done
		res[${#res[@]} - 1]+="|$newnode"
		log "failover $sig: last leader change seen by the survivors: $newl (node $newnode)"
		cluster_stop
	done
	emit "### Failover" "" \
		"3-node cluster, bucket --replicas 3; $FO_WRITERS sequential PUT loops of 4 KB files through a follower (2 s timeout per PUT) and $FO_READERS GET loops of 200 preloaded files through the third node; ${FO_BEFORE}s of load, then the Raft leader (found from the nodes' \"raft leader changed\" log lines, not /_cairn/nodes) gets the signal, load continues ${FO_AFTER}s (for SIGSTOP: then SIGCONT and 3 s more). Write gap = longest interval between consecutive acknowledged writes that ends after the signal; a new cluster per signal." \
		"$(date -u +%Y-%m-%dT%H:%MZ); $(machine_info); cairn binary built from git $BIN_REV" \
		"command: PARTS=failover FO_AFTER=$FO_AFTER FO_WRITERS=$FO_WRITERS bench/cluster.sh" "" \
		"| signal to leader | leader | new leader | writes via | reads via | longest write gap ms | first write after signal ms | writes before / after | write errors | reads | read failures | read p99 ms | read max ms |" \
		"|---|---|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|"
	local r f
	for r in "${res[@]}"; do
		IFS='|' read -r -a f <<<"$r"
		emit "| SIG${f[0]} | node ${f[1]} | node ${f[13]} | node ${f[2]} | node ${f[3]} | ${f[4]} | ${f[5]} | ${f[6]} / ${f[7]} | ${f[8]} | ${f[9]} | ${f[10]} | ${f[11]} | ${f[12]} |"
	done
	emit ""
}

# ---------------------------------------------------------------- s3sync
# cpu_secs FILE: the children's user + system seconds in the output of
# bash's `times` saved in FILE (its second line).
cpu_secs() {
	sed -n 2p "$1" | awk '{
		t = 0
		for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]); t += a[1] * 60 + a[2] }
		printf "%.2f", t
	}'
}
# machine_ticks: busy and total clock ticks of every CPU so far (/proc/stat).
# shellcheck disable=SC2317 # called from part_s3sync
machine_ticks() { awk '/^cpu / {t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t}' /proc/stat; }

# weed_bin: a SeaweedFS `weed` for the s3sync comparison, built on first use
# from its Go module (WEED_VERSION) into WEED_CACHE, outside the repository;
# prints nothing (and returns 1) when it cannot be had.
WEED_MODULE=github.com/seaweedfs/seaweedfs
WEED_VERSION=${WEED_VERSION:-v0.0.0-20261109003541-7506e5f91cd6}
WEED_CACHE=${WEED_CACHE:-$HOME/.cache/cairn-bench}
weed_bin() {
	local bin=$WEED_CACHE/bin/weed-$WEED_VERSION dir
	if [ ! -x "$bin" ]; then
		mkdir -p "$WEED_CACHE/bin"
		log "building SeaweedFS weed $WEED_VERSION into $WEED_CACHE (once; several minutes)"
		# Its go.mod has replace directives, so `go install mod@version`
		# refuses it: build it as the main module from the module cache.
		dir=$(cd /tmp && go mod download -json "$WEED_MODULE@$WEED_VERSION" 2>>"$OUT/weed-build.log" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p') || return 1
		[ -n "$dir" ] || return 1
		(cd "$dir" && nice -n 10 go build -o "$bin.tmp" ./weed) >>"$OUT/weed-build.log" 2>&1 || return 1
		mv "$bin.tmp" "$bin"
	fi
	echo "$bin"
}

# weed_start DIR ID SECRET: start a single SeaweedFS server with its S3
# gateway on loopback (master, volume, filer and s3 in one process, data in
# DIR, the key ID/SECRET allowed everything); sets WEED_PID and WEED_URL.
weed_start() {
	local dir=$1 id=$2 secret=$3
	mkdir -p "$dir/data"
	printf '{"identities":[{"name":"bench","credentials":[{"accessKey":"%s","secretKey":"%s"}],"actions":["Admin","Read","List","Tagging","Write"]}]}\n' \
		"$id" "$secret" >"$dir/s3.json"
	local ports=() i
	for i in $(seq 1 10); do ports+=("$(pick_port)"); done
	"$WEED" server -ip=127.0.0.1 -ip.bind=127.0.0.1 -dir="$dir/data" \
		-master.port="${ports[0]}" -master.port.grpc="${ports[1]}" -master.volumeSizeLimitMB=1024 \
		-volume.port="${ports[2]}" -volume.port.grpc="${ports[3]}" -volume.max=0 \
		-filer -filer.port="${ports[4]}" -filer.port.grpc="${ports[5]}" \
		-s3 -s3.port="${ports[6]}" -s3.port.grpc="${ports[7]}" -s3.port.iceberg="${ports[8]}" -s3.port.lance="${ports[9]}" \
		-s3.config="$dir/s3.json" >"$dir/weed.log" 2>&1 &
	WEED_PID=$!
	BENCH_PIDS+=("$WEED_PID")
	WEED_URL=http://127.0.0.1:${ports[6]}
	local deadline=$((SECONDS + 90))
	# Any HTTP answer from the S3 port (403 to an unsigned request) will do.
	until curl -sS -o /dev/null -w '%{http_code}' "$WEED_URL/" 2>/dev/null | grep -q '^[1-5]'; do
		kill -0 "$WEED_PID" 2>/dev/null || { log "weed exited (see $dir/weed.log)"; return 1; }
		[ $SECONDS -lt $deadline ] || { log "weed did not answer in 90 s (see $dir/weed.log)"; return 1; }
		sleep 0.5
	done
	log "SeaweedFS $WEED_PID, S3 on $WEED_URL (log: $dir/weed.log)"
}

part_s3sync() {
	local corpus=$CORPUS_DIR/small aws rclone r tool b t0 t1 secs n csv=$OUT/s3sync.csv keyenv server run status got busy p
	ensure_corpus small
	n=$(find "$corpus" -type f | wc -l) # paths.txt is uploaded too
	aws=$REPO_DIR/.venv-s3/bin/aws
	if [ ! -x "$aws" ] || ! have rclone; then
		log "installing the S3 clients (make s3-clients)"
		make -C "$REPO_DIR" s3-clients >&2 || die "make s3-clients failed"
	fi
	have rclone || die "no rclone"
	rclone=$(command -v rclone)
	WEED=""
	if [ "$S3SYNC_SEAWEED" = 1 ]; then
		WEED=$(weed_bin) || WEED=""
		[ -n "$WEED" ] || log "SKIPPED: the SeaweedFS comparison (weed $WEED_VERSION could not be built; see $OUT/weed-build.log)"
	fi
	cluster_start s3sync
	bucket_create warmup 3
	keyenv=$(ccli 1 key create bench-s3sync --env) || die "key create failed"
	local akid asecret
	akid=$(sed -n 's/^export AWS_ACCESS_KEY_ID=\([^ ]*\) .*/\1/p' <<<"$keyenv")
	asecret=$(sed -n 's/.* AWS_SECRET_ACCESS_KEY=\(.*\)$/\1/p' <<<"$keyenv")
	if [ -n "$WEED" ]; then
		weed_start "$OUT/weed" "$akid" "$asecret" || { log "SKIPPED: the SeaweedFS comparison (weed did not start)"; WEED=""; }
	fi
	local home=$OUT/s3sync-home
	mkdir -p "$home"
	printf '[default]\ns3 =\n  max_concurrent_requests = %s\n  addressing_style = path\n' "$S3SYNC_CONC" >"$home/config"
	s3env() {
		local url=$1
		shift
		env -u AWS_CA_BUNDLE -u AWS_PROFILE HOME="$home" AWS_CONFIG_FILE="$home/config" AWS_SHARED_CREDENTIALS_FILE=/dev/null \
			AWS_ACCESS_KEY_ID="$akid" AWS_SECRET_ACCESS_KEY="$asecret" AWS_DEFAULT_REGION=us-east-1 \
			RCLONE_CONFIG="$home/rclone.conf" RCLONE_CONFIG_C_TYPE=s3 RCLONE_CONFIG_C_PROVIDER=Other \
			RCLONE_CONFIG_C_ACCESS_KEY_ID="$akid" RCLONE_CONFIG_C_SECRET_ACCESS_KEY="$asecret" \
			RCLONE_CONFIG_C_ENDPOINT="$url" RCLONE_CONFIG_C_FORCE_PATH_STYLE=true "$@"
	}
	if [ -n "$WEED" ]; then
		# The gateway answers before its filer and volume server are ready:
		# wait until a bucket can be made and written.
		local deadline=$((SECONDS + 90))
		until s3env "$WEED_URL" "$rclone" copy "$corpus/paths.txt" c:warmup-bucket >>"$OUT/s3sync-weed.log" 2>&1; do
			[ $SECONDS -lt $deadline ] || { log "SKIPPED: the SeaweedFS comparison (no write passed in 90 s; see $OUT/s3sync-weed.log)"; WEED=""; break; }
			sleep 1
		done
	fi
	# Warm the page cache with the corpus, as every tool reads it.
	tar -cf - -C "$corpus" . | cat >/dev/null
	local runs
	echo "round,server,tool,seconds,files_per_s,status,client_cpu,node1_cpu,node2_cpu,node3_cpu,busy_pct" >"$csv"
	for r in $(seq 1 "$ROUNDS_S3SYNC"); do
		runs=""
		for tool in $S3SYNC_TOOLS; do runs="$runs cairn:$tool"; done
		if [ -n "$WEED" ]; then
			for tool in $S3SYNC_TOOLS; do [ "$tool" = cairn ] || runs="$runs weed:$tool"; done
		fi
		for run in $runs; do
			server=${run%%:*} tool=${run#*:}
			b=s3sync-$tool-$r
			local url=${NODE_URL[1]} pids=("${NODE_PID[@]}")
			if [ "$server" = weed ]; then
				url=$WEED_URL pids=("$WEED_PID")
				s3env "$url" "$aws" --endpoint-url "$url" s3api create-bucket --bucket "$b" >>"$OUT/s3sync-weed.log" 2>&1 ||
					die "create-bucket $b on SeaweedFS failed (see $OUT/s3sync-weed.log)"
			else
				bucket_create "$b" 3
			fi
			status=ok
			local before=() after=() m0 m1 tf=$OUT/s3sync-$server-$tool-$r.times
			for p in "${pids[@]}"; do before+=("$(pid_ticks "$p")"); done
			local prof_pid=""
			if [ "$PROFILE" -gt 0 ] && [ "$r" = 1 ] && [ "$server" = cairn ] && [ "$tool" != cairn ]; then
				# node 1 (the tools' endpoint), PROFILE s from 1 s into the run
				(sleep 1 && curl -fsS --max-time $((PROFILE + 30)) -o "$OUT/s3sync-$tool-n1.cpu.pprof" \
					"http://${NODE_DEBUG[1]}/debug/pprof/profile?seconds=$PROFILE") &
				prof_pid=$!
			fi
			m0=$(machine_ticks)
			t0=$(now)
			# shellcheck disable=SC2086 # RCLONE_FLAGS: several flags
			case $tool in
			cairn) (ccli 1 sync "$corpus" "$b" --no-progress --jobs "$SYNC_JOBS" >>"$OUT/s3sync-$tool.log" 2>&1; rc=$?; times >"$tf"; exit $rc) || status=FAIL ;;
			aws) (s3env "$url" "$aws" --endpoint-url "$url" s3 sync --only-show-errors "$corpus" "s3://$b/" >>"$OUT/s3sync-$server-$tool.log" 2>&1; rc=$?; times >"$tf"; exit $rc) || status=FAIL ;;
			rclone) (s3env "$url" "$rclone" copy --transfers "$S3SYNC_CONC" --checkers "$S3SYNC_CONC" $RCLONE_FLAGS "$corpus" "c:$b" >>"$OUT/s3sync-$server-$tool.log" 2>&1; rc=$?; times >"$tf"; exit $rc) || status=FAIL ;;
			esac
			t1=$(now)
			m1=$(machine_ticks)
			for p in "${pids[@]}"; do after+=("$(pid_ticks "$p")"); done
			secs=$(elapsed "$t0" "$t1")
			if [ -n "$prof_pid" ]; then
				if wait "$prof_pid"; then
					log "CPU profile of node 1 during $tool: $OUT/s3sync-$tool-n1.cpu.pprof (go tool pprof $CAIRN_BIN FILE)"
				else
					log "no CPU profile of node 1 during $tool"
				fi
			fi
			if [ "$server" = weed ]; then
				got=$(s3env "$url" "$rclone" lsf -R --files-only "c:$b" 2>/dev/null | wc -l)
			else
				got=$(cairn_count "1" "$b" 2>/dev/null || echo "?")
			fi
			[ "$got" = "$n" ] || { log "s3sync: $server $tool round $r stored $got of $n files"; status=FAIL; }
			[ "$status" = ok ] || FAILED=1
			local cpu=() i
			for i in "${!pids[@]}"; do cpu+=("$(awk -v a="${before[i]}" -v b="${after[i]}" -v hz="$CLK_TCK" 'BEGIN {printf "%.2f", (b - a) / hz}')"); done
			[ "${#cpu[@]}" = 3 ] || cpu+=("" "")
			busy=$(awk -v a="$m0" -v b="$m1" 'BEGIN {split(a, x, " "); split(b, y, " "); printf "%.0f", 100 * (y[1] - x[1]) / (y[2] - x[2])}')
			log "s3sync round $r: $server $tool $secs s ($status); CPU s: client $(cpu_secs "$tf"), server ${cpu[*]}; machine busy $busy%"
			echo "$r,$server,$tool,$secs,$(awk -v n="$n" -v s="$secs" 'BEGIN {printf "%.0f", n / s}'),$status,$(cpu_secs "$tf"),${cpu[0]},${cpu[1]},${cpu[2]},$busy" >>"$csv"
		done
	done
	cluster_stop
	[ -z "$WEED" ] || stop_pid "$WEED_PID"
	emit "### S3 upload tools against cairn sync (3 nodes, R=3, through node 1), $(date -u +%Y-%m-%dT%H:%MZ)" "" \
		"$(machine_info); corpus small, SCALE=$SCALE ($n files); aws CLI $("$aws" --version 2>&1 | cut -d' ' -f1), $("$rclone" version 2>/dev/null | head -n1)${WEED:+; SeaweedFS $WEED_VERSION (one weed server -s3, replication 000)}" \
		"command: PARTS=s3sync SCALE=$SCALE ROUNDS_S3SYNC=$ROUNDS_S3SYNC S3SYNC_CONC=$S3SYNC_CONC SYNC_JOBS=$SYNC_JOBS S3SYNC_TOOLS=\"$S3SYNC_TOOLS\" S3SYNC_SEAWEED=$S3SYNC_SEAWEED RCLONE_FLAGS=\"$RCLONE_FLAGS\" bench/cluster.sh" "" \
		"CPU: seconds of user + system time over the run, per 1000 files; share = of the 2 cores over the run's wall time (client: the tool's process; server: Cairn's 3 nodes, or weed)." "" \
		"| server | tool | mean s | files/s | rate / cairn sync | client CPU ms/1000 files | server CPU ms/1000 files | client share | server share | machine busy | rounds ok |" \
		"|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	local row
	while IFS= read -r row; do emit "$row"; done < <(awk -F, -v n="$n" -v ncpu="$(nproc)" '
		NR == 1 { next }
		{ k = $2 " " $3; all[k]++; if (!(k in seen)) { seen[k] = 1; order[++no] = k } }
		$6 == "ok" { s[k] += $4; c[k]++; cl[k] += $7; sv[k] += $8 + $9 + $10; busy[k] += $11 }
		END {
			base = (c["cairn cairn"] ? s["cairn cairn"] / c["cairn cairn"] : 0)
			for (i = 1; i <= no; i++) {
				k = order[i]; split(k, kk, " "); m = (c[k] ? s[k] / c[k] : 0)
				if (!c[k]) { printf "| %s | %s | — | — | — | — | — | — | — | — | 0/%d |\n", kk[1], kk[2], all[k]; continue }
				printf "| %s | %s | %.2f | %.0f | %s | %.0f | %.0f | %.0f%% | %.0f%% | %.0f%% | %d/%d |\n", kk[1], kk[2], m, n / m,
					(base ? sprintf("%.2f", base / m) : "—"), 1e6 * cl[k] / c[k] / n, 1e6 * sv[k] / c[k] / n,
					100 * cl[k] / s[k] / ncpu, 100 * sv[k] / s[k] / ncpu, busy[k] / c[k], c[k], all[k]
			}
		}' "$csv")
	emit ""
}

log "cluster benchmarks: $PARTS; binary $CAIRN_BIN; git $REV; results in $OUT"
for p in $PARTS; do
	case "$p" in
	prop) part_prop ;;
	read) part_read ;;
	ingest) part_ingest ;;
	failover) part_failover ;;
	s3sync) part_s3sync ;;
	*) die "unknown part $p (want prop, read, ingest, s3sync or failover)" ;;
	esac
done
log "tables in $TABLE; raw results in $OUT"
[ "$FAILED" -eq 0 ] || die "some runs failed (see above)"
