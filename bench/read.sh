#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# bench/read.sh: random-read benchmark, Cairn against nginx on the same files.
#
# For each corpus profile (small: 20,000 files, median 15 KB; medium: 2,000
# files of 500–800 KB) and each connection count, wrk requests random files
# for DURATION seconds from nginx (serving the corpus from the local disk) and
# from one Cairn node (holding the same corpus, loaded with `cairn sync`).
# Runs alternate nginx, Cairn, nginx, Cairn… so both see the same machine
# load. The table shows, per server, the best of ROUNDS rounds (the round with
# the highest req/s, and that round's MB/s and latencies), the Cairn/nginx
# ratio of those best rounds, and the ratio of the mean req/s over all rounds.
#
# Settings (environment):
#   DURATION=10        seconds per wrk run
#   ROUNDS=2           rounds per (profile, connections, server)
#   CONNS="1 5 20 30"  connection counts
#   PROFILES="small medium"
#   THREADS=2          wrk threads (never more than the connections)
#   WARMUP=5           seconds of unrecorded load per server and profile first
#   WRK_TIMEOUT=10s    a request slower than this counts as failed
#   SEED=1 SCALE=1     corpus seed and size fraction (SCALE=0.05 for a smoke run)
#   NGINX_ONLY=1       skip Cairn (proves the tools and the nginx side)
#   CAIRN_BIN=path     cairn binary (default bin/cairn, built if missing)
#   CAIRN_BIN_B=path   A/B: a second Cairn node from this binary, loaded with the
#                      same corpus, takes its turn beside CAIRN_BIN's in every
#                      round (nginx, A, B; nginx, B, A in even rounds); a table
#                      of B against A (CAIRN_BIN) follows the main one (A's)
#   RULES_B=N          A/B of abuse rules: B (CAIRN_BIN_B, default CAIRN_BIN) gets
#                      N cluster rules loaded (User-Agent patterns, CIDRs and path
#                      prefixes that no benchmark request matches), A none: the
#                      B/A column is the cost of checking N rules
#   S3=1               also GET the same files from node A through the S3 API:
#                      presigned SigV4 URLs (an access key with read on the
#                      buckets, bench/presign), server "s3" in the CSV, and
#                      GETs signed in their Authorization header as the SDKs'
#                      GetObject (bench/presign -header, signed again before
#                      each run: a signature is good for 15 minutes), server
#                      "s3h"; a table of S3 against the native GET and nginx
#                      follows
#   TLS=1              everything over HTTPS: nginx with ssl, Cairn with
#                      --tls-cert (a self-signed P-256 certificate made with
#                      openssl); wrk speaks HTTP/1.1 over TLS to both
#   DAV=1              also GET the same files from node A over WebDAV
#                      (/_dav/PROFILE/PATH; the buckets are public), server
#                      "dav" in the CSV, in the S3/DAV table
#   WRK_PREFORMAT=1    random.lua formats every request once at start, so that
#                      the client's cost per request does not grow with the
#                      request's fields (a header-signed GET carries ~400 bytes
#                      more); the same for every server of the run
#   NGINX_OPEN_FILE_CACHE=1  turn on nginx's open_file_cache
#   KEEP=1             keep the Cairn data and nginx scratch directories
#
# Checks: before the load, SPOT_CHECK (20) random files are fetched from each
# server and compared with the corpus by SHA-256. A run fails on any wrk error
# (status >= 400, socket error, timeout; random.lua) and when the responses
# average less than 0.8 × the corpus mean file size (a 3xx or 304 would be a
# short body; WRK_STRICT=1 makes random.lua count every non-2xx exactly, at a
# cost in client CPU that narrows the gap between the servers).
#
# Server CPU: each run also records the server's CPU time (utime + stime
# from /proc/PID/stat: the Cairn process, or nginx's worker processes) over
# the run, divided by the requests: CPU µs per request, the mean over the
# rounds in the table. It is less sensitive than req/s to other load on the
# machine (the client shares its cores).
#
# Output: the markdown table on stdout; raw wrk output, results.csv and
# table.md under bench/.data/results/read-DATE/. Exit status 1 when any run
# had a failed request (non-2xx status, socket error or timeout).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-2}
CONNS=${CONNS:-"1 5 20 30"}
PROFILES=${PROFILES:-"small medium"}
THREADS=${THREADS:-2}
WARMUP=${WARMUP:-5}
WRK_TIMEOUT=${WRK_TIMEOUT:-10s}
NGINX_ONLY=${NGINX_ONLY:-0}
SPOT_CHECK=${SPOT_CHECK:-20}

