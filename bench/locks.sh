#!/usr/bin/env bash
# bench/locks.sh: file locks across the cluster (issue 20).
#
# A 3-node `cairn dev` cluster on 127.0.0.1 whose nodes mount bucket "web"
# with handles (`--mount-handles`: flock needs them), and a local directory
# on the same disk, in the same run, alternating, ROUNDS rounds:
#   - an uncontended flock(LOCK_EX) + flock(LOCK_UN) pair, and an fcntl
#     write lock + unlock pair, PAIRS times each, on a file of node 1's
#     mount and on a local file: mean and p99 per pair, and the ratio;
#   - a hand-over: a process holding an exclusive flock through node 1's
#     mount unlocks while another waits through node 3's, HANDOVERS times:
#     the time from just before the unlock to the waiter's return
#     (median, p99).
# Results under bench/.data/results/locks-DATE/. Needs root (FUSE with
# allow_other) and python3. Knobs: ROUNDS (3), PAIRS (300), HANDOVERS (40),
# CAIRN_BIN.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/lib.sh
source "$HERE/lib.sh"
ROUNDS=${ROUNDS:-3}
PAIRS=${PAIRS:-300}
HANDOVERS=${HANDOVERS:-40}
[ "$(id -u)" -eq 0 ] || die "run as root: the mounts use allow_other"
[ -e /dev/fuse ] || die "no /dev/fuse"
have python3 || die "python3 is needed"
bench_traps
resolve_cairn_bin
OUT=$DATA_DIR/results/locks-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
scratch_dir RUN locks
port=$(pick_port)
"$CAIRN_BIN" dev --data "$RUN/data" --nodes 3 --port "$port" --mount web --mount-handles >"$OUT/dev.log" 2>&1 &
DEV_PID=$!
BENCH_PIDS+=("$DEV_PID")
M1=$RUN/data/mnt/node1/web
M3=$RUN/data/mnt/node3/web
deadline=$((SECONDS + 90))
until mountpoint -q "$M1" && mountpoint -q "$M3"; do
	[ $SECONDS -lt $deadline ] || die "the mounts did not come up (see $OUT/dev.log)"
	sleep 0.5
done
mkdir -p "$RUN/local"
echo x >"$M1/lockfile"
echo x >"$RUN/local/lockfile"
deadline=$((SECONDS + 30))
until [ -s "$M3/lockfile" ]; do
	[ $SECONDS -lt $deadline ] || die "node 3 does not see the file"
	sleep 0.1
done
machine_info >"$OUT/machine.txt" 2>/dev/null || true
for r in $(seq 1 "$ROUNDS"); do
	for kind in pair fcntl; do
		l=$(python3 "$HERE/locks.py" "$kind" "$RUN/local/lockfile" "$PAIRS")
		c=$(python3 "$HERE/locks.py" "$kind" "$M1/lockfile" "$PAIRS")
		lm=${l#mean_us=}; lm=${lm%% *}
		cm=${c#mean_us=}; cm=${cm%% *}
		printf 'round %d %-5s local %s | cairn %s | cairn/local %.1f\n' "$r" "$kind" "$l" "$c" \
			"$(echo "$cm / $lm" | bc -l)" | tee -a "$OUT/results.txt"
	done
	h=$(python3 "$HERE/locks.py" handover "$M1/lockfile" "$M3/lockfile" "$HANDOVERS")
	printf 'round %d handover node1->node3 %s\n' "$r" "$h" | tee -a "$OUT/results.txt"
done
log "results in $OUT/results.txt"
