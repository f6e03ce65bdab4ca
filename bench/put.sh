#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# bench/put.sh: PUT throughput of new 15 KB files into one Cairn node, the
# native API against WebDAV (/_dav/BUCKET/), alternating, ROUNDS rounds of
# DURATION s with wrk at CONNS connections (bench/wrk/put.lua). Each
# request writes a new file at the bucket's root (WebDAV needs an existing
# parent). Prints a table: req/s of each and WebDAV/native.
#
# Settings: DURATION=8 ROUNDS=3 CONNS=20 BODY_BYTES=15000 CAIRN_BIN.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
DURATION=${DURATION:-8}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-20}
BODY_BYTES=${BODY_BYTES:-15000}
need_tools wrk:wrk curl:curl
bench_traps
resolve_cairn_bin
cairn_start "$(pick_port)"
cairn bucket create putbench >/dev/null || die "bucket create failed"
OUT=$DATA_DIR/results/put-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
basic="Basic $(printf 'anyone:%s' "$CAIRN_ADMIN_KEY" | base64 -w0)"
declare -A SUM
for r in $(seq 1 "$ROUNDS"); do
	for api in native dav; do
		if [ "$api" = native ]; then prefix=/putbench/$api-r$r- auth="Bearer $CAIRN_ADMIN_KEY"; else prefix=/_dav/putbench/$api-r$r- auth=$basic; fi
		wrk -t2 -c"$CONNS" -d"${DURATION}s" -s "$BENCH_DIR/wrk/put.lua" "$CAIRN_URL" -- "$prefix" "$auth" "$BODY_BYTES" >"$OUT/$api-r$r.txt" 2>&1
		rps=$(awk '/Requests\/sec/ {print $2}' "$OUT/$api-r$r.txt")
		non2xx=$(awk '/Non-2xx/ {print $5}' "$OUT/$api-r$r.txt")
		[ -z "$non2xx" ] || die "$api round $r: $non2xx non-2xx answers (see $OUT/$api-r$r.txt)"
		log "round $r $api: $rps PUT/s"
		SUM[$api]=$(awk -v a="${SUM[$api]:-0}" -v b="$rps" 'BEGIN {print a + b}')
	done
done
{
	echo "PUT of new ${BODY_BYTES}-byte files into one node, wrk -t2 -c$CONNS, ${DURATION}s, mean of $ROUNDS alternating rounds"
	echo "$(date -u +%Y-%m-%dT%H:%MZ); $(machine_info)"
	echo "command: DURATION=$DURATION ROUNDS=$ROUNDS CONNS=$CONNS BODY_BYTES=$BODY_BYTES bench/put.sh"
	echo
	echo "| native PUT/s | WebDAV PUT/s | WebDAV/native |"
	echo "|---:|---:|---:|"
	awk -v n="${SUM[native]}" -v d="${SUM[dav]}" -v r="$ROUNDS" 'BEGIN {printf "| %.0f | %.0f | %.2f |\n", n / r, d / r, d / n}'
} | tee "$OUT/table.md"
