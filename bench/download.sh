#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# bench/download.sh: the download server of issue 12 — files of 2050 KB,
# each fetched with its .md5 by 1–9 clients that check the sum, while new
# files replace old ones — on a 3-node cluster (R=3, --checksum-sidecars,
# reads through node 2) against nginx serving the same files and stored
# .md5 files from the local disk.
#
# Parts, in order:
#   1. reads: for each CLIENTS count, bench/download readers against nginx
#      and against Cairn (node 2), alternating (nginx first in odd rounds),
#      ROUNDS rounds of DURATION s: files/s (a file and its .md5 checked)
#      and MB/s, best round and mean.
#   2. sidecars: wrk (SIDECAR_CONNS connections) on random NAME.md5 only:
#      Cairn answers them from NAME's digests, nginx serves stored files.
#   3. large: wrk (LARGE_CONNS connections) on random 2050 KB files only.
#   4. churn: for each count in CHURN_CLIENTS, readers through node 2 for
#      CHURN_BASE s (the rate without churn); then for each count, back to
#      back, CHURN_DURATION s while a writer adds new 2050 KB files through
#      node 1 and deletes the oldest at CHURN_RATE files/s; the ratio of the
#      two rates, 0 errors and 0 bad bodies
#      required (a reader checks that a body names its file and matches its
#      .md5), the CPU of each node and of the client in both runs, and
#      every node's data directory size every DISK_EVERY s. PROFILE=1 adds
#      30 s CPU profiles of the nodes (--debug-listen) and a profile of the
#      client in both runs.
#
# Settings (environment): FILES=200 SIZE=2099200 (2050 KiB) CLIENTS="1 3 5 9"
# DURATION=15 ROUNDS=2 SIDECAR_CONNS="2 20" LARGE_CONNS="2 8 20"
# WRK_DURATION=8 WRK_ROUNDS=4 CHURN_CLIENTS="1 3 5" CHURN_RATE=10
# CHURN_DURATION=180 CHURN_BASE=60 CHURN_NICE=0
# DISK_EVERY=10 PARTS="reads sidecars large churn" CAIRN_BIN=path KEEP=1
# SERVER_ARGS="..." (extra node flags; default "--gc-grace 1m
# --gc-interval 10s": deleted files' blobs are kept --gc-grace, 15 min by
# default, so that downloads in progress finish; at 20 MB/s of churn the
# default needs 15 min and about 18 GB more before the disk use levels off)
# A/B: with CAIRN_BIN_B=path, a second 3-node cluster runs that binary,
# loaded with the same corpus the same way, and the wrk parts (sidecars,
# large) measure nginx, CAIRN_BIN's node 2 and CAIRN_BIN_B's node 2 in
# every round, in a rotating order: a change of a few percent between two
# binaries shows against the same nginx rounds, not against another run's
# (the table adds B's best, B/nginx and B/A of the means). The other parts
# use CAIRN_BIN's cluster only.
# Output: tables on stdout and in bench/.data/results/download-DATE/.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
# shellcheck source=bench/lib-cluster.sh
. "$(dirname "$0")/lib-cluster.sh"

FILES=${FILES:-200}
SIZE=${SIZE:-2099200}
CLIENTS=${CLIENTS:-"1 3 5 9"}
DURATION=${DURATION:-15}
ROUNDS=${ROUNDS:-2}
SIDECAR_CONNS=${SIDECAR_CONNS:-"2 20"}
LARGE_CONNS=${LARGE_CONNS:-"2 8 20"}
WRK_DURATION=${WRK_DURATION:-8}
WRK_ROUNDS=${WRK_ROUNDS:-4}
CHURN_CLIENTS=${CHURN_CLIENTS:-"1 3 5"}
CHURN_RATE=${CHURN_RATE:-10}
CHURN_DURATION=${CHURN_DURATION:-180}
CHURN_BASE=${CHURN_BASE:-60}
CHURN_NICE=${CHURN_NICE:-0}
DISK_EVERY=${DISK_EVERY:-10}
PARTS=${PARTS:-"reads sidecars large churn"}
PROFILE=${PROFILE:-0}
SERVER_ARGS=${SERVER_ARGS:---gc-grace 1m --gc-interval 10s}
CLUSTER_SECRET=${CAIRN_CLUSTER_SECRET:-cairn-bench-cluster-secret-0000000000}
ADMIN_KEY=${CAIRN_ADMIN_KEY:-cairn-bench-admin-key-0000000000}
export CAIRN_ADMIN_KEY=$ADMIN_KEY