need_tools wrk:wrk nginx:nginx curl:curl sha256sum:coreutils
bench_traps

for p in $PROFILES; do
	ensure_corpus "$p"
done
if [ "${TLS:-0}" = 1 ]; then
	need_tools openssl:openssl
	mkdir -p "$DATA_DIR/tls"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$DATA_DIR/tls/key.pem" \
		-out "$DATA_DIR/tls/cert.pem" -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null ||
		die "openssl could not make a certificate"
	export NGINX_TLS_CERT=$DATA_DIR/tls/cert.pem NGINX_TLS_KEY=$DATA_DIR/tls/key.pem
	export CAIRN_EXTRA_ARGS="--tls-cert $DATA_DIR/tls/cert.pem --tls-key $DATA_DIR/tls/key.pem" CAIRN_SCHEME=https
	export CURL_CA_BUNDLE=$DATA_DIR/tls/cert.pem SSL_CERT_FILE=$DATA_DIR/tls/cert.pem
fi
SERVERS="nginx cairn"
RULES_B=${RULES_B:-0}
S3=${S3:-0}
DAV=${DAV:-0}
if [ "$NGINX_ONLY" = 1 ]; then
	SERVERS=nginx
else
	check_quiet
	resolve_cairn_bin
	if [ "$RULES_B" -gt 0 ] && [ -z "${CAIRN_BIN_B:-}" ]; then
		CAIRN_BIN_B=$CAIRN_BIN
	fi
	if [ -n "${CAIRN_BIN_B:-}" ]; then
		[ -x "$CAIRN_BIN_B" ] || die "CAIRN_BIN_B=$CAIRN_BIN_B is not executable"
		SERVERS="nginx cairn cairnb"
	fi
fi

OUT=$DATA_DIR/results/read-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
CSV=$OUT/results.csv
echo "profile,conns,round,server,requests,rps,mbps,p50_ms,p99_ms,status,cpu_us_per_req" >"$CSV"

# Both servers serve the same URLs: /PROFILE/relative/path. nginx's root is
# the corpus parent directory; Cairn has one public bucket per profile.
NGINX_PORT=$(pick_port)
nginx_start "$CORPUS_DIR" "$NGINX_PORT"
declare -A BASE
BASE[nginx]=${CAIRN_SCHEME:-http}://127.0.0.1:$NGINX_PORT
declare -A MEAN_SIZE
for p in $PROFILES; do
	MEAN_SIZE[$p]=$(find "$CORPUS_DIR/$p" -type f ! -name paths.txt -printf '%s\n' |
		awk '{s += $1; n++} END {printf "%.0f", n ? s / n : 0}')
	spot_check "${BASE[nginx]}/$p" "$CORPUS_DIR/$p" "$CORPUS_DIR/$p/paths.txt" "$SPOT_CHECK"
done

