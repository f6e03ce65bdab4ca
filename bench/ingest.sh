#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# bench/ingest.sh: ingest benchmark, `cairn sync` into a fresh Cairn node
# against copying the same files into a local directory on the same disk.
#
# Workloads:
#   small   the small corpus (20,000 files, median 15 KB):
#           baseline `cp -r CORPUS DEST; sync`
#   kernel  the Linux kernel source tree of Debian's linux-source-6.1
#           (~80,000 files): baselines `tar -xf linux-source-6.1.tar -C DEST; sync`
#           (the users' "untar a kernel tree") and `cp -r TREE DEST; sync`
#
# The Cairn side is `cairn sync SRC BUCKET --no-progress --jobs 64; sync` into a
# new public bucket of a new single node with an empty data directory, started
# before the clock starts. Every timed step ends with `sync`, so neither side
# is timed without flushing its writes (Cairn acknowledges only durable
# writes; cp and tar would otherwise stop the clock with data in the page
# cache). An untimed `sync` precedes every step, and the sources are read once
# beforehand, so every side reads its input from the page cache.
#
# The kernel tarball is decompressed once to bench/.data/kernel/*.tar and
# extracted once to bench/.data/kernel/tree/ (the source for cp -r and cairn
# sync): xz time is in neither side's figure.
#
# Each round runs the baselines then Cairn, alternating; the table shows the
# best (shortest) time of ROUNDS rounds per method, and the ratio of the mean
# times too. After each Cairn run the file count is checked through the
# listing API and SPOT_CHECK random files are compared byte for byte.
#
# Settings (environment):
#   WORKLOADS="small kernel"   ROUNDS=2   SYNC_JOBS=64   SPOT_CHECK=20
#   KERNEL_PKG=linux-source-6.1   SEED=1 SCALE=1 (small corpus)
#   BASELINE_ONLY=1   skip Cairn (proves the baseline side)
#   VERIFY=0          skip the file count check (the spot check still runs)
#   CAIRN_BIN=path    KEEP=1 (keep scratch directories)
#
# Output: the markdown table on stdout; results.csv, table.md and the CLI
# logs under bench/.data/results/ingest-DATE/.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

WORKLOADS=${WORKLOADS:-"small kernel"}
ROUNDS=${ROUNDS:-2}
SYNC_JOBS=${SYNC_JOBS:-64}
SPOT_CHECK=${SPOT_CHECK:-20}
KERNEL_PKG=${KERNEL_PKG:-linux-source-6.1}
BASELINE_ONLY=${BASELINE_ONLY:-0}
VERIFY=${VERIFY:-1}
export SYNC_JOBS

need_tools curl:curl tar:tar xz:xz-utils sha256sum:coreutils
bench_traps
check_quiet
[ "$BASELINE_ONLY" = 1 ] || resolve_cairn_bin

KDIR=$DATA_DIR/kernel
KTAR=$KDIR/$KERNEL_PKG.tar

# ensure_kernel: the decompressed tarball and the extracted tree, cached.
ensure_kernel() {
	local txz=/usr/src/$KERNEL_PKG.tar.xz
	mkdir -p "$KDIR"
	if [ ! -f "$KTAR" ]; then
		[ -f "$txz" ] || apt_install "$KERNEL_PKG"
		[ -f "$txz" ] || die "$KERNEL_PKG did not install $txz"
		log "decompressing $txz once to $KTAR (xz time is excluded from every figure)"
		xz -dc "$txz" >"$KTAR.tmp" || die "xz -d $txz failed"
		mv "$KTAR.tmp" "$KTAR"
	fi
	if [ ! -f "$KDIR/tree.done" ]; then
		log "extracting $KTAR once to $KDIR/tree (the source of cp -r and cairn sync)"
		rm -rf -- "$KDIR/tree"
		mkdir -p "$KDIR/tree"
		tar -xf "$KTAR" -C "$KDIR/tree" || die "tar -x $KTAR failed"
		touch "$KDIR/tree.done"
	fi
	KTREE=$(find "$KDIR/tree" -mindepth 1 -maxdepth 1 -type d | head -n1)
	[ -n "$KTREE" ] || die "no directory in $KDIR/tree"
}