need_tools curl:curl wrk:wrk nginx:nginx
trap cluster_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
check_quiet
resolve_cairn_bin

OUT=$DATA_DIR/results/download-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT" "$DATA_DIR/bin"
(cd "$REPO_DIR" && go build -o "$DATA_DIR/bin/download" ./bench/download) >&2 || die "go build ./bench/download failed"
DL=$DATA_DIR/bin/download
REV=$(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo unknown)
TABLE=$OUT/table.md
: >"$TABLE"
emit() { printf '%s\n' "$@" | tee -a "$TABLE"; }

CORPUS=$DATA_DIR/download-$FILES-$SIZE
if [ ! -f "$CORPUS/done" ]; then
	log "writing $FILES files of $SIZE bytes and their .md5 to $CORPUS"
	rm -rf -- "$CORPUS"
	"$DL" -mode gen -dir "$CORPUS" -n "$FILES" -size "$SIZE"
	touch "$CORPUS/done"
fi
sed 's/$/.md5/' "$CORPUS/names.txt" >"$OUT/md5-paths.txt"

NGINX_PORT=$(pick_port)
nginx_start "$CORPUS/all" "$NGINX_PORT"
NGINX_URL=http://127.0.0.1:$NGINX_PORT

# load_cluster NAME: a new cluster with the corpus in bucket downloads.
load_cluster() {
	cluster_start "$1"
	bucket_create downloads 3 --checksum-sidecars
	log "loading the corpus into bucket downloads of cluster $1 (cairn sync through node 1)"
	ccli 1 sync "$CORPUS/bin" downloads --no-progress >>"$OUT/cli.log" 2>&1 || die "cairn sync failed (see $OUT/cli.log)"
}
B_URL="" B_PID=""
if [ -n "${CAIRN_BIN_B:-}" ]; then
	[ -x "$CAIRN_BIN_B" ] || die "CAIRN_BIN_B=$CAIRN_BIN_B is not executable"
	CAIRN_BIN_A=$CAIRN_BIN
	CAIRN_BIN=$CAIRN_BIN_B
	load_cluster download-b
	B_URL=${NODE_URL[2]} B_PID=${NODE_PID[2]}
	CAIRN_BIN=$CAIRN_BIN_A
	log "A/B: node 2 of $CAIRN_BIN_B's cluster is $B_URL"
fi
load_cluster download
CAIRN_URL=${NODE_URL[2]}/downloads
# The readers check every body; a spot check first proves both sides serve
# the corpus and the sidecars.
for s in "$NGINX_URL" "$CAIRN_URL"; do
	"$DL" -mode read -url "$s" -names "$CORPUS/names.txt" -clients 1 -duration 1s >/dev/null ||
		die "spot check of $s failed"
done

# dl_run URL CLIENTS SECS [churn args...]: one reader run on the names in
# $LIVE (the corpus's, until churn replaces them); prints its DOWNLOAD line
# (and returns non-zero on an error or a bad body).
LIVE=$CORPUS/names.txt
dl_run() {
	local url=$1 c=$2 secs=$3
	shift 3
	"$DL" -mode read -url "$url" -names "$LIVE" -clients "$c" -duration "${secs}s" "$@"
}
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }

machine_info >"$OUT/machine.txt" 2>/dev/null || true
FAILED=0

