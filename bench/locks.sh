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
# Then SQLITE_ROUNDS rounds (issue 34) of:
#   - SQLite, one writer: SQLITE_ROWS single-row transactions (rollback
#     journal, BEGIN IMMEDIATE, INSERT, COMMIT) into a new database on node
#     1's mount and in the local directory: commits a second, and the
#     ratio (target: cairn/local >= 0.5);
#   - SQLite from two nodes at once: a database made through node 1, then
#     SQLITE2_ROWS rows from a writer on node 1's mount and as many from
#     one on node 3's, each row its own transaction: commits a second over
#     both (target >= 100), and the database's integrity_check ("ok") and
#     row count (every row present), checked through node 1.
# Results under bench/.data/results/locks-DATE/. Needs root (FUSE with
# allow_other) and python3. Knobs: ROUNDS (3), PAIRS (300), HANDOVERS (40),
# SQLITE_ROUNDS (1), SQLITE_ROWS (2000), SQLITE2_ROWS (1000), CAIRN_BIN.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/lib.sh
source "$HERE/lib.sh"
ROUNDS=${ROUNDS:-3}
PAIRS=${PAIRS:-300}
HANDOVERS=${HANDOVERS:-40}
SQLITE_ROUNDS=${SQLITE_ROUNDS:-1}
SQLITE_ROWS=${SQLITE_ROWS:-2000}
SQLITE2_ROWS=${SQLITE2_ROWS:-1000}
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
kv() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" <<<"$2"; }
for r in $(seq 1 "$SQLITE_ROUNDS"); do
	rm -f "$RUN/local/one.db" "$M1/one.db"
	python3 "$HERE/locks.py" sqlite-init "$RUN/local/one.db"
	python3 "$HERE/locks.py" sqlite-init "$M1/one.db"
	l=$(timeout 900 python3 "$HERE/locks.py" sqlite "$RUN/local/one.db" "$SQLITE_ROWS" local) || die "sqlite on the local disk failed"
	c=$(timeout 900 python3 "$HERE/locks.py" sqlite "$M1/one.db" "$SQLITE_ROWS" node1) || die "sqlite on node 1's mount failed"
	printf 'round %d sqlite one writer, %d transactions: local %s | cairn %s | cairn/local %.3f\n' "$r" "$SQLITE_ROWS" "$l" "$c" \
		"$(echo "$(kv commits_per_s "$c") / $(kv commits_per_s "$l")" | bc -l)" | tee -a "$OUT/results.txt"
	rm -f "$M1/two.db"
	python3 "$HERE/locks.py" sqlite-init "$M1/two.db"
	deadline=$((SECONDS + 30))
	until [ -s "$M3/two.db" ]; do
		[ $SECONDS -lt $deadline ] || die "node 3 does not see the database"
		sleep 0.1
	done
	t0=$(date +%s.%N)
	timeout 900 python3 "$HERE/locks.py" sqlite "$M1/two.db" "$SQLITE2_ROWS" node1 >"$OUT/two-node1.txt" &
	p1=$!
	timeout 900 python3 "$HERE/locks.py" sqlite "$M3/two.db" "$SQLITE2_ROWS" node3 >"$OUT/two-node3.txt" &
	p3=$!
	wait "$p1" || die "the sqlite writer on node 1 failed"
	wait "$p3" || die "the sqlite writer on node 3 failed"
	t1=$(date +%s.%N)
	chk=$(python3 "$HERE/locks.py" sqlite-check "$M1/two.db" $((2 * SQLITE2_ROWS))) || true
	printf 'round %d sqlite two nodes, 2 x %d transactions: %.1f commits/s over both (node 1 %s, node 3 %s); %s\n' "$r" "$SQLITE2_ROWS" \
		"$(echo "2 * $SQLITE2_ROWS / ($t1 - $t0)" | bc -l)" "$(kv commits_per_s "$(cat "$OUT/two-node1.txt")")" \
		"$(kv commits_per_s "$(cat "$OUT/two-node3.txt")")" "$chk" | tee -a "$OUT/results.txt"
done
log "results in $OUT/results.txt"