# start_loaded_cairn NAME: start a Cairn node (CAIRN_BIN) as server NAME
# and load every profile's corpus into it.
start_loaded_cairn() {
	local name=$1 p n t0
	cairn_start "$(pick_port)"
	BASE[$name]=$CAIRN_URL
	for p in $PROFILES; do
		n=$(wc -l <"$CORPUS_DIR/$p/paths.txt")
		log "loading corpus $p ($n files) into $name ($CAIRN_BIN) bucket $p with cairn sync"
		t0=$EPOCHREALTIME
		cairn_load "$CORPUS_DIR/$p" "$p"
		log "loaded $p in $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}') s"
		spot_check "${BASE[$name]}/$p" "$CORPUS_DIR/$p" "$CORPUS_DIR/$p/paths.txt" "$SPOT_CHECK"
	done
}
# sign_headers PROFILE: sign a GET of each of the profile's files in its
# Authorization header, now (bench/presign -header; S3=1).
sign_headers() {
	"$OUT/presign" -header -base "${BASE[cairn]}" -bucket "$1" -id "$kid" -secret "$ksecret" \
		<"$CORPUS_DIR/$1/paths.txt" >"$OUT/signed-$1.txt" || die "signing $1 failed"
}
declare -A PID_OF
if [ "$NGINX_ONLY" != 1 ]; then
	if [ -n "${CAIRN_BIN_B:-}" ]; then
		bin_a=$CAIRN_BIN
		CAIRN_BIN=$CAIRN_BIN_B
		start_loaded_cairn cairnb
		PID_OF[cairnb]=$CAIRN_PID LOG_OF_B=$CAIRN_DATA/server.log
		CAIRN_BIN=$bin_a
	fi
	start_loaded_cairn cairn
	PID_OF[cairn]=$CAIRN_PID
	if [ "$RULES_B" -gt 0 ]; then
		log "loading $RULES_B abuse rules into B (${BASE[cairnb]}), none of which matches the benchmark's requests"
		for i in $(seq 1 "$RULES_B"); do
			case $((i % 3)) in
			0) args=(--user-agent "(?i)(badbot|crawler$i|sitesucker|httrack)/[0-9]+") ;;
			1) args=(--ip "203.0.$((i % 256)).0/24") ;;
			2) args=(--path "/private$i/") ;;
			esac
			CAIRN_SERVER=${BASE[cairnb]} "$CAIRN_BIN" rule add "${args[@]}" --deny 403 >/dev/null ||
				die "cairn rule add ${args[*]} failed"
		done
	fi
	if [ "$DAV" = 1 ]; then
		SERVERS="$SERVERS dav"
		BASE[dav]=${BASE[cairn]}
		PID_OF[dav]=${PID_OF[cairn]}
	fi
	if [ "$S3" = 1 ]; then
		SERVERS="$SERVERS s3 s3h"
		BASE[s3]=${BASE[cairn]} BASE[s3h]=${BASE[cairn]}
		PID_OF[s3]=${PID_OF[cairn]} PID_OF[s3h]=${PID_OF[cairn]}
		keyjson=$(CAIRN_SERVER=${BASE[cairn]} "$CAIRN_BIN" key create bench-s3 --allow read --json) ||
			die "cairn key create failed"
		kid=$(sed -n 's/.*"id": "\(.*\)".*/\1/p' <<<"$keyjson")
		ksecret=$(sed -n 's/.*"secret": "\(.*\)".*/\1/p' <<<"$keyjson")
		(cd "$REPO_DIR" && go build -o "$OUT/presign" ./bench/presign) || die "building bench/presign failed"
		for p in $PROFILES; do
			"$OUT/presign" -base "${BASE[cairn]}" -bucket "$p" -id "$kid" -secret "$ksecret" \
				-expires 12h <"$CORPUS_DIR/$p/paths.txt" >"$OUT/presigned-$p.txt" || die "presigning $p failed"
			u=${BASE[s3]}/$(head -n 1 "$OUT/presigned-$p.txt")
			curl -fsS -o /dev/null "$u" || die "a presigned GET failed: $u"
			sign_headers "$p"
			IFS=$'\t' read -r -a sf <"$OUT/signed-$p.txt"
			curl -fsS -o /dev/null -H "${sf[1]}" -H "${sf[2]}" -H "${sf[3]}" "${BASE[s3h]}/${sf[0]}" ||
				die "a header-signed GET failed: ${BASE[s3h]}/${sf[0]}"
		done
	fi
fi

# check_alive SERVER: die (in the main shell) when the server has exited.
check_alive() {
	if [ "$1" = cairn ] && ! kill -0 "$CAIRN_PID" 2>/dev/null; then
		tail -n 30 "$CAIRN_DATA/server.log" >&2
		die "the Cairn server died (log: $CAIRN_DATA/server.log)"
	fi
	if [ "$1" = cairnb ] && ! kill -0 "${PID_OF[cairnb]}" 2>/dev/null; then
		tail -n 30 "$LOG_OF_B" >&2
		die "the Cairn server B died (log: $LOG_OF_B)"
	fi
	if [ "$1" = nginx ] && ! kill -0 "$NGINX_PID" 2>/dev/null; then
		tail -n 30 "$NGINX_RUN/error.log" >&2
		die "nginx died"
	fi
}

# server_cpu SERVER: CPU clock ticks (utime + stime) used so far by the
# server's processes (nginx: its workers, not the idle master).
server_cpu() {
	local pids
	if [ "$1" = nginx ]; then pids=$(pgrep -P "$NGINX_PID" || true); else pids=${PID_OF[$1]}; fi
	# shellcheck disable=SC2086 # a list of PIDs
	pid_ticks $pids
}