if [[ " $PARTS " == *" reads "* ]]; then
	csv=$OUT/reads.csv
	echo "round,clients,server,files_per_s,mb_per_s,errors,bad" >"$csv"
	for r in $(seq 1 "$ROUNDS"); do
		for c in $CLIENTS; do
			order="nginx cairn"
			[ $((r % 2)) -eq 1 ] || order="cairn nginx"
			for srv in $order; do
				url=$NGINX_URL
				[ "$srv" = nginx ] || url=$CAIRN_URL
				line=$(dl_run "$url" "$c" "$DURATION") || FAILED=1
				log "round $r, $c clients, $srv: $line"
				echo "$r,$c,$srv,$(field files_per_s "$line"),$(field mb_per_s "$line"),$(field errors "$line"),$(field bad "$line")" >>"$csv"
			done
		done
	done
	emit "### Downloads: a 2050 KB file and its .md5, checked, per client" ""
	emit "$FILES files of $SIZE bytes; Cairn: 3 nodes on 127.0.0.1, bucket --replicas 3 --checksum-sidecars, read through node 2; nginx: the same files and stored .md5 files on the local disk. $ROUNDS rounds of ${DURATION}s alternating; best round and mean. git $REV." ""
	emit "| clients | nginx files/s | Cairn files/s | nginx MB/s | Cairn MB/s | **Cairn/nginx (best)** | (mean) | errors |" \
		"|---:|---:|---:|---:|---:|---:|---:|---:|"
	for c in $CLIENTS; do
		row=$(awk -F, -v c="$c" 'NR > 1 && $2 == c {
			n[$3]++; s[$3] += $4; if ($4 > b[$3]) { b[$3] = $4; m[$3] = $5 }; e += $6 + $7 }
			END { printf "%.1f %.1f %.0f %.0f %.2f %.2f %d", b["nginx"], b["cairn"], m["nginx"], m["cairn"],
				b["cairn"] / b["nginx"], (s["cairn"] / n["cairn"]) / (s["nginx"] / n["nginx"]), e }' "$csv")
		read -r bn bc mn mc rb rm e <<<"$row"
		emit "| $c | $bn | $bc | $mn | $mc | **$rb** | $rm | $e |"
	done
	emit ""
fi

