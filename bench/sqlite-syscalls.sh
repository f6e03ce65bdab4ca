#!/usr/bin/env bash
# bench/sqlite-syscalls.sh: where an SQLite transaction on the mount spends
# its time (issue 34). A 3-node `cairn dev` cluster mounting bucket "web"
# with handles; one SQLite writer (rollback journal, one row a
# transaction, bench/locks.py) on node 1's mount: WARM transactions, then
# TXNS more under `strace -f -T`; prints the system-call time a
# transaction, split into fdatasync, pwrite, fcntl, stat and the rest,
# and the time of a bare commit (mkdir plus a directory fsync) for
# comparison. Needs root, python3 and strace. Knobs: WARM (100), TXNS
# (20), CAIRN_BIN.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/lib.sh
source "$HERE/lib.sh"
WARM=${WARM:-100}
TXNS=${TXNS:-20}
[ "$(id -u)" -eq 0 ] || die "run as root: the mounts use allow_other"
have python3 || die "python3 is needed"
have strace || die "strace is needed (apt-get install strace)"
bench_traps
resolve_cairn_bin
OUT=$DATA_DIR/results/sqlite-syscalls-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
scratch_dir RUN sqlite-syscalls
port=$(pick_port)
"$CAIRN_BIN" dev --data "$RUN/data" --nodes 3 --port "$port" --mount web --mount-handles >"$OUT/dev.log" 2>&1 &
BENCH_PIDS+=("$!")
M1=$RUN/data/mnt/node1/web
deadline=$((SECONDS + 90))
until mountpoint -q "$M1"; do
	[ $SECONDS -lt $deadline ] || die "the mount did not come up (see $OUT/dev.log)"
	sleep 0.5
done
python3 "$HERE/locks.py" sqlite-init "$M1/p.db"
python3 "$HERE/locks.py" sqlite "$M1/p.db" "$WARM" warm | tee "$OUT/warm.txt"
strace -f -T -e trace=openat,close,fcntl,fsync,fdatasync,unlink,pwrite64,pread64,newfstatat,fstat,lseek \
	-o "$OUT/strace.txt" python3 "$HERE/locks.py" sqlite "$M1/p.db" "$TXNS" traced | tee "$OUT/traced.txt"
awk -F'<' '/-journal", O_RDWR\|O_CREAT/ {n++}
	n >= 1 && /<[0-9.]+>$/ {gsub(">", "", $NF); s += $NF
		if ($0 ~ /fdatasync|fsync/) fs += $NF; else if ($0 ~ /fcntl/) fc += $NF
		else if ($0 ~ /pwrite/) pw += $NF; else if ($0 ~ /stat/) st += $NF}
	END {printf "per transaction (%d): system calls %.2f ms: fdatasync %.2f, pwrite %.2f, fcntl %.2f, stat %.2f, other %.2f\n",
		n, s * 1e3 / n, fs * 1e3 / n, pw * 1e3 / n, fc * 1e3 / n, st * 1e3 / n, (s - fs - fc - pw - st) * 1e3 / n}' \
	"$OUT/strace.txt" | tee "$OUT/results.txt"
python3 - "$M1" <<'PY' | tee -a "$OUT/results.txt"
import os, statistics, sys, time
m = sys.argv[1]
ts = []
for i in range(100):
    t = time.perf_counter()
    os.mkdir(os.path.join(m, "bare%d" % i))
    fd = os.open(m, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    ts.append(time.perf_counter() - t)
print("a bare commit (mkdir + directory fsync), p50 %.2f ms" % (statistics.median(ts) * 1e3))
PY
log "results in $OUT/results.txt"