# run_wrk SERVER PROFILE CONNS SECONDS OUTFILE: one wrk run; prints the
# BENCH_RESULT line's fields as "requests rps mbps p50 p99"; status 1 on a
# failed run.
run_wrk() {
	local server=$1 profile=$2 conns=$3 secs=$4 out=$5 threads=$THREADS rc=0
	local paths=$CORPUS_DIR/$profile/paths.txt prefix=/$profile/
	if [ "$server" = s3 ]; then
		paths=$OUT/presigned-$profile.txt prefix=/
	fi
	if [ "$server" = s3h ]; then
		paths=$OUT/signed-$profile.txt prefix=/
	fi
	if [ "$server" = dav ]; then
		prefix=/_dav/$profile/
	fi
	[ "$threads" -le "$conns" ] || threads=$conns
	wrk -t"$threads" -c"$conns" -d"${secs}s" --timeout "$WRK_TIMEOUT" --latency \
		-s "$BENCH_DIR/wrk/random.lua" "${BASE[$server]}" \
		-- "$paths" "$prefix" "$SEED" >"$out" 2>&1 || rc=$?
	local line
	line=$(grep '^BENCH_RESULT ' "$out" || true)
	if [ -z "$line" ]; then
		log "wrk produced no result ($out):"
		tail -n 20 "$out" >&2
		echo "0 0 0 0 0 0"
		return 1
	fi
	awk '{
		for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		print v["requests"], v["rps"], v["mbps"], v["p50_ms"], v["p99_ms"], v["bytes"]
	}' <<<"$line"
	if [ "$rc" -ne 0 ]; then
		grep '^BENCH_FAIL' "$out" >&2 || true
		return 1
	fi
}

FAILED=0
for p in $PROFILES; do
	if [ "$WARMUP" -gt 0 ]; then
		for s in $SERVERS; do
			log "warm-up: $s, $p, 20 connections, ${WARMUP}s (not recorded)"
			check_alive "$s"
			[ "$s" != s3h ] || sign_headers "$p"
			run_wrk "$s" "$p" 20 "$WARMUP" "$OUT/warmup-$p-$s.txt" >/dev/null ||
				die "warm-up against $s failed; see $OUT/warmup-$p-$s.txt"
		done
	fi
	for c in $CONNS; do
		for r in $(seq 1 "$ROUNDS"); do
			order=$SERVERS
			if [ -n "${CAIRN_BIN_B:-}" ] && [ $((r % 2)) = 0 ]; then
				order="nginx cairnb cairn" # A/B: neither always runs last
			fi
			for s in $order; do
				f=$OUT/wrk-$p-c$c-r$r-$s.txt
				status=ok
				check_alive "$s"
				[ "$s" != s3h ] || sign_headers "$p"
				cpu0=$(server_cpu "$s")
				res=$(run_wrk "$s" "$p" "$c" "$DURATION" "$f") || { status=FAIL; FAILED=1; }
				cpu1=$(server_cpu "$s")
				read -r reqs rps mbps p50 p99 bytes <<<"$res"
				cpu_us=$(awk -v t=$((cpu1 - cpu0)) -v k="$CLK_TCK" -v n="${reqs:-0}" 'BEGIN {printf "%.2f", (n > 0 ? t / k * 1e6 / n : 0)}')
				# wrk counts only statuses >= 400 as errors. A 3xx or 304 would
				# be a short body: check that responses average (nearly) the
				# corpus mean file size. WRK_STRICT=1 counts every non-2xx
				# exactly, at a cost in client CPU.
				if [ "$status" = ok ] && [ "${reqs:-0}" -ge 500 ] &&
					! awk -v b="$bytes" -v n="$reqs" -v m="${MEAN_SIZE[$p]}" 'BEGIN {exit !(b / n >= 0.8 * m)}'; then
					log "$s answered $p with $((bytes / reqs)) bytes a response on average; the files average ${MEAN_SIZE[$p]}: some responses are not the files"
					status=FAIL
					FAILED=1
				fi
				log "$p c=$c round $r $s: $rps req/s, $mbps MB/s, p50 $p50 ms, p99 $p99 ms, server CPU $cpu_us µs/request ($status)"
				echo "$p,$c,$r,$s,$reqs,$rps,$mbps,$p50,$p99,$status,$cpu_us" >>"$CSV"
			done
		done
	done