# wrk_pair WHAT PATHS CONNS...: wrk on random PATHS from nginx and from
# Cairn (node 2), WRK_ROUNDS rounds alternating (nginx first in odd
# rounds), WRK_DURATION s each; a table row per connection count: the best
# round of each, the ratio of the means, and each server's CPU µs per
# request (nginx: its workers; Cairn: node 2), the mean over the rounds.
wrk_pair() {
	local what=$1 paths=$2 c r srv base prefix t line rps p99 reqs order csv pids c0 c1 cpu
	shift 2
	csv=$OUT/$what.csv
	echo "round,conns,server,rps,p99_ms,cpu_us_per_req" >"$csv"
	if [ -n "$B_URL" ]; then
		emit "| conns | nginx req/s (best) | Cairn req/s (best) | **Cairn/nginx (best)** | (mean) | nginx p99 ms | Cairn p99 ms | nginx CPU µs/req | Cairn CPU µs/req | B req/s (best) | **B/nginx (best)** | (mean) | **B/A (mean)** |" \
			"|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	else
		emit "| conns | nginx req/s (best) | Cairn req/s (best) | **Cairn/nginx (best)** | (mean) | nginx p99 ms | Cairn p99 ms | nginx CPU µs/req | Cairn CPU µs/req |" "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	fi
	for c in "$@"; do
		for r in $(seq 1 "$WRK_ROUNDS"); do
			order="nginx cairn"
			[ $((r % 2)) -eq 1 ] || order="cairn nginx"
			if [ -n "$B_URL" ]; then
				# Each server first, second and last in turn.
				case $((r % 3)) in
				1) order="nginx cairn cairnb" ;;
				2) order="cairnb nginx cairn" ;;
				0) order="cairn cairnb nginx" ;;
				esac
			fi
			for srv in $order; do
				base=$NGINX_URL prefix=/ pids=$(pgrep -P "$NGINX_PID" || true)
				case $srv in
				cairn) base=${NODE_URL[2]} prefix=/downloads/ pids=${NODE_PID[2]} ;;
				cairnb) base=$B_URL prefix=/downloads/ pids=$B_PID ;;
				esac
				t=$((c < 2 ? c : 2))
				# shellcheck disable=SC2086 # a list of PIDs
				c0=$(pid_ticks $pids)
				wrk -t"$t" -c"$c" -d"${WRK_DURATION}s" --latency -s "$BENCH_DIR/wrk/random.lua" "$base" \
					-- "$paths" "$prefix" "$r" >"$OUT/$what-$srv-c$c-r$r.txt" 2>&1 || FAILED=1
				# shellcheck disable=SC2086
				c1=$(pid_ticks $pids)
				line=$(grep '^BENCH_RESULT ' "$OUT/$what-$srv-c$c-r$r.txt" || echo "BENCH_RESULT requests=0 rps=0 p99_ms=0")
				rps=$(sed -n 's/.* rps=\([^ ]*\).*/\1/p' <<<"$line")
				p99=$(sed -n 's/.* p99_ms=\([^ ]*\).*/\1/p' <<<"$line")
				reqs=$(sed -n 's/.* requests=\([^ ]*\).*/\1/p' <<<"$line")
				cpu=$(awk -v t=$((c1 - c0)) -v k="$CLK_TCK" -v n="${reqs:-0}" 'BEGIN { printf "%.1f", (n > 0 ? t / k * 1e6 / n : 0) }')
				echo "$r,$c,$srv,$rps,$p99,$cpu" >>"$csv"
			done
		done
		awk -F, -v c="$c" 'NR > 1 && $2 == c {
			n[$3]++; s[$3] += $4; u[$3] += $6; if ($4 > b[$3]) { b[$3] = $4; p[$3] = $5 } }
			END { printf "| %s | %.0f | %.0f | **%.2f** | %.2f | %s | %s | %.1f | %.1f |", c, b["nginx"], b["cairn"],
				(b["nginx"] > 0 ? b["cairn"] / b["nginx"] : 0), (s["nginx"] > 0 ? (s["cairn"] / n["cairn"]) / (s["nginx"] / n["nginx"]) : 0),
				p["nginx"], p["cairn"], u["nginx"] / n["nginx"], u["cairn"] / n["cairn"]
				if (n["cairnb"] > 0)
					printf " %.0f | **%.2f** | %.2f | **%.3f** |", b["cairnb"], (b["nginx"] > 0 ? b["cairnb"] / b["nginx"] : 0),
						(s["nginx"] > 0 ? (s["cairnb"] / n["cairnb"]) / (s["nginx"] / n["nginx"]) : 0),
						(s["cairn"] > 0 ? (s["cairnb"] / n["cairnb"]) / (s["cairn"] / n["cairn"]) : 0)
				printf "\n" }' "$csv" | tee -a "$TABLE"
	done
	emit ""
}

if [[ " $PARTS " == *" sidecars "* ]]; then
	emit "### Checksum sidecars: GET NAME.md5 only (wrk, random names)" ""
	emit "Cairn answers from NAME's digests (--checksum-sidecars), through node 2; nginx serves stored .md5 files. wrk -t2, ${WRK_DURATION}s, $WRK_ROUNDS rounds alternating; best round and ratio of means. git $REV." ""
	# shellcheck disable=SC2086 # a list of counts
	wrk_pair sidecar "$OUT/md5-paths.txt" $SIDECAR_CONNS
fi

