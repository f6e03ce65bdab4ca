#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# bench/put.sh: PUT throughput of new 15 KB files into one Cairn node, and
# the node's CPU per PUT, for each API in APIS, alternating, ROUNDS rounds
# of DURATION s at CONNS connections. Each request writes a new file at the
# bucket's root (WebDAV needs an existing parent). APIS:
#
#   native      native PUT with wrk (bench/wrk/put.lua; every body the same)
#   dav         WebDAV PUT (/_dav/BUCKET/) with wrk, the same bodies
#   gonative    native PUT with bench/s3put (a different body per request)
#   s3          S3 PutObject with bench/s3put: SigV4 in the header and the
#               body's SHA-256 as x-amz-content-sha256, as the aws CLI and
#               the SDKs send over HTTP
#   s3unsigned  the same with UNSIGNED-PAYLOAD (as rclone sends)
#
# gonative, s3 and s3unsigned share one client, so their node CPU per PUT
# compares the APIs alone. The node's CPU is utime + stime from
# /proc/PID/stat around each round. Prints a table: PUT/s and node µs per
# PUT of each API, and each one's ratios to the first API of APIS.
#
# A first round of 2 s of each API (round 0) warms the node and is not
# recorded.
#
# Settings: APIS="native dav" DURATION=8 ROUNDS=3 CONNS=20 BODY_BYTES=15000 CAIRN_BIN.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
APIS=${APIS:-"native dav"}
DURATION=${DURATION:-8}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-20}
BODY_BYTES=${BODY_BYTES:-15000}
need_tools wrk:wrk curl:curl
bench_traps
check_quiet
resolve_cairn_bin
OUT=$DATA_DIR/results/put-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT" "$DATA_DIR/bin"
case " $APIS " in *" gonative "* | *" s3"*)
	log "building bench/s3put"
	(cd "$REPO_DIR" && go build -o "$DATA_DIR/bin/s3put" ./bench/s3put) >&2 || die "go build ./bench/s3put failed"
	;;
esac
cairn_start "$(pick_port)"
cairn bucket create putbench >/dev/null || die "bucket create failed"
kid="" ksecret=""
case " $APIS " in *" s3"*)
	keyjson=$(cairn key create bench-s3put --allow write --json) || die "cairn key create failed"
	kid=$(sed -n 's/.*"id": "\(.*\)".*/\1/p' <<<"$keyjson")
	ksecret=$(sed -n 's/.*"secret": "\(.*\)".*/\1/p' <<<"$keyjson")
	;;
esac
# field NAME TEXT: the value of NAME=VALUE in TEXT (bench/s3put's line).
field() { grep -o "$1=[^ ]*" <<<"$2" | cut -d= -f2; }
basic="Basic $(printf 'anyone:%s' "$CAIRN_ADMIN_KEY" | base64 -w0)"
declare -A SUM CPU
for r in $(seq 0 "$ROUNDS"); do
	for api in $APIS; do
		dur=$DURATION
		[ "$r" -gt 0 ] || dur=2
		f=$OUT/$api-r$r.txt
		t0=$(pid_ticks "$CAIRN_PID")
		case $api in
		native | dav)
			if [ "$api" = native ]; then prefix=/putbench/$api-r$r- auth="Bearer $CAIRN_ADMIN_KEY"; else prefix=/_dav/putbench/$api-r$r- auth=$basic; fi
			wrk -t2 -c"$CONNS" -d"${dur}s" -s "$BENCH_DIR/wrk/put.lua" "$CAIRN_URL" -- "$prefix" "$auth" "$BODY_BYTES" >"$f" 2>&1
			t1=$(pid_ticks "$CAIRN_PID")
			non2xx=$(awk '/Non-2xx/ {print $5}' "$f")
			[ -z "$non2xx" ] || die "$api round $r: $non2xx non-2xx answers (see $f)"
			rps=$(awk '/Requests\/sec/ {print $2}' "$f")
			n=$(awk '/requests in/ {print $1}' "$f")
			;;
		gonative | s3 | s3unsigned)
			mode=$api
			[ "$api" != gonative ] || mode=native
			"$DATA_DIR/bin/s3put" -url "$CAIRN_URL" -bucket putbench -prefix "$api-r$r-" -mode "$mode" -key "$CAIRN_ADMIN_KEY" \
				-id "$kid" -secret "$ksecret" -conc "$CONNS" -duration "${dur}s" -size "$BODY_BYTES" >"$f" 2>&1 || die "$api round $r failed (see $f)"
			t1=$(pid_ticks "$CAIRN_PID")
			[ "$(field errors "$(cat "$f")")" = 0 ] || die "$api round $r: errors (see $f)"
			n=$(field puts "$(cat "$f")")
			rps=$(awk -v n="$n" -v s="$(field seconds "$(cat "$f")")" 'BEGIN {printf "%.0f", n / s}')
			;;
		*) die "unknown API $api (want native, dav, gonative, s3 or s3unsigned)" ;;
		esac
		us=$(awk -v t=$((t1 - t0)) -v hz="$CLK_TCK" -v n="$n" 'BEGIN {printf "%.0f", t / hz * 1e6 / n}')
		log "round $r $api: $rps PUT/s, node CPU $us µs/PUT"
		[ "$r" -gt 0 ] || continue
		echo "$r,$api,$rps,$us" >>"$OUT/rounds.csv"
		SUM[$api]=$(awk -v a="${SUM[$api]:-0}" -v b="$rps" 'BEGIN {print a + b}')
		CPU[$api]=$(awk -v a="${CPU[$api]:-0}" -v b="$us" 'BEGIN {print a + b}')
	done
done
base=${APIS%% *}
{
	echo "PUT of new ${BODY_BYTES}-byte files into one node, $CONNS connections, ${DURATION}s, mean of $ROUNDS alternating rounds"
	echo "$(date -u +%Y-%m-%dT%H:%MZ); $(machine_info)"
	echo "command: APIS=\"$APIS\" DURATION=$DURATION ROUNDS=$ROUNDS CONNS=$CONNS BODY_BYTES=$BODY_BYTES bench/put.sh"
	echo
	echo "| API | PUT/s | node CPU µs/PUT | rounds (µs/PUT) | PUT/s / $base | CPU / $base |"
	echo "|---|---:|---:|---|---:|---:|"
	for api in $APIS; do
		rounds=$(awk -F, -v a="$api" '$2 == a {printf "%s%s", sep, $4; sep = ", "}' "$OUT/rounds.csv")
		awk -v a="$api" -v s="${SUM[$api]}" -v c="${CPU[$api]}" -v bs="${SUM[$base]}" -v bc="${CPU[$base]}" -v r="$ROUNDS" -v rr="$rounds" \
			'BEGIN {printf "| %s | %.0f | %.0f | %s | %.2f | %.2f |\n", a, s / r, c / r, rr, s / bs, c / bc}'
	done
} | tee "$OUT/table.md"