done

# Table: best round per (profile, conns, server) by req/s among ok rounds,
# plus the ratio of the mean req/s over all ok rounds.
{
	echo "Random GET, Cairn (1 node) vs nginx (local disk), wrk ${THREADS} threads, ${DURATION}s per run, best of ${ROUNDS} alternating rounds per server"
	echo "$(date -u +%Y-%m-%dT%H:%MZ); $(machine_info)"
	echo "command: ${CAIRN_BIN_B:+CAIRN_BIN=$CAIRN_BIN CAIRN_BIN_B=$CAIRN_BIN_B }${WRK_PREFORMAT:+WRK_PREFORMAT=$WRK_PREFORMAT }TLS=${TLS:-0} RULES_B=$RULES_B S3=$S3 DAV=$DAV DURATION=$DURATION ROUNDS=$ROUNDS CONNS=\"$CONNS\" PROFILES=\"$PROFILES\" SCALE=$SCALE SEED=$SEED bench/read.sh"
	echo
	awk -F, -v servers="$SERVERS" '
	NR == 1 { next }
	{
		k = $1 SUBSEP $2 SUBSEP $4
		if (!(($1 SUBSEP $2) in seen)) { seen[$1 SUBSEP $2] = 1; order[++n] = $1 SUBSEP $2 }
		if ($10 != "ok") { fail[k] = 1; next }
		sum[k] += $6; cnt[k]++; cpu[k] += $11
		if (!(k in best) || $6 > best[k]) { best[k] = $6; mb[k] = $7; p50[k] = $8; p99[k] = $9 }
	}
	function f(x, fmt) { return (x == "" ? "—" : sprintf(fmt, x)) }
	function ratio(a, b) { return (a == "" || b == "" || b + 0 == 0) ? "—" : sprintf("%.2f", a / b) }
	END {
		cairn = (servers ~ /cairn/)
		if (cairn) {
			print "| profile | conns | nginx req/s | Cairn req/s | Cairn/nginx req/s (best) | (mean) | nginx MB/s | Cairn MB/s | nginx p50 ms | Cairn p50 ms | nginx p99 ms | Cairn p99 ms | Cairn/nginx p99 | nginx CPU µs/req | Cairn CPU µs/req |"
			print "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
		} else {
			print "| profile | conns | nginx req/s | nginx MB/s | nginx p50 ms | nginx p99 ms | nginx CPU µs/req |"
			print "|---|---:|---:|---:|---:|---:|---:|"
		}
		for (i = 1; i <= n; i++) {
			split(order[i], a, SUBSEP)
			kn = order[i] SUBSEP "nginx"; kc = order[i] SUBSEP "cairn"
			bn = (kn in best) ? best[kn] : ""; bc = (kc in best) ? best[kc] : ""
			if (!cairn) {
				printf "| %s | %s | %s | %s | %s | %s | %s |\n", a[1], a[2], f(bn, "%.0f"), f(mb[kn], "%.1f"), f(p50[kn], "%.2f"), f(p99[kn], "%.2f"), f((kn in cnt) ? cpu[kn] / cnt[kn] : "", "%.1f")
				continue
			}
			mn = (kn in cnt) ? sum[kn] / cnt[kn] : ""; mc = (kc in cnt) ? sum[kc] / cnt[kc] : ""
			printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", a[1], a[2],
				f(bn, "%.0f"), f(bc, "%.0f"), ratio(bc, bn), ratio(mc, mn),
				f(mb[kn], "%.1f"), f(mb[kc], "%.1f"), f(p50[kn], "%.2f"), f(p50[kc], "%.2f"),
				f(p99[kn], "%.2f"), f(p99[kc], "%.2f"), ratio(p99[kc], p99[kn]),
				f((kn in cnt) ? cpu[kn] / cnt[kn] : "", "%.1f"), f((kc in cnt) ? cpu[kc] / cnt[kc] : "", "%.1f")
		}
		for (k in fail) { split(k, a, SUBSEP); printf "\nFAILED: %s, %s connections, %s (see the raw wrk output)\n", a[1], a[2], a[3] }
	}' "$CSV"
	if [ "$S3" = 1 ] || [ "$DAV" = 1 ]; then
		echo
		echo "S3 and WebDAV: presigned GETs (SigV4 query), GETs signed in the Authorization header (the SDKs' GetObject) and WebDAV GETs of the same files from node A, against its native GET and nginx; means over the ok rounds"
		echo
		awk -F, '
		NR == 1 { next }
		$10 == "ok" { k = $1 SUBSEP $2 SUBSEP $4; sum[k] += $6; cnt[k]++; cpu[k] += $11
			if (!(($1 SUBSEP $2) in seen)) { seen[$1 SUBSEP $2] = 1; order[++n] = $1 SUBSEP $2 } }
		function m(k) { return (k in cnt) ? sum[k] / cnt[k] : "" }
		function c(k) { return (k in cnt) ? cpu[k] / cnt[k] : "" }
		function r(a, b) { return (a == "" || b == "" || b + 0 == 0) ? "—" : sprintf("%.2f", a / b) }
		function f(x, fmt) { return (x == "" ? "—" : sprintf(fmt, x)) }
		END {
			print "| profile | conns | nginx req/s | native req/s | S3 presigned req/s | presigned/native | presigned/nginx | S3 header-signed req/s | header-signed/native | header-signed/nginx | WebDAV req/s | WebDAV/native | native CPU µs/req | presigned CPU µs/req | header-signed CPU µs/req | WebDAV CPU µs/req |"
			print "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
			for (i = 1; i <= n; i++) {
				split(order[i], a, SUBSEP)
				kn = order[i] SUBSEP "nginx"; ka = order[i] SUBSEP "cairn"; ks = order[i] SUBSEP "s3"; kh = order[i] SUBSEP "s3h"; kd = order[i] SUBSEP "dav"
				printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", a[1], a[2],
					f(m(kn), "%.0f"), f(m(ka), "%.0f"), f(m(ks), "%.0f"), r(m(ks), m(ka)), r(m(ks), m(kn)),
					f(m(kh), "%.0f"), r(m(kh), m(ka)), r(m(kh), m(kn)),
					f(m(kd), "%.0f"), r(m(kd), m(ka)), f(c(ka), "%.1f"), f(c(ks), "%.1f"), f(c(kh), "%.1f"), f(c(kd), "%.1f")
			}
		}' "$CSV"
	fi
	[ -n "${CAIRN_BIN_B:-}" ] || exit 0
	echo
	echo "A/B: A = $CAIRN_BIN, B = $CAIRN_BIN_B; means over the ok rounds (each round ran nginx, A and B back to back; B before A in even rounds)"
	echo
	awk -F, '
	NR == 1 { next }
	$10 == "ok" { k = $1 SUBSEP $2 SUBSEP $4; sum[k] += $6; cnt[k]++; cpu[k] += $11
		if (!(($1 SUBSEP $2) in seen)) { seen[$1 SUBSEP $2] = 1; order[++n] = $1 SUBSEP $2 } }
	function m(k) { return (k in cnt) ? sum[k] / cnt[k] : "" }
	function c(k) { return (k in cnt) ? cpu[k] / cnt[k] : "" }
	function r(a, b) { return (a == "" || b == "" || b + 0 == 0) ? "—" : sprintf("%.3f", a / b) }
	function f(x, fmt) { return (x == "" ? "—" : sprintf(fmt, x)) }
	END {
		print "| profile | conns | nginx req/s | A req/s | B req/s | A/nginx | B/nginx | B/A req/s | A CPU µs/req | B CPU µs/req | B/A CPU |"
		print "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
		for (i = 1; i <= n; i++) {
			split(order[i], a, SUBSEP)
			kn = order[i] SUBSEP "nginx"; ka = order[i] SUBSEP "cairn"; kb = order[i] SUBSEP "cairnb"
			printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", a[1], a[2],
				f(m(kn), "%.0f"), f(m(ka), "%.0f"), f(m(kb), "%.0f"), r(m(ka), m(kn)), r(m(kb), m(kn)), r(m(kb), m(ka)),
				f(c(ka), "%.1f"), f(c(kb), "%.1f"), r(c(kb), c(ka))
		}
	}' "$CSV"
} | tee "$OUT/table.md"
log "raw results in $OUT"
[ "$FAILED" -eq 0 ] || die "some runs had failed requests (marked FAIL in $CSV)"