if [[ " $PARTS " == *" large "* ]]; then
	emit "### The 2050 KB files alone (wrk, random names, no check)" ""
	emit "Through node 2 against nginx; wrk -t2, ${WRK_DURATION}s, $WRK_ROUNDS rounds alternating; best round and ratio of means. git $REV." ""
	# shellcheck disable=SC2086 # a list of counts
	wrk_pair large "$CORPUS/names.txt" $LARGE_CONNS
fi

# cpu_run TAG LINEVAR CLIENTS SECS [churn args...]: dl_run through node 2
# that records the CPU of each node and of the client: sets LINEVAR to the
# DOWNLOAD line and CPU[TAG,n1|n2|n3|client] to CPU seconds. With
# PROFILE=1 it also takes a 30 s CPU profile of every node from a third of
# the way in ($OUT/TAG-nN.pprof) and profiles the client.
declare -A CPU
cpu_run() {
	local tag=$1 var=$2 c=$3 secs=$4 i t0=() t1=() out rc=0 prof=()
	local tf=$OUT/$tag-time.txt
	shift 4
	for i in 1 2 3; do t0[i]=$(pid_ticks "${NODE_PID[i]}"); done
	if [ "$PROFILE" -gt 0 ]; then
		for i in 1 2 3; do
			(sleep $((secs / 3)) && curl -fsS --max-time 60 -o "$OUT/$tag-n$i.pprof" \
				"http://${NODE_DEBUG[i]}/debug/pprof/profile?seconds=30") >/dev/null 2>&1 &
			prof+=($!)
		done
		set -- "$@" -cpuprofile "$OUT/$tag-client.pprof"
	fi
	local TIMEFORMAT='CPU %U %S'
	{ time dl_run "$CAIRN_URL" "$c" "$secs" "$@" >"$OUT/$tag-line.txt" 2>"$OUT/$tag-stderr.txt"; } 2>"$tf" || rc=1
	for i in 1 2 3; do t1[i]=$(pid_ticks "${NODE_PID[i]}"); done
	out=$(cat "$OUT/$tag-line.txt")
	printf -v "$var" '%s' "$out"
	for i in 1 2 3; do CPU[$tag,n$i]=$(awk -v t=$((t1[i] - t0[i])) -v k="$CLK_TCK" 'BEGIN { printf "%.1f", t / k }'); done
	CPU[$tag,client]=$(awk '/^CPU / { printf "%.1f", $2 + $3 }' "$tf")
	[ ${#prof[@]} -eq 0 ] || wait "${prof[@]}" || true
	return "$rc"
}

if [[ " $PARTS " == *" churn "* ]]; then
	disk=$OUT/disk.csv
	echo "t_s,node1_bytes,node2_bytes,node3_bytes" >"$disk"
	du_t0=$SECONDS
	(
		while true; do
			printf '%d' $((SECONDS - du_t0))
			for i in 1 2 3; do printf ',%s' "$(du -sb "$CL_DIR/n$i" 2>/dev/null | cut -f1)"; done
			echo
			sleep "$DISK_EVERY"
		done
	) >>"$disk" &
	DU_PID=$!
	BENCH_PIDS+=("$DU_PID")
	# The rates without churn first, every client count on the corpus as
	# loaded; then the churn runs back to back (the writer goes on from
	# the live names the previous run left).
	declare -A BLINE CLINE
	for c in $CHURN_CLIENTS; do
		log "churn: the rate without churn, $c readers through node 2, ${CHURN_BASE}s"
		cpu_run "base-c$c" "BLINE[$c]" "$c" "$CHURN_BASE" || FAILED=1
		log "churn, base: ${BLINE[$c]}"
	done
	if [ "$CHURN_NICE" != 0 ]; then
		# Nodes 1 and 3 stand for other machines: every thread of theirs
		# (threads made later inherit it) yields the cores to node 2 and
		# the readers, taking what they leave.
		for i in 1 3; do
			for t in /proc/"${NODE_PID[i]}"/task/*; do renice -n "$CHURN_NICE" -p "${t##*/}" >/dev/null; done
		done
		log "churn: nodes 1 and 3 reniced to $CHURN_NICE"
	fi
	for c in $CHURN_CLIENTS; do
		log "churn: $c readers through node 2, a writer through node 1 at $CHURN_RATE files/s, ${CHURN_DURATION}s"
		cpu_run "churn-c$c" "CLINE[$c]" "$c" "$CHURN_DURATION" -write "${NODE_URL[1]}/downloads" \
			-key "$ADMIN_KEY" -rate "$CHURN_RATE" -size "$SIZE" -names-out "$OUT/live-c$c.txt" || FAILED=1
		log "churn: ${CLINE[$c]}"
		[ ! -s "$OUT/live-c$c.txt" ] || LIVE=$OUT/live-c$c.txt
	done
	sleep 1
	kill "$DU_PID" 2>/dev/null || true
	emit "### Downloads under churn" ""
	emit "Readers through node 2: for ${CHURN_BASE}s without churn for each client count, then for ${CHURN_DURATION}s each, back to back, while a writer (in the readers' process) adds 2050 KB files through node 1 and deletes the oldest at $CHURN_RATE files/s each way; nodes with ${SERVER_ARGS:-the defaults}; nodes 1 and 3 at nice $CHURN_NICE during churn. git $REV." ""
	emit "| readers | files/s without churn | files/s under churn | **ratio** | reader errors | bad bodies | files put | files deleted | files/s written | writer errors |" \
		"|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	for c in $CHURN_CLIENTS; do
		base=$(field files_per_s "${BLINE[$c]}")
		got=$(field files_per_s "${CLINE[$c]}")
		line=${CLINE[$c]}
		emit "| $c | $base | $got | **$(awk -v a="$got" -v b="$base" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')** | $(field errors "$line") | $(field bad "$line") | $(field puts "$line") | $(field deletes "$line") | $(awk -v p="$(field puts "$line")" -v d="$(field secs "$line")" 'BEGIN { printf "%.1f", (d > 0 ? p / d : 0) }') | $(field write_errors "$line") |"
	done
	emit "" "CPU of each process (cores: CPU seconds over the run's seconds), and per file read and per file written (ms; the writer's share: the CPU under churn less the reads' CPU at the rate without churn's cost per file):" "" \
		"| readers | process | cores without churn | cores under churn | ms per file read, without | ms per file read, under churn | ms per file written |" \
		"|---:|---|---:|---:|---:|---:|---:|"
	for c in $CHURN_CLIENTS; do
		fb=$(field files "${BLINE[$c]}")
		fc=$(field files "${CLINE[$c]}")
		puts=$(field puts "${CLINE[$c]}")
		for k in n1 n2 n3 client; do
			awk -v n="$c" -v k="$k" -v b="${CPU[base-c$c,$k]}" -v c="${CPU[churn-c$c,$k]}" -v sb="$CHURN_BASE" -v sc="$CHURN_DURATION" \
				-v fb="$fb" -v fc="$fc" -v p="$puts" 'BEGIN {
				printf "| %s | %s | %.2f | %.2f | %.2f | %.2f | %.1f |\n", n, k, b / sb, c / sc, (fb > 0 ? b * 1e3 / fb : 0), (fc > 0 ? c * 1e3 / fc : 0),
					(p > 0 ? (c - (fb > 0 ? b / fb * fc : 0)) * 1e3 / p : 0) }' | tee -a "$TABLE"
		done
	done
	emit "" "Data directory size per node (du -sb), MB (churn from the end of the runs without churn):" "" "| t s | node 1 | node 2 | node 3 |" "|---:|---:|---:|---:|"
	awk -F, 'NR > 1 && NF == 4 { printf "| %s | %.0f | %.0f | %.0f |\n", $1, $2 / 1e6, $3 / 1e6, $4 / 1e6 }' "$disk" | tee -a "$TABLE"
	emit ""
fi

cluster_stop
log "tables in $TABLE"
exit "$FAILED"