# describe SRC NAME: set SRC_FILES, SRC_LINKS, SRC_BYTES and write the relative
# paths of the regular files to $OUT/NAME.paths (for the spot check).
describe() {
	local src=$1 name=$2
	(cd "$src" && find . -type f -printf '%P\n') >"$OUT/$name.paths"
	SRC_FILES=$(wc -l <"$OUT/$name.paths")
	SRC_LINKS=$(find "$src" -type l | wc -l)
	SRC_BYTES=$(find "$src" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
	log "$name: $SRC_FILES regular files, $SRC_LINKS symlinks, $(awk -v b="$SRC_BYTES" 'BEGIN {printf "%.1f", b / 1e6}') MB in $src"
}

# warm SRC: read every file once so every side reads from the page cache.
warm() {
	tar -cf - -C "$1" . | cat >/dev/null
}

now() { echo "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", b - a}'; }

# record WORKLOAD ROUND METHOD SECONDS STATUS
record() {
	echo "$1,$2,$3,$4,$SRC_FILES,$SRC_BYTES,$5" >>"$CSV"
	log "$1 round $2: $3 took $4 s ($5)"
}

# time_local WORKLOAD ROUND METHOD CMD...: run CMD then sync, timed. The
# caller makes the destination with `scratch_dir DEST NAME` first (so CMD can
# name "$DEST"); it is removed afterwards.
time_local() {
	local w=$1 r=$2 m=$3 t0 t1 status=ok
	shift 3
	sync
	t0=$(now)
	"$@" || status=FAIL
	sync
	t1=$(now)
	record "$w" "$r" "$m" "$(elapsed "$t0" "$t1")" "$status"
	[ "$status" = ok ] || FAILED=1
	rm -rf -- "$DEST"
}

# cairn_count BUCKET: print the number of files in BUCKET (listing API).
cairn_count() { cairn_count_at "$CAIRN_URL" "$1"; }

# time_cairn WORKLOAD ROUND SRC: cairn sync SRC into a fresh node, timed.
time_cairn() {
	local w=$1 r=$2 src=$3 t0 t1 status=ok got
	cairn_start "$(pick_port)"
	cairn bucket create "$w" --public >>"$OUT/cairn-$w-r$r.log" 2>&1 ||
		die "cairn bucket create $w failed (see $OUT/cairn-$w-r$r.log)"
	sync
	t0=$(now)
	cairn sync "$src" "$w" --no-progress --jobs "$SYNC_JOBS" >>"$OUT/cairn-$w-r$r.log" 2>&1 || status=FAIL
	sync
	t1=$(now)
	record "$w" "$r" "cairn sync" "$(elapsed "$t0" "$t1")" "$status"
	if [ "$status" != ok ]; then
		tail -n 20 "$OUT/cairn-$w-r$r.log" >&2
		die "cairn sync $src failed (see $OUT/cairn-$w-r$r.log, server log $CAIRN_DATA/server.log)"
	fi
	if [ "$VERIFY" = 1 ]; then
		got=$(cairn_count "$w") || die "could not list bucket $w to count its files (VERIFY=0 skips this)"
		if [ "$got" -ne "$SRC_FILES" ] && [ "$got" -ne $((SRC_FILES + SRC_LINKS)) ]; then
			die "bucket $w holds $got files; the source has $SRC_FILES regular files and $SRC_LINKS symlinks"
		fi
		log "bucket $w holds $got files (source: $SRC_FILES regular files, $SRC_LINKS symlinks)"
	fi
	spot_check "$CAIRN_URL/$w" "$src" "$OUT/$w.paths" "$SPOT_CHECK"
	cairn_stop
	rm -rf -- "$CAIRN_DATA"
}

OUT=$DATA_DIR/results/ingest-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
CSV=$OUT/results.csv
echo "workload,round,method,seconds,files,bytes,status" >"$CSV"
FAILED=0

for w in $WORKLOADS; do
	case "$w" in
	small)
		ensure_corpus small
		SRC=$CORPUS_DIR/small
		describe "$SRC" small
		warm "$SRC"
		for r in $(seq 1 "$ROUNDS"); do
			scratch_dir DEST ingest-small
			time_local small "$r" "cp -r" cp -r "$SRC" "$DEST/small"
			[ "$BASELINE_ONLY" = 1 ] || time_cairn small "$r" "$SRC"
		done
		;;
	kernel)
		ensure_kernel
		describe "$KTREE" kernel
		warm "$KTREE"
		cat "$KTAR" >/dev/null
		for r in $(seq 1 "$ROUNDS"); do
			scratch_dir DEST ingest-kernel
			time_local kernel "$r" "tar -x" tar -xf "$KTAR" -C "$DEST"
			scratch_dir DEST ingest-kernel
			time_local kernel "$r" "cp -r" cp -r "$KTREE" "$DEST/tree"
			[ "$BASELINE_ONLY" = 1 ] || time_cairn kernel "$r" "$KTREE"
		done
		;;
	*) die "unknown workload $w (want small or kernel)" ;;
	esac
done

{
	echo "Ingest into a fresh single Cairn node (cairn sync --jobs $SYNC_JOBS) vs local copies on the same disk; every time includes a final sync; best of $ROUNDS alternating rounds"
	echo "$(date -u +%Y-%m-%dT%H:%MZ); $(machine_info)"
	echo "command: WORKLOADS=\"$WORKLOADS\" ROUNDS=$ROUNDS SYNC_JOBS=$SYNC_JOBS SCALE=$SCALE SEED=$SEED bench/ingest.sh"
	echo
	awk -F, '
	NR == 1 { next }
	$7 != "ok" { next }
	{
		k = $1 SUBSEP $3
		if (!($1 in files)) { worder[++nw] = $1 }
		files[$1] = $5; bytes[$1] = $6
		if (!(k in best)) { morder[$1, ++nm[$1]] = $3 }
		if (!(k in best) || $4 < best[k]) best[k] = $4
		sum[k] += $4; cnt[k]++
	}
	END {
		print "| workload | files | MB | method | best s | mean s | files/s (best) | MB/s (best) | Cairn/this (best time) | Cairn/this (mean time) |"
		print "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"
		for (i = 1; i <= nw; i++) {
			w = worder[i]; kc = w SUBSEP "cairn sync"
			for (j = 1; j <= nm[w]; j++) {
				m = morder[w, j]; k = w SUBSEP m
				rb = "—"; rm = "—"
				if (m != "cairn sync" && (kc in best)) {
					rb = sprintf("%.2f", best[kc] / best[k])
					rm = sprintf("%.2f", (sum[kc] / cnt[kc]) / (sum[k] / cnt[k]))
				}
				printf "| %s | %d | %.1f | %s | %.2f | %.2f | %.0f | %.1f | %s | %s |\n", w, files[w], bytes[w] / 1e6, m,
					best[k], sum[k] / cnt[k], files[w] / best[k], bytes[w] / 1e6 / best[k], rb, rm
			}
		}
	}' "$CSV"
	awk -F, 'NR > 1 && $7 != "ok" { printf "\nFAILED: %s round %s, %s\n", $1, $2, $3 }' "$CSV"
} | tee "$OUT/table.md"
log "raw results in $OUT"
[ "$FAILED" -eq 0 ] || die "some steps failed (marked FAIL in $CSV)"
