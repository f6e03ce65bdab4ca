#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# bench/s3profile.sh: one Cairn node under native GETs, then under S3 GETs
# signed in the Authorization header (the SDKs' GetObject), back to back,
# with the server's CPU per request and a CPU profile of each run.
#
#   bench/s3profile.sh [OUTDIR]
#
# The node (CAIRN_BIN, default bin/cairn) is loaded with the small corpus
# (cairn sync); an access key with read signs a GET of each file
# (bench/presign -header); wrk (2 threads, CONNS connections, DURATION
# seconds, random.lua) requests random files natively, then signed, after
# a 5 s warm-up of each; pprof's CPU profile of each run is written to
# OUTDIR/native.prof and OUTDIR/s3h.prof (the node runs with
# --debug-listen). Prints one line per run: req/s and server CPU µs per
# request. Settings: DURATION=9 CONNS=20 SCALE SEED (lib.sh).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

DURATION=${DURATION:-9}
CONNS=${CONNS:-20}
need_tools wrk:wrk curl:curl
bench_traps
ensure_corpus small
OUT=${1:-$DATA_DIR/results/s3profile-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
DEBUG_PORT=$(pick_port)
CAIRN_EXTRA_ARGS="${CAIRN_EXTRA_ARGS:-} --debug-listen 127.0.0.1:$DEBUG_PORT" cairn_start "$(pick_port)"
export CAIRN_SERVER=$CAIRN_URL
cairn_load "$CORPUS_DIR/small" small
keyjson=$("$CAIRN_BIN" key create bench-s3profile --allow read --json) || die "cairn key create failed"
kid=$(sed -n 's/.*"id": "\(.*\)".*/\1/p' <<<"$keyjson")
ksecret=$(sed -n 's/.*"secret": "\(.*\)".*/\1/p' <<<"$keyjson")
(cd "$REPO_DIR" && go build -o "$OUT/presign" ./bench/presign) || die "building bench/presign failed"
"$OUT/presign" -header -base "$CAIRN_URL" -bucket small -id "$kid" -secret "$ksecret" \
	<"$CORPUS_DIR/small/paths.txt" >"$OUT/signed.txt" || die "signing failed"
for kind in native s3h; do
	paths=$CORPUS_DIR/small/paths.txt prefix=/small/
	if [ "$kind" = s3h ]; then paths=$OUT/signed.txt prefix=/; fi
	wrk -t2 -c"$CONNS" -d5s -s "$BENCH_DIR/wrk/random.lua" "$CAIRN_URL" -- "$paths" "$prefix" "$SEED" >/dev/null ||
		die "warm-up ($kind) failed"
	c0=$(pid_ticks "$CAIRN_PID")
	curl -s "http://127.0.0.1:$DEBUG_PORT/debug/pprof/profile?seconds=$((DURATION - 1))" >"$OUT/$kind.prof" &
	prof=$!
	wrk -t2 -c"$CONNS" -d"${DURATION}s" -s "$BENCH_DIR/wrk/random.lua" "$CAIRN_URL" -- "$paths" "$prefix" "$SEED" >"$OUT/$kind.wrk" ||
		die "wrk ($kind) failed: $(tail -n 3 "$OUT/$kind.wrk")"
	wait "$prof"
	c1=$(pid_ticks "$CAIRN_PID")
	awk -v kind="$kind" -v t=$((c1 - c0)) -v k="$CLK_TCK" '/^BENCH_RESULT/ {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		printf "%s: %.0f req/s, server CPU %.1f µs/request (%d requests)\n", kind, v["rps"], t / k * 1e6 / v["requests"], v["requests"]
	}' "$OUT/$kind.wrk"
done
log "profiles and wrk output in $OUT (go tool pprof $CAIRN_BIN $OUT/s3h.prof)"
