#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# shellcheck disable=SC2016 # the bash -c scripts read their own $1, $2...
# bench/mount.sh: the POSIX mount (FUSE) of a 3-node Cairn cluster against a
# local ext4 directory, doing the same work, in the same run (issue 9), and
# beside them a plain FUSE loopback of an ext4 directory (issue 19's limit
# column: what FUSE itself costs on this machine, without Cairn).
#
# The loopback is go-fuse's own example (example/loopback, the version of
# go.mod), built at run time into a scratch directory outside the
# repository (`go install ...@VERSION`), mounted with -allow-other
# -directmount over a directory of the local ext4 side. LOOPBACK=0 leaves
# it out.
#
# One cluster of three `cairn server` processes on 127.0.0.1 (R=3, the
# default), each mounting bucket "web" on its own directory
# (`--mount web:DIR`), serves every part. The local side is a directory on
# ext4: under bench/.data/run/ when that is ext4, else an ext4 loop image
# made for the run (LOCAL_IMG_GB). Cairn's data directories are on the same
# disk as bench/.data/. Parts (arguments, or BENCHES; default all, in this
# order):
#
#   php     WordPress (Debian's `wordpress` package, MariaDB, nginx and
#           php-fpm, all on this machine, nginx on 127.0.0.1, MariaDB on a
#           Unix socket only): the code and an uploads directory (the small
#           corpus at WP_UPLOAD_SCALE) copied onto node 2's mount and onto the
#           local directory; one nginx serves both trees (two ports), one
#           php-fpm pool runs both. `siege -c PHP_CONC -r PHP_REPS` over a
#           list of pages (home, posts, archive, search, login) and static
#           files (theme CSS, jQuery, uploads): siege's elapsed time;
#           then each PHP page alone (siege -c PHP_CONC -r PHP_PAGE_REPS of
#           that URL), since the static files of the mix hide PHP's cost.
#           Target: Cairn/local time <= 1.1 for each page alone.
#   mediawiki
#           MediaWiki 1.39 (Debian's `mediawiki` package; APCu as its
#           object cache), a heavier PHP application, with the php part's
#           servers and settings (PHP_CONC, PHP_PAGE_REPS, PHP_WORKERS,
#           PHP_NODE, PHP_MAX_S): Debian's tree with its symlinks followed,
#           installed offline (maintenance/install.php, stock skins, no
#           extensions) into a database of its own, a content page of
#           wikitext (sections, a table, links, two templates) written with
#           maintenance/edit.php, then copied onto node 2's mount and onto
#           the local directory; both copies share the database and APCu,
#           each has its own localisation cache on the local disk (the
#           cache records the paths of the files it was built from and
#           stats them on every request). Each page alone under `siege -c
#           PHP_CONC -r PHP_PAGE_REPS` after one unrecorded pass: the main
#           page, the content page, load.php's startup module (the module
#           registry: about 1,100 module files checked) and the main page's
#           stylesheet (a load.php styles request).
#           Target (issue 33): Cairn/local time <= 1.05 for each page
#           alone.
#   reads   READ_FILES files of 500-800 KB (the medium corpus at
#           READ_FILES/2000) on node 2's mount and on the local directory;
#           READ_CONC (20, 30) concurrent readers (xargs -P N cat of random
#           files, a bounded list): cold (every file once, in a random
#           order, after sync and drop_caches) and warm (READ_COUNT random
#           files, after one unrecorded pass). Files/s.
#           Target: Cairn/local files/s >= 0.9.
#   untar   the Linux kernel tree (Debian's linux-source-6.1; KERNEL_TAR
#           names another tarball) extracted with `tar -x` onto node 1's
#           mount and into the local directory, then `sync`. Afterwards
#           node 3's mount must list as many entries (`find | wc -l`, waited
#           for at most 60 s) and UNTAR_SAMPLE random files must have the
#           local copies' SHA-256. Target: Cairn/local time <= 3.
#   meta    `find TREE -type f -print0 | xargs -0 stat` over the extracted
#           kernel tree (the last untar round's, or one extracted for this
#           part), through node META_NODE's mount, warm (one unrecorded
#           pass per side first; the two passes' listings of path, size
#           and mode must be equal). Target: Cairn/local time <= 1.2.
#   large   one LARGE_MB MB file (10^6 bytes; default 620) copied with `cp`
#           onto node 1's mount and into the local directory, then `sync`;
#           its SHA-256 read back through node 3's mount must match.
#           Target: Cairn/local time <= 2.
#   small   bench/smallfiles (a Go helper built for the run): SMALL_THREADS
#           threads open, read whole and close SMALL_COUNT random files of
#           the small corpus (SMALL_FILES files, 15 KB on average) already
#           read once (warm), as a framework does with its templates on
#           every request; then SMALL_MISSES first stats of names that do
#           not exist (a PHP autoloader's probes), and the same again
#           (cached misses). Node SMALL_NODE. Targets: reads Cairn/local
#           time <= 1.2; misses measured (µs each).
#   tree    the first TREE_LIMIT members of the kernel tarball (4000; 0:
#           all of it) extracted (untimed), then timed: `chmod -R g+w`,
#           `chown -R 1000:1000`, `rm -rf`, each followed by `sync` and
#           `sync DIR`. Node TREE_NODE. Target: Cairn/local time <= 3.
#   git     `git clone` of a local bare repository (GIT_FILES files of the
#           kernel tree in one commit, made once under bench/.data) onto
#           the mount, then `sync`. Node GIT_NODE. Target: Cairn/local <= 3.
#   upload  PHP's upload pattern (bench/smallfiles -mode upload): UPLOAD_COUNT
#           files of 200 KB to 5 MB, each written to a temporary name and
#           renamed into place, then an fsync of the directory. Node
#           UPLOAD_NODE. Target (issue 32): Cairn/local time <= 1.8.
#   contend a contended directory (Cairn only: it takes two nodes): nodes
#           1 and 3 each create CONTEND_COUNT files of 1 KB (O_EXCL, write,
#           close) in one shared directory at the same time
#           (bench/smallfiles -mode contend); all 2 x CONTEND_COUNT must be
#           there. Records the total time and the p50 and p99 of a create
#           (the rows "create p50/p99 (ms)": their seconds column holds
#           milliseconds). Target (issue 32): p99 <= 20 ms.
#
# FUSE calls: around every timed run on the Cairn side, the node's
# GET /_cairn/mounts is read before and after; calls.tsv has the calls of
# each opcode the run cost, in all and per item (per page, per file), and
# the table ends with the largest of them per case.
#
# Rounds: ROUNDS per case, rotating the order of the sides (local,
# loopback, Cairn in round 1; loopback, Cairn, local in round 2; ...). Every timed write
# starts after an untimed `sync` and ends with `sync` and `sync DIR` (fsync
# of the destination directory: a bare sync does not wait for the mount's
# write-back queue, go-fuse has no FUSE_SYNCFS); every source is read
# once beforehand, so both sides read their input from the page cache.
# Every load is bounded in count (siege -r, a list of files, one tarball)
# and in time (`timeout`, *_MAX_S): a run that hits its bound is recorded as
# FAIL and the script exits 1 at the end.
#
# Cold reads: `sync; echo 3 > /proc/sys/vm/drop_caches` before each cold
# run. A Cairn node reads its volume files through memory maps, and the
# kernel does not drop pages that are mapped, so with COLD_RESTART=1 (the
# default) the reading node is also restarted (SIGTERM: it unmounts; then
# the same data directory, the same flags) before each of its cold runs,
# untimed. The log reports how much of the node's volume files stayed in
# the page cache after the drop (fincore).
#
# Settings (environment):
#   ROUNDS=3  BENCHES="php reads untar meta large" (or as arguments)
#   php:   PHP_CONC=20 PHP_REPS (requests per siege user; default 5 passes
#          over the URL list) PHP_PAGE_REPS=10 (each PHP page alone) PHP_WORKERS=8 (php-fpm children) WP_POSTS=30
#          WP_UPLOAD_SCALE=0.01 (200 files) PHP_NODE=2 PHP_MAX_S=600
#   mediawiki: the php part's PHP_CONC PHP_PAGE_REPS PHP_WORKERS PHP_NODE
#          PHP_MAX_S
#   reads: READ_FILES=300 READ_CONC="20 30" READ_COUNT=3000 READ_BATCH=20
#          (files per cat) READ_CACHE="cold warm" READ_NODE=2 READ_MAX_S=300
#          COLD_RESTART=1
#   untar: KERNEL_TAR (a .tar, .tar.xz or .tar.gz; default the Debian
#          package's, decompressed once) KERNEL_PKG=linux-source-6.1
#          UNTAR_LIMIT (extract only the first N members: a smoke run)
#          UNTAR_NODE=1 CHECK_NODE=3 UNTAR_SAMPLE=50 UNTAR_MAX_S=3600
#   meta:  META_NODE=1 META_MAX_S=900
#   large: LARGE_MB=620 LARGE_NODE=1 LARGE_MAX_S=1200
#   small: SMALL_FILES=2000 SMALL_THREADS=8 SMALL_COUNT=100000
#          SMALL_MISSES=20000 SMALL_NODE=2 SMALL_MAX_S=300
#   tree:  TREE_LIMIT=4000 TREE_NODE=1 TREE_MAX_S=1800
#   git:   GIT_FILES=3000 GIT_NODE=1 GIT_MAX_S=900
#   upload: UPLOAD_COUNT=200 UPLOAD_NODE=2 UPLOAD_MAX_S=900
#   contend: CONTEND_COUNT=1000 CONTEND_MAX_S=600
#   LOOPBACK=1 (0: no loopback column)
#   LOCAL_DIR (use this directory as the local side; must be ext4)
#   LOCAL_IMG_GB=16 (size of the loop image when bench/.data is not ext4)
#   SEED=1 CAIRN_BIN SERVER_ARGS (extra flags for every node) KEEP=1
#   MOUNT_OPTS (the --mount options of every node's mount, e.g. noflush or
#          handles; docs/operations.md, the mode table; default none)
#   CLIENT=0: with 1, a fourth node, a client node (`--role client
#          --cache-size CLIENT_CACHE`, default 1 GiB: it stores no share
#          of the data, only its cache of what it read), mounts bucket web
#          too and is a fourth side, "client": it reads the trees the
#          Cairn side wrote through node PHP_NODE or SMALL_NODE (parts
#          php, mediawiki and small only). The table's last columns give
#          client/Cairn (issue 36's target: within 1.1x of a data node's
#          mount), and the log the client's RSS and cache after each part.
#
# Needs root (FUSE with allow_other, drop_caches, loop mounts) and installs
# what is missing with apt-get: siege, nginx, php-fpm, php-mysql,
# mariadb-server, wordpress, mediawiki (with php-apcu, php-intl,
# php-mbstring, php-xml, php-cli; without its recommends),
# linux-source-6.1, fuse3, jq, git. Go builds the loopback and
# bench/smallfiles.
#
# Output: the table on stdout; results.csv, table.md, node and server logs
# under bench/.data/results/mount-DATE/.
set -euo pipefail
# The settings given in the environment, for the table's command line.
SETTINGS="ROUNDS PHP_CONC PHP_REPS PHP_PAGE_REPS PHP_WORKERS PHP_NODE WP_POSTS WP_UPLOAD_SCALE READ_FILES READ_CONC READ_COUNT
READ_BATCH READ_CACHE READ_NODE COLD_RESTART KERNEL_TAR KERNEL_PKG UNTAR_LIMIT UNTAR_NODE CHECK_NODE UNTAR_SAMPLE
META_NODE LARGE_MB LARGE_NODE LOCAL_DIR LOCAL_IMG_GB BENCH_DATA SEED SERVER_ARGS CAIRN_BIN SMALL_FILES SMALL_THREADS
SMALL_COUNT SMALL_MISSES SMALL_NODE TREE_LIMIT TREE_NODE GIT_FILES GIT_NODE LOOPBACK UPLOAD_COUNT UPLOAD_NODE CONTEND_COUNT
CLIENT CLIENT_CACHE"
GIVEN=""
for v in $SETTINGS; do
	[ -z "${!v:-}" ] || GIVEN+="$v=$(printf '%q' "${!v}") "
done
. "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-3}
ALL_BENCHES="php mediawiki reads small untar tree git upload contend meta large"
BENCHES=${*:-${BENCHES:-$ALL_BENCHES}}
PHP_CONC=${PHP_CONC:-20}
PHP_REPS=${PHP_REPS:-}
PHP_WORKERS=${PHP_WORKERS:-8}
PHP_NODE=${PHP_NODE:-2}
PHP_MAX_S=${PHP_MAX_S:-600}
PHP_PAGE_REPS=${PHP_PAGE_REPS:-10}
WP_POSTS=${WP_POSTS:-30}
WP_UPLOAD_SCALE=${WP_UPLOAD_SCALE:-0.01}
READ_FILES=${READ_FILES:-300}
READ_CONC=${READ_CONC:-"20 30"}
READ_COUNT=${READ_COUNT:-3000}
READ_BATCH=${READ_BATCH:-20}
READ_CACHE=${READ_CACHE:-"cold warm"}
READ_NODE=${READ_NODE:-2}
READ_MAX_S=${READ_MAX_S:-300}
COLD_RESTART=${COLD_RESTART:-1}
KERNEL_PKG=${KERNEL_PKG:-linux-source-6.1}
KERNEL_TAR=${KERNEL_TAR:-}
UNTAR_LIMIT=${UNTAR_LIMIT:-}
UNTAR_NODE=${UNTAR_NODE:-1}
CHECK_NODE=${CHECK_NODE:-3}
UNTAR_SAMPLE=${UNTAR_SAMPLE:-50}
UNTAR_MAX_S=${UNTAR_MAX_S:-3600}
META_NODE=${META_NODE:-1}
META_MAX_S=${META_MAX_S:-900}
LARGE_MB=${LARGE_MB:-620}
LARGE_NODE=${LARGE_NODE:-1}
LARGE_MAX_S=${LARGE_MAX_S:-1200}
LOCAL_IMG_GB=${LOCAL_IMG_GB:-16}
SMALL_FILES=${SMALL_FILES:-2000}
SMALL_THREADS=${SMALL_THREADS:-8}
SMALL_COUNT=${SMALL_COUNT:-100000}
SMALL_MISSES=${SMALL_MISSES:-20000}
SMALL_NODE=${SMALL_NODE:-2}
SMALL_MAX_S=${SMALL_MAX_S:-300}
TREE_LIMIT=${TREE_LIMIT:-4000}
TREE_NODE=${TREE_NODE:-1}
TREE_MAX_S=${TREE_MAX_S:-1800}
GIT_FILES=${GIT_FILES:-3000}
GIT_NODE=${GIT_NODE:-1}
GIT_MAX_S=${GIT_MAX_S:-900}
UPLOAD_COUNT=${UPLOAD_COUNT:-200}
UPLOAD_NODE=${UPLOAD_NODE:-2}
UPLOAD_MAX_S=${UPLOAD_MAX_S:-900}
CONTEND_COUNT=${CONTEND_COUNT:-1000}
CONTEND_MAX_S=${CONTEND_MAX_S:-600}
LOOPBACK=${LOOPBACK:-1}
CLIENT=${CLIENT:-0}
CLIENT_CACHE=${CLIENT_CACHE:-1073741824}
SERVER_ARGS=${SERVER_ARGS:-}
CLUSTER_SECRET=${CAIRN_CLUSTER_SECRET:-cairn-bench-cluster-secret-0000000000}
# This script's corpora (their scales differ from read.sh's) live apart.
CORPUS_DIR=$DATA_DIR/corpus-mount

for b in $BENCHES; do
	case " $ALL_BENCHES " in *" $b "*) ;; *) die "unknown benchmark '$b' (choose from: $ALL_BENCHES)" ;; esac
	if [ "$CLIENT" = 1 ]; then
		case $b in php | mediawiki | small) ;; *) die "CLIENT=1 runs the parts php, mediawiki and small only, not '$b'" ;; esac
	fi
done
selected() { case " $BENCHES " in *" $1 "*) return 0 ;; esac; return 1; }
[ "$(id -u)" -eq 0 ] || die "run as root: the mounts use allow_other, cold reads write drop_caches"
[ -e /dev/fuse ] || die "no /dev/fuse: the mount needs FUSE"

# ---------------------------------------------------------------- tools
tools=(curl:curl tar:tar xz:xz-utils sha256sum:coreutils timeout:coreutils
	findmnt:util-linux fincore:util-linux fusermount3:fuse3 jq:jq openssl:openssl)
{ selected php || selected mediawiki; } && tools+=(siege:siege nginx:nginx)
selected git && tools+=(git:git)
have go || die "no go: the loopback and bench/smallfiles are built with it"
need_tools "${tools[@]}"
if selected php || selected mediawiki; then
	# php-fpm (and nginx, which provides httpd) first, in a transaction of
	# their own: then wordpress's and mediawiki's "apache2 | httpd" and
	# "libapache2-mod-php | php" are met by them, and apt does not pull in
	# Apache (which would start on port 80 where services start on install).
	compgen -G '/usr/sbin/php-fpm*' >/dev/null || apt_install nginx php-fpm
	php_pkgs=()
	compgen -G '/usr/lib/php/*/mysqli.so' >/dev/null || php_pkgs+=(php-mysql)
	have mariadbd || php_pkgs+=(mariadb-server)
	if selected php; then
		[ -f /usr/share/wordpress/wp-settings.php ] || php_pkgs+=(php wordpress)
		[ -d /usr/share/wordpress/wp-content/themes/twentytwentythree ] || php_pkgs+=(wordpress-theme-twentytwentythree)
	fi
	[ ${#php_pkgs[@]} -eq 0 ] || apt_install "${php_pkgs[@]}"
	if selected mediawiki; then
		# Without its recommends (ImageMagick, Lua, Pygments...), but with
		# APCu, its object cache here, and PHP's CLI for the install.
		mw_pkgs=()
		[ -f /usr/share/mediawiki/includes/WebStart.php ] || mw_pkgs+=(mediawiki)
		for ext in apcu:php-apcu intl:php-intl mbstring:php-mbstring dom:php-xml; do
			compgen -G "/usr/lib/php/*/${ext%%:*}.so" >/dev/null || mw_pkgs+=("${ext#*:}")
		done
		have php || mw_pkgs+=(php-cli)
		[ ${#mw_pkgs[@]} -eq 0 ] || apt_install --no-install-recommends "${mw_pkgs[@]}"
		[ -f /usr/share/mediawiki/includes/WebStart.php ] || die "no /usr/share/mediawiki after installing mediawiki"
	fi
	PHP_FPM=$(compgen -G '/usr/sbin/php-fpm*' | sort -V | tail -n1)
	[ -x "$PHP_FPM" ] || die "no php-fpm binary in /usr/sbin after installing php-fpm"
	have mariadbd || die "no mariadbd after installing mariadb-server"
fi

# ---------------------------------------------------------------- cleanup
declare -a NODE_URL NODE_PID NODE_LOG NODE_ARGS MNT
LOOP_MNT=""
LOOPBACK_MNT=""
mount_cleanup() {
	local rc=$? i d
	set +e
	trap - EXIT INT TERM
	# Stop in reverse order of start: nginx and php-fpm hold files on the
	# mounts; a node unmounts on SIGTERM.
	for ((i = ${#BENCH_PIDS[@]} - 1; i >= 0; i--)); do
		kill -CONT "${BENCH_PIDS[i]}" 2>/dev/null
		stop_pid "${BENCH_PIDS[i]}"
	done
	# A node killed (or one whose unmount failed) leaves its mount behind:
	# detach it before the scratch directories are removed.
	for d in "${MNT[@]}"; do
		[ -n "$d" ] && mountpoint -q "$d" 2>/dev/null && { log "unmounting leftover $d"; umount -l "$d"; }
	done
	[ -n "$LOOPBACK_MNT" ] && mountpoint -q "$LOOPBACK_MNT" && umount -l "$LOOPBACK_MNT"
	[ -n "$LOOP_MNT" ] && mountpoint -q "$LOOP_MNT" && umount "$LOOP_MNT"
	BENCH_PIDS=()
	(exit "$rc")
	bench_cleanup
}
trap mount_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
resolve_cairn_bin

OUT=$DATA_DIR/results/mount-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
CSV=$OUT/results.csv
echo "part,case,round,side,seconds,count,rate,status" >"$CSV"
CALLS=$OUT/calls.tsv
printf 'part\tcase\tround\top\tcalls\tper_item\n' >"$CALLS"
FAILED=0

now() { echo "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", b - a}'; }
# SIDES: every side measured; sides R: their order in round R (rotated).
SIDES="local cairn"
[ "$LOOPBACK" = 1 ] && SIDES="local loopback cairn"
[ "$CLIENT" = 1 ] && SIDES+=" client"
sides() {
	local all
	read -r -a all <<<"$SIDES"
	local n=${#all[@]} k=$((($1 - 1) % ${#all[@]})) i out=""
	for ((i = 0; i < n; i++)); do out+="${all[(k + i) % n]} "; done
	echo "$out"
}
# side_dir SIDE NODE: the root of SIDE (NODE: the Cairn node whose mount).
side_dir() {
	case $1 in
	local) echo "$LOCAL" ;;
	loopback) echo "$LOOPBACK_MNT" ;;
	cairn) echo "${MNT[$2]}" ;;
	client) echo "${MNT[4]}" ;;
	esac
}

# client_reads SIDE DIR N: for the client side, which reads the tree the
# Cairn side wrote (same bucket, same path), wait until DIR shows its N
# entries (at most 60 s) and answer 0: the caller copies nothing.
client_reads() {
	[ "$1" = client ] || return 1
	local deadline=$((SECONDS + 60))
	until [ "$(find "$2" 2>/dev/null | wc -l)" -ge "$3" ]; do
		[ $SECONDS -lt $deadline ] || die "client: $2 does not show its $3 entries after 60 s"
		sleep 0.5
	done
	return 0
}

# client_report PART: the client node's RSS and disk cache (log).
client_report() {
	[ "$CLIENT" = 1 ] || return 0
	local rss cache
	rss=$(awk '/VmRSS/ {printf "%.0f MB", $2 / 1024}' "/proc/${NODE_PID[4]}/status" 2>/dev/null || echo "?")
	cache=$(curl -fsS --max-time 10 "${NODE_URL[4]}/_cairn/metrics" 2>/dev/null | grep -E '^cairn_remote_cache_(bytes|entries|hits_total|misses_total|evictions_total) ' | tr '\n' ' ' || true)
	log "$1: client node 4: RSS $rss, DATA/cache $(du -sm "$CL_DIR/n4/cache" 2>/dev/null | cut -f1) MB (bound $CLIENT_CACHE B); $cache"
}

# calls_before NODE: snapshot node NODE's mount counters (GET /_cairn/mounts).
calls_before() { mounts_json "$1" >"$OUT/calls-before.json"; }
mounts_json() {
	curl -fsS --max-time 10 -H "Authorization: Bearer $CAIRN_ADMIN_KEY" "${NODE_URL[$1]}/_cairn/mounts" 2>/dev/null || echo '{}'
}
# calls_after PART CASE ROUND NODE ITEMS: the FUSE calls of each opcode node
# NODE's mount answered since calls_before, in all and per item, into
# calls.tsv.
calls_after() {
	mounts_json "$4" >"$OUT/calls-after.json"
	jq -r -n --slurpfile b "$OUT/calls-before.json" --slurpfile a "$OUT/calls-after.json" \
		--arg part "$1" --arg case "$2" --arg round "$3" --argjson items "$5" '
		(($b[0].mounts // [{}])[0].ops // [] | map({(.op): .calls}) | add // {}) as $bo
		| (($a[0].mounts // [{}])[0].ops // [])[]
		| (.calls - ($bo[.op] // 0)) as $d | select($d > 0)
		| [$part, $case, $round, .op, $d, ($d / (if $items > 0 then $items else 1 end) * 100 | round / 100)] | @tsv' >>"$CALLS" || true
}

# record PART CASE ROUND SIDE SECONDS COUNT STATUS
record() {
	local rate
	rate=$(awk -v s="$5" -v n="$6" 'BEGIN {printf "%.1f", (s > 0 ? n / s : 0)}')
	echo "$1,$2,$3,$4,$5,$6,$rate,$7" >>"$CSV"
	[ "$7" = ok ] || FAILED=1
	log "$1 [$2] round $3 $4: $5 s, $6 items, $rate/s ($7)"
}

# bounded MAX_S CMD...: run CMD under `timeout` (KILL 10 s after TERM); sets
# RUN_S (wall seconds) and RUN_STATUS (ok, TIMEOUT or FAIL rc=N).
bounded() {
	local max=$1 t0 rc=0
	shift
	t0=$(now)
	timeout -k 10 "$max" "$@" || rc=$?
	RUN_S=$(elapsed "$t0" "$(now)")
	case $rc in
	0) RUN_STATUS=ok ;;
	124 | 137) RUN_STATUS=TIMEOUT ;;
	*) RUN_STATUS="FAIL rc=$rc" ;;
	esac
}

# ---------------------------------------------------------------- local side
setup_local() {
	local fs
	if [ -n "${LOCAL_DIR:-}" ]; then
		mkdir -p "$LOCAL_DIR"
		LOCAL=$(cd "$LOCAL_DIR" && pwd)
	else
		mkdir -p "$DATA_DIR/run"
		fs=$(findmnt -n -o FSTYPE --target "$DATA_DIR/run")
		if [ "$fs" = ext4 ]; then
			scratch_dir LOCAL local
		else
			need_tools mkfs.ext4:e2fsprogs
			local img
			scratch_dir img localimg
			log "$DATA_DIR is on $fs, not ext4: making a ${LOCAL_IMG_GB} GB ext4 loop image for the local side"
			truncate -s "${LOCAL_IMG_GB}G" "$img/ext4.img"
			mkfs.ext4 -q -F "$img/ext4.img" || die "mkfs.ext4 failed"
			mkdir -p "$img/mnt"
			mount -o loop "$img/ext4.img" "$img/mnt" || die "mount -o loop $img/ext4.img failed"
			LOOP_MNT=$img/mnt
			LOCAL=$img/mnt
		fi
	fi
	fs=$(findmnt -n -o FSTYPE --target "$LOCAL")
	[ "$fs" = ext4 ] || die "local side $LOCAL is on $fs, not ext4"
	LOCAL_DEV=$(findmnt -n -o SOURCE --target "$LOCAL")
	log "local side: $LOCAL (ext4 on $LOCAL_DEV)"
}

# ---------------------------------------------------------------- cluster
# start_node I: start node I with NODE_ARGS[I] (set by cluster_start) and
# wait until it answers and its mount is up.
start_node() {
	local i=$1 deadline
	# shellcheck disable=SC2086 # NODE_ARGS and SERVER_ARGS are word lists
	CAIRN_CLUSTER_SECRET=$CLUSTER_SECRET "$CAIRN_BIN" server ${NODE_ARGS[i]} $SERVER_ARGS >>"${NODE_LOG[i]}" 2>&1 &
	NODE_PID[i]=$!
	BENCH_PIDS+=("${NODE_PID[i]}")
	wait_http "${NODE_URL[i]}/_cairn/health" "${NODE_PID[i]}" 60 "${NODE_LOG[i]}"
	deadline=$((SECONDS + 30))
	until mountpoint -q "${MNT[i]}"; do
		kill -0 "${NODE_PID[i]}" 2>/dev/null || { tail -n 20 "${NODE_LOG[i]}" >&2; die "node $i exited"; }
		[ $SECONDS -lt $deadline ] || die "node $i: ${MNT[i]} not mounted after 30 s (log ${NODE_LOG[i]})"
		sleep 0.2
	done
}

# cluster_start: three nodes, each mounting bucket web on CL_DIR/mnt/nodeI/web;
# returns once there are three voters and a file written through node 1's
# mount reads back through the two others.
cluster_start() {
	local i port gport deadline probe
	scratch_dir CL_DIR cluster
	for i in 1 2 3; do
		port=$(pick_port)
		gport=$(pick_port)
		NODE_URL[i]=http://127.0.0.1:$port
		NODE_LOG[i]=$OUT/node$i.log
		MNT[i]=$CL_DIR/mnt/node$i/web
		mkdir -p "$(dirname "${MNT[i]}")"
		NODE_ARGS[i]="--data $CL_DIR/n$i --listen 127.0.0.1:$port --gossip-listen 127.0.0.1:$gport --mount web:${MNT[i]}${MOUNT_OPTS:+:$MOUNT_OPTS}"
		[ "$i" -eq 1 ] || NODE_ARGS[i]+=" --join ${NODE_URL[1]}"
		start_node "$i"
	done
	deadline=$((SECONDS + 60))
	until grep -qE 'voters="\[[0-9]+ [0-9]+ [0-9]+\]"' "${NODE_LOG[@]}"; do
		[ $SECONDS -lt $deadline ] || die "no 3 voters after 60 s (logs ${NODE_LOG[*]})"
		sleep 0.2
	done
	probe=probe-$$-$RANDOM
	deadline=$((SECONDS + 60))
	until echo "$probe" >"${MNT[1]}/$probe.txt" 2>>"$OUT/probe.err"; do
		[ $SECONDS -lt $deadline ] || die "cannot write through node 1's mount for 60 s ($OUT/probe.err)"
		sleep 0.5
	done
	for i in 2 3; do
		deadline=$((SECONDS + 30))
		until [ "$(cat "${MNT[i]}/$probe.txt" 2>/dev/null)" = "$probe" ]; do
			[ $SECONDS -lt $deadline ] || die "a file written through node 1 is not readable through node $i after 30 s"
			sleep 0.2
		done
	done
	if [ "$CLIENT" = 1 ]; then
		port=$(pick_port)
		gport=$(pick_port)
		NODE_URL[4]=http://127.0.0.1:$port
		NODE_LOG[4]=$OUT/node4-client.log
		MNT[4]=$CL_DIR/mnt/node4/web
		mkdir -p "$(dirname "${MNT[4]}")"
		NODE_ARGS[4]="--data $CL_DIR/n4 --role client --cache-size $CLIENT_CACHE --listen 127.0.0.1:$port --gossip-listen 127.0.0.1:$gport --join ${NODE_URL[1]} --mount web:${MNT[4]}${MOUNT_OPTS:+:$MOUNT_OPTS}"
		start_node 4
		deadline=$((SECONDS + 30))
		until [ "$(cat "${MNT[4]}/$probe.txt" 2>/dev/null)" = "$probe" ]; do
			[ $SECONDS -lt $deadline ] || die "a file written through node 1 is not readable through the client node after 30 s"
			sleep 0.2
		done
	fi
	rm -f "${MNT[1]}/$probe.txt"
	log "cluster: ${NODE_URL[*]} (pids ${NODE_PID[*]}); mounts ${MNT[*]}"
}

# loopback_start: build go-fuse's example loopback (the version go.mod
# names) outside the repository, and mount it over LOCAL/loopback-src:
# the limit column, FUSE without Cairn.
loopback_start() {
	local bin src ver deadline
	scratch_dir bin loopbin
	ver=$(cd "$REPO_DIR" && go list -m -f '{{.Version}}' github.com/hanwen/go-fuse/v2) || die "go list of go-fuse's version failed"
	(cd "$bin" && GOBIN=$bin GOFLAGS="" go install "github.com/hanwen/go-fuse/v2/example/loopback@$ver") >"$OUT/loopback-build.log" 2>&1 ||
		die "building go-fuse $ver's example/loopback failed ($OUT/loopback-build.log)"
	src=$LOCAL/loopback-src
	mkdir -p "$src"
	scratch_dir LOOPBACK_MNT loopback
	"$bin/loopback" -allow-other -directmount -q "$LOOPBACK_MNT" "$src" >"$OUT/loopback.log" 2>&1 &
	LOOPBACK_PID=$!
	BENCH_PIDS+=("$LOOPBACK_PID")
	deadline=$((SECONDS + 30))
	until mountpoint -q "$LOOPBACK_MNT"; do
		kill -0 "$LOOPBACK_PID" 2>/dev/null || { cat "$OUT/loopback.log" >&2; die "the loopback exited"; }
		[ $SECONDS -lt $deadline ] || die "the loopback did not mount $LOOPBACK_MNT in 30 s"
		sleep 0.2
	done
	log "loopback: go-fuse $ver example/loopback on $LOOPBACK_MNT over $src (pid $LOOPBACK_PID)"
}

# restart_node I: stop node I (it unmounts) and start it again on the same
# data directory and flags.
restart_node() {
	local i=$1
	stop_pid "${NODE_PID[i]}"
	mountpoint -q "${MNT[i]}" && die "node $i stopped but ${MNT[i]} is still mounted"
	start_node "$i"
}

# resident_mb DIR [LISTING]: megabytes of the files under DIR in the page
# cache (per file in LISTING when given).
resident_mb() {
	find "$1" -type f -size +1M -print0 2>/dev/null | xargs -0 -r fincore -b -n -o RES,SIZE,FILE 2>/dev/null |
		tee "${2:-/dev/null}" | awk '{s += $1} END {printf "%.0f", s / 1e6}'
}

drop_caches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

# same_sample N LIST A B: compare the SHA-256 of N random paths of LIST
# (relative paths, one a line) under A and under B; die on a difference.
same_sample() {
	local n=$1 list=$2 a=$3 b=$4 p bad=0 k=0
	while IFS= read -r p; do
		k=$((k + 1))
		if [ "$(sha256sum <"$a/$p" | cut -d' ' -f1)" != "$(sha256sum <"$b/$p" 2>/dev/null | cut -d' ' -f1)" ]; then
			log "differs: $b/$p (vs $a/$p)"
			bad=$((bad + 1))
		fi
	done < <(sample_lines "$n" "$list")
	[ "$bad" -eq 0 ] || die "$bad of $k sampled files differ between $a and $b"
	log "sample: $k random files under $b have the SHA-256 of those under $a"
}

# ---------------------------------------------------------------- php
# php_start_servers RUN DB: a new MariaDB with database DB (user DB,
# password DB-bench) and one php-fpm pool; sets DB_SOCK, FPM_SOCK and the
# pids DB_PID, FPM_PID (php_stop_servers stops them).
php_start_servers() {
	local run=$1 name=$2 sock db
	scratch_dir db mariadb
	DB_SOCK=$db/mysqld.sock
	log "MariaDB: new data directory $db/data (Unix socket only, no TCP)"
	mariadb-install-db --no-defaults --datadir="$db/data" --user=root --skip-test-db \
		>"$OUT/mariadb-install.log" 2>&1 || die "mariadb-install-db failed ($OUT/mariadb-install.log)"
	mariadbd --no-defaults --datadir="$db/data" --socket="$DB_SOCK" --pid-file="$db/mysqld.pid" \
		--skip-networking --user=root --log-error="$OUT/mariadb.err" --innodb-buffer-pool-size=256M &
	DB_PID=$!
	BENCH_PIDS+=("$DB_PID")
	local deadline=$((SECONDS + 60))
	until mariadb-admin --no-defaults --socket="$DB_SOCK" -uroot ping >/dev/null 2>&1; do
		kill -0 "$DB_PID" 2>/dev/null || { tail -n 20 "$OUT/mariadb.err" >&2; die "mariadbd exited"; }
		[ $SECONDS -lt $deadline ] || die "mariadbd did not answer within 60 s ($OUT/mariadb.err)"
		sleep 0.3
	done
	mariadb --no-defaults --socket="$DB_SOCK" -uroot -e \
		"CREATE DATABASE $name; CREATE USER '$name'@'localhost' IDENTIFIED BY '$name-bench'; GRANT ALL ON $name.* TO '$name'@'localhost';" ||
		die "creating the database $name failed"

	sock=$run/php-fpm.sock
	cat >"$run/php-fpm.conf" <<-EOF
		[global]
		pid = $run/php-fpm.pid
		error_log = $OUT/php-fpm.log
		daemonize = no
		[bench]
		user = root
		group = root
		listen = $sock
		pm = static
		pm.max_children = $PHP_WORKERS
		catch_workers_output = yes
		php_admin_flag[log_errors] = on
		php_admin_value[error_log] = $OUT/php-errors.log
	EOF
	# -R: the pool runs as root, as nginx and the Cairn nodes do here.
	"$PHP_FPM" -F -R -y "$run/php-fpm.conf" >"$OUT/php-fpm.stdout" 2>&1 &
	FPM_PID=$!
	BENCH_PIDS+=("$FPM_PID")
	deadline=$((SECONDS + 30))
	until [ -S "$sock" ]; do
		kill -0 "$FPM_PID" 2>/dev/null || { cat "$OUT/php-fpm.log" >&2; die "php-fpm exited"; }
		[ $SECONDS -lt $deadline ] || die "php-fpm made no socket within 30 s"
		sleep 0.2
	done
	FPM_SOCK=$sock
	log "php-fpm $FPM_PID ($PHP_FPM, $PHP_WORKERS children) on $sock; mariadbd $DB_PID on $DB_SOCK"
}

# php_stop_servers: stop nginx, php-fpm and MariaDB (php_nginx_start,
# php_start_servers).
php_stop_servers() {
	stop_pid "$PHP_NGINX_PID"
	stop_pid "$FPM_PID"
	stop_pid "$DB_PID"
}

# php_copy_tree PART WHAT SRC NAME ROOTS: copy the tree SRC to NAME under
# every side's root (node PHP_NODE's mount for Cairn), then sync; the
# associative array named ROOTS gets each side's copy.
php_copy_tree() {
	local part=$1 what=$2 src=$3 name=$4 n side dst t0
	local -n copies=$5
	n=$(find "$src" | wc -l)
	for side in $SIDES; do
		copies["$side"]=$(side_dir "$side" "$PHP_NODE")/$name
		dst=${copies[$side]}
		client_reads "$side" "$dst" "$n" && continue
		t0=$(now)
		cp -r "$src" "$dst" || die "copying the $what tree into $dst failed"
		sync && sync "$dst" # a bare sync does not wait for the mount's write-back (no FUSE_SYNCFS)
		log "$part: copied the $what tree ($n entries, $(du -sm "$src" | cut -f1) MB) into $dst ($side) in $(elapsed "$t0" "$(now)") s (+ sync)"
	done
}

# wp_tree DIR: a self-contained WordPress tree: Debian's /usr/share/wordpress
# with its symlinks followed, our wp-config.php, uploads from the corpus.
wp_tree() {
	local dst=$1
	mkdir -p "$dst"
	cp -rL /usr/share/wordpress/. "$dst/" || die "copying /usr/share/wordpress failed"
	rm -f "$dst/.htaccess"
	cat >"$dst/wp-config.php" <<-EOF
		<?php
		// Written by bench/mount.sh. The site answers on whatever host:port
		// the request names, so the local and the Cairn copy share one
		// database. No cron, no updates, no HTTP to other hosts.
		define('DB_NAME', 'wp');
		define('DB_USER', 'wp');
		define('DB_PASSWORD', 'wp-bench');
		define('DB_HOST', 'localhost:$DB_SOCK');
		define('DB_CHARSET', 'utf8mb4');
		define('DB_COLLATE', '');
		\$table_prefix = 'wp_';
		foreach (['AUTH_KEY', 'SECURE_AUTH_KEY', 'LOGGED_IN_KEY', 'NONCE_KEY', 'AUTH_SALT',
		          'SECURE_AUTH_SALT', 'LOGGED_IN_SALT', 'NONCE_SALT'] as \$k) {
		    define(\$k, 'cairn-bench-' . \$k);
		}
		define('WP_HOME', 'http://' . (\$_SERVER['HTTP_HOST'] ?? '127.0.0.1'));
		define('WP_SITEURL', WP_HOME);
		define('DISABLE_WP_CRON', true);
		define('AUTOMATIC_UPDATER_DISABLED', true);
		define('WP_AUTO_UPDATE_CORE', false);
		define('WP_HTTP_BLOCK_EXTERNAL', true);
		define('WP_DEBUG', false);
		if (!defined('ABSPATH')) {
		    define('ABSPATH', __DIR__ . '/');
		}
		define('WP_CONTENT_DIR', ABSPATH . 'wp-content');
		require_once ABSPATH . 'wp-settings.php';
	EOF
	mkdir -p "$dst/wp-content/uploads"
	cp -r "$CORPUS_DIR/small/." "$dst/wp-content/uploads/"
}

# wp_install DIR: install the site (admin user, WP_POSTS posts with images
# from the uploads, pretty permalinks) into the database, with PHP's CLI.
wp_install() {
	local dir=$1
	cat >"$OUT/wp-install.php" <<-'EOF'
		<?php
		// bench/mount.sh: install WordPress offline and write the posts.
		$_SERVER['HTTP_HOST'] = '127.0.0.1';
		$_SERVER['REQUEST_URI'] = '/';
		define('WP_INSTALLING', true);
		require_once $argv[1] . '/wp-load.php';
		require_once ABSPATH . 'wp-admin/includes/upgrade.php';
		$r = wp_install('Cairn mount bench', 'admin', 'admin@example.invalid', true, '', 'bench-password-0');
		if (is_wp_error($r)) { fwrite(STDERR, $r->get_error_message() . "\n"); exit(1); }
		update_option('permalink_structure', '/%year%/%postname%/');
		$uploads = array_values(array_filter(file($argv[2], FILE_IGNORE_NEW_LINES)));
		mt_srand((int)$argv[4]);
		$words = explode(' ', 'lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua storage cluster replica mount');
		for ($i = 1; $i <= (int)$argv[3]; $i++) {
		    $body = '';
		    for ($p = 0; $p < 6; $p++) {
		        $s = [];
		        for ($w = 0; $w < 80; $w++) { $s[] = $words[mt_rand(0, count($words) - 1)]; }
		        $body .= "<!-- wp:paragraph -->\n<p>" . implode(' ', $s) . "</p>\n<!-- /wp:paragraph -->\n";
		        $u = $uploads[mt_rand(0, count($uploads) - 1)];
		        $body .= "<!-- wp:image -->\n<figure class=\"wp-block-image\"><img src=\"/wp-content/uploads/$u\" alt=\"\"/></figure>\n<!-- /wp:image -->\n";
		    }
		    $id = wp_insert_post(['post_title' => "Bench post $i", 'post_name' => "bench-post-$i",
		        'post_content' => $body, 'post_status' => 'publish', 'post_category' => [1],
		        'tags_input' => ['bench', 'tag' . ($i % 5)]], true);
		    if (is_wp_error($id)) { fwrite(STDERR, $id->get_error_message() . "\n"); exit(1); }
		}
		flush_rewrite_rules();
		echo "installed, " . (int)$argv[3] . " posts\n";
	EOF
	php "$OUT/wp-install.php" "$dir" "$CORPUS_DIR/small/paths.txt" "$WP_POSTS" "$SEED" >"$OUT/wp-install.log" 2>&1 ||
		{ tail -n 20 "$OUT/wp-install.log" >&2; die "WordPress install failed ($OUT/wp-install.log)"; }
	log "WordPress: $(tail -n 1 "$OUT/wp-install.log")"
}

# php_nginx_start RUN ROOTS PROBE: one nginx, one server per side (its tree
# ROOTS[SIDE], ROOTS the name of an associative array) on a loopback port of
# its own (PHP_PORT[SIDE]), PHP to the php-fpm socket; waits until the
# local side serves the static file PROBE.
# shellcheck disable=SC2034 # WP_ROOT, MW_ROOT: passed by name (ROOTS)
declare -A WP_ROOT MW_ROOT PHP_PORT
php_nginx_start() {
	local run=$1 probe=$3 mime=/etc/nginx/mime.types used=" "
	local -n roots=$2
	for side in $SIDES; do
		PHP_PORT[$side]=$(pick_port)
		while [[ $used == *" ${PHP_PORT[$side]} "* ]]; do PHP_PORT[$side]=$(pick_port); done
		used+="${PHP_PORT[$side]} "
	done
	mkdir -p "$run"/{client_body,proxy,fastcgi,uwsgi,scgi}
	local side root port
	{
		cat <<-EOF
			# nginx for bench/mount.sh (php, mediawiki): the same settings as
			# bench/nginx.conf.tmpl, plus PHP through php-fpm.
			user root root;
			worker_processes 2;
			daemon off;
			master_process on;
			pid $run/nginx.pid;
			error_log $OUT/nginx-error.log warn;
			events { worker_connections 1024; }
			http {
			    include $mime;
			    default_type application/octet-stream;
			    access_log off;
			    sendfile on;
			    tcp_nopush on;
			    tcp_nodelay on;
			    keepalive_timeout 65s;
			    keepalive_requests 1000000;
			    server_tokens off;
			    client_body_temp_path $run/client_body;
			    proxy_temp_path $run/proxy;
			    fastcgi_temp_path $run/fastcgi;
			    uwsgi_temp_path $run/uwsgi;
			    scgi_temp_path $run/scgi;
		EOF
		for side in $SIDES; do
			root=${roots[$side]} port=${PHP_PORT[$side]}
			cat <<-EOF
				    server {
				        listen 127.0.0.1:$port backlog=1024;
				        server_name localhost;
				        root $root;
				        index index.php;
				        location / { try_files \$uri \$uri/ /index.php?\$args; }
				        location ~ \.php\$ {
				            try_files \$uri =404;
				            include /etc/nginx/fastcgi_params;
				            fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name;
				            fastcgi_pass unix:$FPM_SOCK;
				        }
				    }
			EOF
		done
		echo "}"
	} >"$run/nginx.conf"
	"$(nginx_bin)" -t -q -p "$run" -e "$OUT/nginx-error.log" -c "$run/nginx.conf" || die "nginx rejected $run/nginx.conf"
	"$(nginx_bin)" -p "$run" -e "$OUT/nginx-error.log" -c "$run/nginx.conf" >"$OUT/nginx.stdout" 2>&1 &
	PHP_NGINX_PID=$!
	BENCH_PIDS+=("$PHP_NGINX_PID")
	wait_http "http://127.0.0.1:${PHP_PORT[local]}$probe" "$PHP_NGINX_PID" 15 "$OUT/nginx-error.log"
	for side in $SIDES; do log "nginx $PHP_NGINX_PID: the $side tree ${roots[$side]} on 127.0.0.1:${PHP_PORT[$side]}"; done
}

# siege_run LIST REPS OUTFILE: siege PHP_CONC users x REPS requests over the
# URLs of LIST (a file); sets RUN_S (siege's elapsed time), SIEGE_N
# (transactions) and RUN_STATUS.
siege_run() {
	local list=$1 reps=$2 out=$3 want=$((PHP_CONC * $2)) okn badn
	bounded "$PHP_MAX_S" siege -R "$OUT/siegerc" -c "$PHP_CONC" -r "$reps" -f "$list" >"$out.raw" 2>"$out.err"
	# siege's first run on a machine prints a note before its JSON.
	sed -n '/^{/,$p' "$out.raw" >"$out"
	SIEGE_N=$(jq -r '.transactions // 0' "$out" 2>/dev/null || echo 0)
	okn=$(jq -r '.successful_transactions // 0' "$out" 2>/dev/null || echo 0)
	badn=$(jq -r '.failed_transactions // 0' "$out" 2>/dev/null || echo 0)
	local wall=$RUN_S
	RUN_S=$(jq -r '.elapsed_time // empty' "$out" 2>/dev/null || true)
	[ -n "$RUN_S" ] || RUN_S=$wall
	if [ "$RUN_STATUS" = ok ] && { [ "$SIEGE_N" != "$want" ] || [ "$okn" != "$want" ] || [ "$badn" != 0 ]; }; then
		RUN_STATUS="FAIL ($okn of $want ok, $badn failed)"
		tail -n 5 "$out.err" >&2
	fi
}

# siege_rc: siege's settings for siege_run, in OUT/siegerc.
siege_rc() {
	cat >"$OUT/siegerc" <<-EOF
		# siege settings of bench/mount.sh: no HTML parsing (the URL list is
		# the whole load), keep-alive, no delay, no log file.
		verbose = false
		color = off
		quiet = false
		json_output = true
		show-logfile = false
		logging = false
		parser = false
		protocol = HTTP/1.1
		chunked = true
		cache = false
		connection = keep-alive
		benchmark = true
		internet = false
		timeout = 60
		failures = 1000000
		accept-encoding = gzip
		url-escaping = true
	EOF
}

# php_get PART SIDE PATH: GET PATH from SIDE's server into OUT/page.tmp; die
# unless it answers 200.
php_get() {
	local url=http://127.0.0.1:${PHP_PORT[$2]}$3 code
	code=$(curl -sS -o "$OUT/page.tmp" -w '%{http_code}' --max-time 60 "$url") || code=000
	[ "$code" = 200 ] || die "$1: $2 $url answered $code (see $OUT/nginx-error.log, $OUT/php-errors.log)"
}

# siege_warmup PART PREFIX N: one unrecorded siege -c PHP_CONC -r N per side
# over its list OUT/PREFIXsiege-urls-SIDE.txt.
siege_warmup() {
	local side
	for side in $SIDES; do
		log "$1: warm-up, $side: siege -c $PHP_CONC -r $3 (not recorded)"
		siege_run "$OUT/${2}siege-urls-$side.txt" "$3" "$OUT/${2}siege-warmup-$side.json"
		[ "$RUN_STATUS" = ok ] || die "$1: warm-up against $side: $RUN_STATUS ($OUT/${2}siege-warmup-$side.json)"
	done
}

# page_alone PART LABEL PATH: PATH alone, siege -c PHP_CONC -r PHP_PAGE_REPS,
# ROUNDS rounds of every side, recorded as "page LABEL alone" with the FUSE
# calls per page of the Cairn side.
page_alone() {
	local part=$1 label=$2 path=$3 r side
	for side in $SIDES; do echo "http://127.0.0.1:${PHP_PORT[$side]}$path" >"$OUT/siege-page-$side.txt"; done
	for r in $(seq 1 "$ROUNDS"); do
		for side in $(sides "$r"); do
			if [ "$side" = cairn ]; then calls_before "$PHP_NODE"; fi
			siege_run "$OUT/siege-page-$side.txt" "$PHP_PAGE_REPS" "$OUT/siege-page-r$r-$side.json"
			record "$part" "page $label alone: siege -c $PHP_CONC -r $PHP_PAGE_REPS" "$r" "$side" "$RUN_S" "$SIEGE_N" "$RUN_STATUS"
			if [ "$side" = cairn ]; then calls_after "$part" "page $label alone" "$r" "$PHP_NODE" "$SIEGE_N"; fi
		done
	done
}

part_php() {
	local run src n r side u body page
	SCALE=$WP_UPLOAD_SCALE ensure_corpus small
	scratch_dir run php
	php_start_servers "$run" wp
	scratch_dir src wpsrc
	wp_tree "$src"
	wp_install "$src"
	php_copy_tree php WordPress "$src" wordpress WP_ROOT
	php_nginx_start "$run" WP_ROOT /wp-includes/js/jquery/jquery.min.js

	# The pages: PHP (home, posts, archives, search, login) and static files.
	local y
	y=$(date +%Y)
	local php_pages=(/ "/$y/bench-post-1/" "/$y/bench-post-2/" "/$y/bench-post-3/" /category/uncategorized/ /tag/bench/ "/?s=lorem" /wp-login.php)
	local paths=("${php_pages[@]}" /wp-content/themes/twentytwentythree/style.css /wp-includes/js/jquery/jquery.min.js)
	mapfile -t ups < <(awk -v seed="$SEED" 'BEGIN {srand(seed)} {a[NR] = $0} END {for (i = 0; i < 4; i++) print a[int(rand() * NR) + 1]}' "$CORPUS_DIR/small/paths.txt")
	for u in "${ups[@]}"; do paths+=("/wp-content/uploads/$u"); done
	for side in $SIDES; do
		local port=${PHP_PORT[$side]}
		: >"$OUT/siege-urls-$side.txt"
		for u in "${paths[@]}"; do
			echo "http://127.0.0.1:$port$u" >>"$OUT/siege-urls-$side.txt"
			php_get php "$side" "$u"
			case $u in
			/wp-content/uploads/*)
				[ "$(sha256sum <"$OUT/page.tmp" | cut -d' ' -f1)" = "$(sha256sum <"$src${u}" | cut -d' ' -f1)" ] ||
					die "php: $side $u differs from the upload" ;;
			*.css | *.js) ;;
			*)
				body=$(cat "$OUT/page.tmp")
				if [[ $body != *"Cairn mount bench"* || $body != *"</html>"* ]]; then
					mv "$OUT/page.tmp" "$OUT/page-$side.html"
					die "php: $side $u is not a whole WordPress page (saved in $OUT/page-$side.html)"
				fi
				;;
			esac
		done
	done
	rm -f "$OUT/page.tmp"
	n=${#paths[@]}
	[ -n "$PHP_REPS" ] || PHP_REPS=$((5 * n))
	log "php: ${#paths[@]} URLs answer 200 on every side (PHP pages carry the site title; uploads match by SHA-256)"
	siege_rc
	siege_warmup php "" "$n"
	for r in $(seq 1 "$ROUNDS"); do
		for side in $(sides "$r"); do
			if [ "$side" = cairn ]; then calls_before "$PHP_NODE"; fi
			siege_run "$OUT/siege-urls-$side.txt" "$PHP_REPS" "$OUT/siege-r$r-$side.json"
			record php "page mix: siege -c $PHP_CONC -r $PHP_REPS" "$r" "$side" "$RUN_S" "$SIEGE_N" "$RUN_STATUS"
			if [ "$side" = cairn ]; then calls_after php "page mix: siege -c $PHP_CONC -r $PHP_REPS" "$r" "$PHP_NODE" "$SIEGE_N"; fi
		done
	done
	# Each PHP page alone (static files hide the PHP cost in the mix).
	for page in "${php_pages[@]}"; do page_alone php "$page" "$page"; done
	php_stop_servers
}

# ---------------------------------------------------------------- mediawiki
MW_SITE="Cairn mount bench"
MW_PAGE=Cairn_bench_article

# mw_tree DIR: a self-contained MediaWiki tree: Debian's /usr/share/mediawiki
# with its symlinks followed (config, extensions and images point into
# /var/lib/mediawiki, every extension there into extensions-core), less
# LocalSettings.php (a link to /etc/mediawiki, dangling until the package is
# configured: mw_install writes ours) and extensions-core (Debian's store of
# the bundled extensions, which extensions/ holds once copied through).
mw_tree() {
	local dst=$1 e
	mkdir -p "$dst"
	while IFS= read -r -d '' e; do
		case ${e##*/} in LocalSettings.php | extensions-core) continue ;; esac
		cp -rL "$e" "$dst/" || die "copying $e failed"
	done < <(find /usr/share/mediawiki -mindepth 1 -maxdepth 1 -print0)
}

# mw_install DIR CACHE: install the wiki of tree DIR offline (database mw,
# stock skins, no extensions), append our settings to the LocalSettings.php
# it writes (localisation caches under CACHE), and write two templates and
# the content page MW_PAGE with maintenance/edit.php.
mw_install() {
	local dir=$1 cache=$2 title
	(cd "$dir" && php maintenance/install.php --dbtype mysql --dbserver "localhost:$DB_SOCK" --dbname mw \
		--dbuser mw --dbpass mw-bench --server http://127.0.0.1 --scriptpath "" --lang en \
		--pass bench-password-0 "$MW_SITE" Admin) >"$OUT/mw-install.log" 2>&1 ||
		{ tail -n 20 "$OUT/mw-install.log" >&2; die "MediaWiki install failed ($OUT/mw-install.log)"; }
	cat >>"$dir/LocalSettings.php" <<-EOF

		# Appended by bench/mount.sh. The site answers on whatever host:port
		# the request names, so the local and the Cairn copy share one
		# database (and APCu: one php-fpm pool runs both). No jobs run on
		# requests; nothing fetched from other hosts.
		\$wgServer = 'http://' . (\$_SERVER['HTTP_HOST'] ?? '127.0.0.1');
		\$wgMainCacheType = CACHE_ACCEL;
		# The localisation cache (a CDB file per language) is a cache, not
		# code: on the local disk, outside every tree. One per tree all the
		# same: it records the paths of the message files it was built from
		# and checks their mtimes on every request, so a shared one would
		# have one side stat the other side's files.
		\$wgCacheDirectory = '$cache/' . md5(__DIR__);
		\$wgJobRunRate = 0;
		\$wgEnableUploads = false;
		\$wgUseInstantCommons = false;
		\$wgAllowExternalImages = false;
		\$wgPingback = false;
		\$wgShowExceptionDetails = true;
	EOF
	cat >"$OUT/mw-Template:Infobox_cairn.wiki" <<-'EOF'
		{| class="infobox" style="float:right; width:22em; border:1px solid #a2a9b1; background:#f8f9fa"
		|+ '''{{{name|{{PAGENAME}}}}}'''
		|-
		! Type
		| {{{type|Cairn}}}
		|-
		! Height
		| {{{height|unknown}}}
		|-
		! Location
		| [[{{{location|Nowhere}}}]]
		|-
		! Built
		| {{{built|unknown}}}
		|}<noinclude>An infobox for cairns. [[Category:Infobox templates]]</noinclude>
	EOF
	cat >"$OUT/mw-Template:Note.wiki" <<-'EOF'
		<div class="hatnote" style="font-style:italic; padding-left:1.6em">'''Note:''' {{{1}}}</div><noinclude>
		A short note above a section.</noinclude>
	EOF
	cat >"$OUT/mw-$MW_PAGE.wiki" <<-'EOF'
		{{Infobox cairn|name=Cairn bench article|type=Summit cairn|height=2.4 m|location=Ben Nevis|built=before 1800}}
		A '''cairn''' is a man-made pile of stones raised for a purpose, usually as a marker or as a burial monument. The word comes from the Scottish Gaelic ''càrn'', and cairns are found from the Arctic to the deserts of [[North Africa]]. This article is the content page of the [[Main Page|bench wiki]]: its text, its [[#Uses|sections]], its table and its two templates make the parser do a little of everything a real article asks of it.

		== History ==
		{{Note|The dates in this section are approximate.}}
		Cairns were raised in prehistoric times as graves and boundary marks. In the [[Bronze Age]], chambered cairns held the remains of whole families, and many of those in [[Scotland]] and [[Ireland]] still stand. Later, travellers added a stone to a cairn each time they passed, so that the largest ones grew over centuries. Some were built on summits so that they could be seen from the valleys; others mark a pass, a ford or the edge of a bog where the path is lost in fog.

		=== Burial cairns ===
		A burial cairn covers a stone chamber or a cist. The chamber is reached by a passage, often aligned on the sunrise of a solstice, as at [[Maeshowe]] and [[Newgrange]]. Where the stones were taken away for walls and roads, only the ring of the kerb remains.

		=== Marker cairns ===
		Marker cairns guide walkers across open ground. On glaciers and high plateaus they are raised every few dozen metres, and a walker who keeps the next one in sight does not stray. Mountain clubs ask walkers not to build new ones, since a path lined with cairns in the wrong places misleads more than it helps.

		== Uses ==
		* '''Navigation''': on moorland, in deserts and above the tree line.
		* '''Memorials''': for a battle, a death in the mountains or a visit.
		* '''Boundaries''': between parishes, estates and grazing grounds.
		* '''Caches''': polar expeditions left notes and food under cairns.
		# Find a stable base of flat stones.
		# Lay each course so that it rests on two stones below.
		# Finish with a single stone on top.

		== Notable cairns ==
		{| class="wikitable sortable"
		|+ Cairn bench table: some notable cairns
		! Name !! Country !! Height (m) !! Kind
		|-
		| [[Maeshowe]] || Scotland || 7.3 || chambered
		|-
		| [[Newgrange]] || Ireland || 12 || passage tomb
		|-
		| [[Queen Maeve's Cairn]] || Ireland || 10 || unexcavated
		|-
		| [[Barnenez]] || France || 8 || chambered
		|-
		| Summit of [[Ben Nevis]] || Scotland || 2.4 || summit
		|}

		== Building a cairn ==
		{{Note|Do not take stones from walls, graves or streams.}}
		A sound cairn is wider at the base than at the top, and every stone leans slightly inwards. Small stones fill the gaps so that the larger ones do not rock. In wet climates moss binds the pile within a few years; in dry ones the wind takes the fine soil away and the pile slowly settles. A cairn built in haste falls in the first winter storm, which is why the old ones, built by people who meant them to last, are still here.

		== See also ==
		* [[Inuksuk]]
		* [[Dry stone wall]]
		* [[Standing stone]]
		* [https://www.example.org/cairns External notes on cairns]

		[[Category:Cairns]]
		[[Category:Bench pages]]
	EOF
	for title in Template:Infobox_cairn Template:Note "$MW_PAGE"; do
		(cd "$dir" && php maintenance/edit.php --user Admin --summary "bench/mount.sh" "$title" <"$OUT/mw-$title.wiki") \
			>>"$OUT/mw-install.log" 2>&1 || { tail -n 20 "$OUT/mw-install.log" >&2; die "MediaWiki: writing $title failed ($OUT/mw-install.log)"; }
	done
	(cd "$dir" && php maintenance/runJobs.php) >>"$OUT/mw-install.log" 2>&1 || die "MediaWiki: runJobs.php failed ($OUT/mw-install.log)"
	log "MediaWiki: installed ($(grep -c '^wfLoadSkin' "$dir/LocalSettings.php") skins), $MW_PAGE and two templates written"
}

# mw_whole PATH FILE: FILE, the answer to PATH, is whole: a page with the
# site's name and its end (the content page: its table too), or a load.php
# body, not empty, without ResourceLoader's error comment (its errors
# answer 200 too; the startup module: with its module registry).
mw_whole() {
	case $1 in
	/index.php*)
		grep -q "$MW_SITE" "$2" && grep -q '</html>' "$2" || return 1
		[[ $1 != *"title=$MW_PAGE" ]] || grep -q 'Cairn bench table' "$2"
		;;
	*)
		[ -s "$2" ] && ! grep -q '^Problematic modules\|^Backtrace:' "$2" || return 1
		[[ $1 != *modules=startup* ]] || grep -q 'mw.loader.register' "$2"
		;;
	esac
}

part_mediawiki() {
	local run src cache side u i css
	scratch_dir run mediawiki
	php_start_servers "$run" mw
	scratch_dir cache mwcache
	scratch_dir src mwsrc
	mw_tree "$src"
	mw_install "$src" "$cache"
	php_copy_tree mediawiki MediaWiki "$src" mediawiki MW_ROOT
	php_nginx_start "$run" MW_ROOT /resources/assets/poweredby_mediawiki_88x31.png

	# The pages: the main page, the content page, the startup module, and
	# the main page's first stylesheet (its link, &amp; decoded).
	local labels=(Main_Page "$MW_PAGE" "load.php startup")
	local paths=("/index.php?title=Main_Page" "/index.php?title=$MW_PAGE" "/load.php?lang=en&modules=startup&only=scripts&raw=1&skin=vector")
	php_get mediawiki local "${paths[0]}"
	css=$(grep -o '<link rel="stylesheet" href="/load.php?[^"]*"' "$OUT/page.tmp" | head -n 1 | sed -e 's/.*href="//' -e 's/"$//' -e 's/&amp;/\&/g') || true
	[ -n "$css" ] || die "mediawiki: no load.php stylesheet in the main page"
	labels+=("load.php styles")
	paths+=("$css")
	for side in $SIDES; do
		: >"$OUT/mw-siege-urls-$side.txt"
		for i in "${!paths[@]}"; do
			u=${paths[i]}
			echo "http://127.0.0.1:${PHP_PORT[$side]}$u" >>"$OUT/mw-siege-urls-$side.txt"
			php_get mediawiki "$side" "$u"
			if ! mw_whole "$u" "$OUT/page.tmp"; then
				mv "$OUT/page.tmp" "$OUT/page-$side-$i.txt"
				die "mediawiki: $side $u is not a whole page or load.php answer (saved in $OUT/page-$side-$i.txt)"
			fi
		done
	done
	rm -f "$OUT/page.tmp"
	for i in "${!paths[@]}"; do log "mediawiki: ${labels[i]}: ${paths[i]}"; done
	log "mediawiki: ${#paths[@]} URLs answer 200 on every side (pages whole, load.php bodies without errors)"
	siege_rc
	siege_warmup mediawiki mw- "${#paths[@]}"
	for i in "${!paths[@]}"; do page_alone mediawiki "${labels[i]}" "${paths[i]}"; done
	php_stop_servers
}

# ---------------------------------------------------------------- reads
part_reads() {
	local scale dir t0 n c r side cache list batch count node=$READ_NODE
	scale=$(awk -v n="$READ_FILES" 'BEGIN {printf "%.6g", n / 2000}')
	SCALE=$scale ensure_corpus medium
	local corpus=$CORPUS_DIR/medium
	n=$(wc -l <"$corpus/paths.txt")
	for side in $SIDES; do
		dir=$(side_dir "$side" "$node")/reads
		t0=$(now)
		cp -r "$corpus" "$dir" || die "reads: copying the corpus into $dir failed"
		sync && sync "$dir"
		log "reads: $n files ($(du -sm "$corpus" | cut -f1) MB) copied into $dir ($side) in $(elapsed "$t0" "$(now)") s (+ sync)"
	done
	same_sample 20 "$corpus/paths.txt" "$corpus" "${MNT[node]}/reads"
	# Lists: cold = every file once in a random order; warm = READ_COUNT
	# random files (with repeats).
	awk -v seed="$SEED" 'BEGIN {srand(seed)} {print rand() "\t" $0}' "$corpus/paths.txt" | sort -n | cut -f2 >"$OUT/reads-cold.txt"
	awk -v n="$READ_COUNT" -v seed="$SEED" 'BEGIN {srand(seed)} {a[NR] = $0}
		END {for (i = 0; i < n; i++) print a[int(rand() * NR) + 1]}' "$corpus/paths.txt" >"$OUT/reads-warm.txt"
	for cache in $READ_CACHE; do
		list=$OUT/reads-$cache.txt
		count=$(wc -l <"$list")
		if [ "$cache" = warm ]; then
			for side in $SIDES; do
				dir=$(side_dir "$side" "$node")/reads
				(cd "$dir" && xargs -a "$OUT/reads-cold.txt" -d '\n' cat >/dev/null) || die "reads: warm-up pass in $dir failed"
			done
		fi
		for c in $READ_CONC; do
			# Enough batches that all c readers stay busy (4 per reader).
			batch=$((count / (4 * c)))
			[ "$batch" -le "$READ_BATCH" ] || batch=$READ_BATCH
			[ "$batch" -ge 1 ] || batch=1
			for r in $(seq 1 "$ROUNDS"); do
				for side in $(sides "$r"); do
					if [ "$cache" = cold ]; then
						if [ "$side" = cairn ] && [ "$COLD_RESTART" = 1 ]; then
							restart_node "$node"
						fi
						drop_caches
						[ "$side" != cairn ] || log "reads: after drop_caches, $(resident_mb "$CL_DIR/n$node" "$OUT/fincore-c$c-r$r.txt") MB of node $node's files are still in the page cache ($OUT/fincore-c$c-r$r.txt)"
					fi
					dir=$(side_dir "$side" "$node")/reads
					if [ "$side" = cairn ]; then calls_before "$node"; fi
					bounded "$READ_MAX_S" bash -c 'cd "$1" && xargs -a "$2" -d "\n" -P "$3" -n "$4" cat >/dev/null' _ "$dir" "$list" "$c" "$batch"
					record reads "$cache $c readers" "$r" "$side" "$RUN_S" "$count" "$RUN_STATUS"
					if [ "$side" = cairn ]; then calls_after reads "$cache $c readers" "$r" "$node" "$count"; fi
				done
			done
		done
	done
}

# ---------------------------------------------------------------- untar
# ensure_tarball: set TARF to a plain (uncompressed) tar to extract: KERNEL_TAR
# or the Debian package's, decompressed once; with UNTAR_LIMIT, a copy cut
# after that many members (the same bytes, plus the end-of-archive blocks).
ensure_tarball() {
	local kdir=$DATA_DIR/kernel src name full
	mkdir -p "$kdir"
	if [ -n "$KERNEL_TAR" ]; then
		src=$KERNEL_TAR
		[ -f "$src" ] || die "KERNEL_TAR=$src: no such file"
	else
		src=/usr/src/$KERNEL_PKG.tar.xz
		[ -f "$src" ] || apt_install "$KERNEL_PKG"
		[ -f "$src" ] || die "$KERNEL_PKG did not install $src"
	fi
	name=$(basename "$src")
	name=${name%.xz}
	name=${name%.gz}
	name=${name%.tgz}
	name=${name%.tar}
	# dcat: the tarball's bytes, decompressed.
	dcat() {
		case $src in
		*.xz) xz -dc "$src" ;;
		*.gz | *.tgz) gzip -dc "$src" ;;
		*) cat "$src" ;;
		esac
	}
	if [ -n "$UNTAR_LIMIT" ]; then
		TARF=$kdir/$name-first$UNTAR_LIMIT.tar
		if [ ! -f "$TARF" ]; then
			local blk
			# GNU tar -R prints each member's first block; cut before member N+1.
			blk=$(dcat | tar -tRf - 2>/dev/null | sed -n "$((UNTAR_LIMIT + 1)){p;q}" | sed -n 's/^block \([0-9]*\):.*/\1/p') || true
			if [ -z "$blk" ]; then
				log "untar: the tarball has no more than $UNTAR_LIMIT members: using all of it"
				dcat >"$TARF.tmp"
			else
				{ dcat | head -c $((blk * 512)) || true; head -c 10240 /dev/zero; } >"$TARF.tmp"
				[ "$(stat -c %s "$TARF.tmp")" = $((blk * 512 + 10240)) ] || die "cutting $src after $UNTAR_LIMIT members failed"
			fi
			mv "$TARF.tmp" "$TARF"
		fi
	else
		case $src in
		*.xz | *.gz | *.tgz)
			full=$kdir/$name.tar
			if [ ! -f "$full" ]; then
				log "untar: decompressing $src once to $full (excluded from every figure)"
				dcat >"$full.tmp" || die "decompressing $src failed"
				mv "$full.tmp" "$full"
			fi
			TARF=$full
			;;
		*) TARF=$src ;;
		esac
	fi
	TAR_MEMBERS=$(tar -tf "$TARF" | wc -l)
	log "untar: $TARF: $TAR_MEMBERS members, $(($(stat -c %s "$TARF") / 1000000)) MB"
}

# count_entries DIR: entries under DIR (find | wc -l, DIR itself included).
count_entries() { find "$1" 2>/dev/null | wc -l; }

part_untar() {
	local r side dest prev="" want got deadline t0 chk
	ensure_tarball
	cat "$TARF" >/dev/null
	for r in $(seq 1 "$ROUNDS"); do
		for side in $(sides "$r"); do
			dest=$(side_dir "$side" "$UNTAR_NODE")/untar-r$r
			mkdir -p "$dest"
			sync
			if [ "$side" = cairn ]; then calls_before "$UNTAR_NODE"; fi
			bounded "$UNTAR_MAX_S" bash -c 'tar -xf "$1" -C "$2" && sync && sync "$2"' _ "$TARF" "$dest"
			record untar "tar -x + sync ($TAR_MEMBERS members)" "$r" "$side" "$RUN_S" "$TAR_MEMBERS" "$RUN_STATUS"
			if [ "$side" = cairn ]; then calls_after untar "tar -x + sync ($TAR_MEMBERS members)" "$r" "$UNTAR_NODE" "$TAR_MEMBERS"; fi
			[ "$RUN_STATUS" = ok ] || { tail -n 5 "${NODE_LOG[UNTAR_NODE]}" >&2; die "untar round $r on $side: $RUN_STATUS"; }
		done
		# Every entry visible through node CHECK_NODE, and a sample of the
		# files equal to the local copies.
		want=$(count_entries "$LOCAL/untar-r$r")
		chk=${MNT[CHECK_NODE]}/untar-r$r
		t0=$(now)
		deadline=$((SECONDS + 60))
		until got=$(count_entries "$chk") && [ "$got" = "$want" ]; do
			[ $SECONDS -lt $deadline ] || die "untar round $r: node $CHECK_NODE's mount lists $got entries, the local tree $want (after 60 s)"
			sleep 1
		done
		log "untar round $r: node $CHECK_NODE's mount lists all $got entries (waited $(elapsed "$t0" "$(now)") s)"
		(cd "$LOCAL/untar-r$r" && find . -type f -printf '%P\n') >"$OUT/untar-files.txt"
		same_sample "$UNTAR_SAMPLE" "$OUT/untar-files.txt" "$LOCAL/untar-r$r" "$chk"
		# The previous round's trees go (untimed; the tree part times rm -rf).
		if [ -n "$prev" ]; then
			for side in $SIDES; do
				bounded "$UNTAR_MAX_S" rm -rf -- "$(side_dir "$side" "$UNTAR_NODE")/$prev"
				log "untar: rm -rf of the previous tree ($side) took $RUN_S s ($RUN_STATUS)"
				[ "$RUN_STATUS" = ok ] || FAILED=1
			done
		fi
		prev=untar-r$r
	done
	KTREE_REL=$prev
}

# ---------------------------------------------------------------- meta
part_meta() {
	local r side dir a b n
	if [ -z "${KTREE_REL:-}" ]; then
		ensure_tarball
		log "meta: extracting $TARF onto every side (untimed)"
		for side in $SIDES; do
			mkdir -p "$(side_dir "$side" "$UNTAR_NODE")/meta-tree"
			tar -xf "$TARF" -C "$(side_dir "$side" "$UNTAR_NODE")/meta-tree" || die "tar -x into the $side side failed"
		done
		KTREE_REL=meta-tree
	fi
	n=$(find "$LOCAL/$KTREE_REL" -type f | wc -l)
	# Warm every side, and check they list the same files, sizes and modes.
	(cd "$LOCAL/$KTREE_REL" && find . -type f -printf '%P %s %m\n' | sort) >"$OUT/meta-local.txt"
	a=$(sha256sum <"$OUT/meta-local.txt")
	for side in $SIDES; do
		[ "$side" = local ] && continue
		(cd "$(side_dir "$side" "$META_NODE")/$KTREE_REL" && find . -type f -printf '%P %s %m\n' | sort) >"$OUT/meta-$side.txt"
		b=$(sha256sum <"$OUT/meta-$side.txt")
		[ "$a" = "$b" ] || die "meta: the $side side lists other files, sizes or modes than the local tree (diff $OUT/meta-local.txt $OUT/meta-$side.txt)"
	done
	log "meta: $n files, the same paths, sizes and modes on every side"
	for r in $(seq 1 "$ROUNDS"); do
		for side in $(sides "$r"); do
			dir=$(side_dir "$side" "$META_NODE")/$KTREE_REL
			if [ "$side" = cairn ]; then calls_before "$META_NODE"; fi
			bounded "$META_MAX_S" bash -c 'find "$1" -type f -print0 | xargs -0 stat --format="%n %s %Y %a %U" >/dev/null' _ "$dir"
			record meta "find + xargs stat warm ($n files)" "$r" "$side" "$RUN_S" "$n" "$RUN_STATUS"
			if [ "$side" = cairn ]; then calls_after meta "find + xargs stat warm ($n files)" "$r" "$META_NODE" "$n"; fi
		done
	done
}

# ---------------------------------------------------------------- large
part_large() {
	local src=$DATA_DIR/large-${LARGE_MB}MB.bin r side dest want got bytes
	bytes=$((LARGE_MB * 1000000))
	if [ ! -f "$src" ] || [ "$(stat -c %s "$src")" != "$bytes" ]; then
		log "large: generating $src ($LARGE_MB MB, AES-CTR stream of seed $SEED)"
		openssl enc -aes-128-ctr -nosalt -K "$(printf '%032x' "$SEED")" -iv 00000000000000000000000000000000 \
			-in /dev/zero 2>/dev/null | head -c "$bytes" >"$src.tmp" || true
		[ "$(stat -c %s "$src.tmp")" = "$bytes" ] || die "large: generating $src failed"
		mv "$src.tmp" "$src"
	fi
	want=$(sha256sum <"$src" | cut -d' ' -f1)
	for r in $(seq 1 "$ROUNDS"); do
		for side in $(sides "$r"); do
			dest=$(side_dir "$side" "$LARGE_NODE")/large-r$r.bin
			sync
			if [ "$side" = cairn ]; then calls_before "$LARGE_NODE"; fi
			bounded "$LARGE_MAX_S" bash -c 'cp "$1" "$2" && sync && sync "$(dirname "$2")"' _ "$src" "$dest"
			record large "cp + sync ($LARGE_MB MB)" "$r" "$side" "$RUN_S" 1 "$RUN_STATUS"
			if [ "$side" = cairn ]; then calls_after large "cp + sync ($LARGE_MB MB)" "$r" "$LARGE_NODE" 1; fi
			if [ "$side" = cairn ] && [ "$RUN_STATUS" = ok ]; then
				got=$(sha256sum <"${MNT[CHECK_NODE]}/large-r$r.bin" | cut -d' ' -f1) || got="read failed"
				[ "$got" = "$want" ] || die "large round $r: the copy read through node $CHECK_NODE has SHA-256 $got, want $want"
				log "large round $r: the copy read through node $CHECK_NODE's mount matches"
			fi
			rm -f -- "$dest"
		done
	done
}

# ---------------------------------------------------------------- small
part_small() {
	local scale side dir r node=$SMALL_NODE
	scale=$(awk -v n="$SMALL_FILES" 'BEGIN {printf "%.6g", n / 20000}')
	SCALE=$scale ensure_corpus small
	local corpus=$CORPUS_DIR/small
	smallfiles_bin
	for side in $SIDES; do
		dir=$(side_dir "$side" "$node")/small
		if ! client_reads "$side" "$dir" "$(find "$corpus" | wc -l)"; then
			cp -r "$corpus" "$dir" || die "small: copying the corpus into $dir failed"
			sync && sync "$dir"
		fi
		# Warm: every file read once.
		(cd "$dir" && xargs -a "$corpus/paths.txt" -d '\n' cat >/dev/null) || die "small: warm-up pass in $dir failed"
	done
	log "small: $(wc -l <"$corpus/paths.txt") files ($(du -sm "$corpus" | cut -f1) MB) on every side, read once"
	for r in $(seq 1 "$ROUNDS"); do
		for side in $(sides "$r"); do
			dir=$(side_dir "$side" "$node")/small
			if [ "$side" = cairn ]; then calls_before "$node"; fi
			bounded "$SMALL_MAX_S" "$SF" -mode read -dir "$dir" -list "$corpus/paths.txt" \
				-threads "$SMALL_THREADS" -count "$SMALL_COUNT" -seed "$((SEED + r))" >"$OUT/small-r$r-$side.txt" 2>&1
			RUN_S=$(sed -n 's/.*mode=read .*seconds=\([0-9.]*\).*/\1/p' "$OUT/small-r$r-$side.txt")
			[ -n "$RUN_S" ] || { RUN_S=0; RUN_STATUS="FAIL $(tail -n 1 "$OUT/small-r$r-$side.txt")"; }
			record small "open+read+close warm: $SMALL_THREADS threads ($SMALL_COUNT files)" "$r" "$side" "$RUN_S" "$SMALL_COUNT" "$RUN_STATUS"
			if [ "$side" = cairn ]; then calls_after small "open+read+close warm" "$r" "$node" "$SMALL_COUNT"; fi
			# Names that do not exist: a first stat of each, then again.
			if [ "$side" = cairn ]; then calls_before "$node"; fi
			bounded "$SMALL_MAX_S" "$SF" -mode miss -dir "$dir/probe-r$r" \
				-threads "$SMALL_THREADS" -count "$SMALL_MISSES" >"$OUT/small-miss-r$r-$side.txt" 2>&1
			local first again st=$RUN_STATUS
			first=$(sed -n 's/.*mode=miss-first .*seconds=\([0-9.]*\).*/\1/p' "$OUT/small-miss-r$r-$side.txt")
			again=$(sed -n 's/.*mode=miss-again .*seconds=\([0-9.]*\).*/\1/p' "$OUT/small-miss-r$r-$side.txt")
			if [ -z "$first" ] || [ -z "$again" ]; then first=0 again=0 st="FAIL $(tail -n 1 "$OUT/small-miss-r$r-$side.txt")"; fi
			record small "first stat of missing names: $SMALL_THREADS threads ($SMALL_MISSES)" "$r" "$side" "$first" "$SMALL_MISSES" "$st"
			record small "stat of the same missing names again" "$r" "$side" "$again" "$SMALL_MISSES" "$st"
			if [ "$side" = cairn ]; then calls_after small "stat of missing names: first and again" "$r" "$node" "$((2 * SMALL_MISSES))"; fi
		done
	done
}

# ---------------------------------------------------------------- tree
part_tree() {
	local r side dir members node=$TREE_NODE saved=$UNTAR_LIMIT
	UNTAR_LIMIT=$TREE_LIMIT
	[ "$TREE_LIMIT" != 0 ] || UNTAR_LIMIT=""
	ensure_tarball
	UNTAR_LIMIT=$saved
	members=$TAR_MEMBERS
	cat "$TARF" >/dev/null
	for r in $(seq 1 "$ROUNDS"); do
		for side in $(sides "$r"); do
			dir=$(side_dir "$side" "$node")/tree-r$r
			mkdir -p "$dir"
			{ tar -xf "$TARF" -C "$dir" && sync && sync "$dir"; } || die "tree: extracting into $dir failed"
			local what cmd
			for what in "chmod -R g+w" "chown -R 1000:1000" "rm -rf"; do
				case $what in
				chmod*) cmd='chmod -R g+w "$1" && sync && sync "$1"' ;;
				chown*) cmd='chown -R 1000:1000 "$1" && sync && sync "$1"' ;;
				rm*) cmd='rm -rf -- "$1" && sync && sync "$(dirname "$1")"' ;;
				esac
				if [ "$side" = cairn ]; then calls_before "$node"; fi
				bounded "$TREE_MAX_S" bash -c "$cmd" _ "$dir"
				record tree "$what + sync ($members members)" "$r" "$side" "$RUN_S" "$members" "$RUN_STATUS"
				if [ "$side" = cairn ]; then calls_after tree "$what + sync ($members members)" "$r" "$node" "$members"; fi
			done
			[ ! -e "$dir" ] || die "tree: $dir still exists after rm -rf"
		done
	done
}

# ---------------------------------------------------------------- git
# ensure_gitrepo: a bare repository of GIT_FILES files of the kernel tree
# in one commit, made once under DATA_DIR (its path in GIT_REPO).
ensure_gitrepo() {
	GIT_REPO=$DATA_DIR/git/kernel-$GIT_FILES.git
	[ -d "$GIT_REPO" ] && return
	local saved=$UNTAR_LIMIT work
	UNTAR_LIMIT=$GIT_FILES
	ensure_tarball
	UNTAR_LIMIT=$saved
	work=$DATA_DIR/git/work-$GIT_FILES
	rm -rf "$work" "$GIT_REPO.tmp"
	mkdir -p "$work"
	tar -xf "$TARF" -C "$work" || die "git: extracting the tree failed"
	(cd "$work" && git init -q && git add -A -f && git -c user.name=bench -c user.email=bench@example.invalid commit -q -m "kernel tree, $GIT_FILES members") ||
		die "git: making the repository failed"
	git clone -q --bare "$work" "$GIT_REPO.tmp" || die "git: cloning it bare failed"
	mv "$GIT_REPO.tmp" "$GIT_REPO"
	rm -rf "$work"
	log "git: made $GIT_REPO ($(du -sm "$GIT_REPO" | cut -f1) MB)"
}

part_git() {
	local r side dest files node=$GIT_NODE
	ensure_gitrepo
	files=$(git --git-dir="$GIT_REPO" ls-tree -r HEAD | wc -l)
	for r in $(seq 1 "$ROUNDS"); do
		for side in $(sides "$r"); do
			dest=$(side_dir "$side" "$node")/git-r$r
			sync
			if [ "$side" = cairn ]; then calls_before "$node"; fi
			# file://: the pack protocol, as from a server (a plain path
			# would hard-link objects on the same file system).
			bounded "$GIT_MAX_S" bash -c 'git clone -q "file://$1" "$2" && sync && sync "$2"' _ "$GIT_REPO" "$dest"
			record git "git clone + sync ($files files)" "$r" "$side" "$RUN_S" "$files" "$RUN_STATUS"
			if [ "$side" = cairn ]; then calls_after git "git clone + sync ($files files)" "$r" "$node" "$files"; fi
			[ "$RUN_STATUS" != ok ] || [ "$(git -C "$dest" status --porcelain | wc -l)" = 0 ] || die "git: the clone on the $side side is not clean"
			rm -rf -- "$dest"
		done
	done
}

# ---------------------------------------------------------------- upload
# smallfiles_bin: bench/smallfiles built once for the run (its path in SF).
smallfiles_bin() {
	[ -n "${SF:-}" ] && return
	scratch_dir SF smallfiles
	(cd "$REPO_DIR" && go build -o "$SF/smallfiles" ./bench/smallfiles) || die "building bench/smallfiles failed"
	SF=$SF/smallfiles
}

part_upload() {
	local r side dir node=$UPLOAD_NODE
	smallfiles_bin
	for r in $(seq 1 "$ROUNDS"); do
		for side in $(sides "$r"); do
			dir=$(side_dir "$side" "$node")/upload-r$r
			mkdir -p "$dir" && sync && sync "$dir"
			if [ "$side" = cairn ]; then calls_before "$node"; fi
			bounded "$UPLOAD_MAX_S" "$SF" -mode upload -dir "$dir" -count "$UPLOAD_COUNT" -seed "$((SEED + r))" >"$OUT/upload-r$r-$side.txt" 2>&1
			[ "$RUN_STATUS" = ok ] || RUN_STATUS="$RUN_STATUS $(tail -n 1 "$OUT/upload-r$r-$side.txt")"
			record upload "temporary name then rename into place then fsync DIR ($UPLOAD_COUNT files of 200 KB-5 MB)" "$r" "$side" "$RUN_S" "$UPLOAD_COUNT" "$RUN_STATUS"
			if [ "$side" = cairn ]; then calls_after upload "temporary name + rename" "$r" "$node" "$UPLOAD_COUNT"; fi
			rm -rf -- "$dir"
		done
	done
}

# ---------------------------------------------------------------- contend
part_contend() {
	local r dir a b line p50 p99
	smallfiles_bin
	for r in $(seq 1 "$ROUNDS"); do
		dir=contend-r$r
		mkdir "${MNT[1]}/$dir" && sync "${MNT[1]}"
		a=${MNT[1]}/$dir b=${MNT[3]}/$dir
		local deadline=$((SECONDS + 10))
		until [ -d "$b" ]; do
			[ $SECONDS -lt $deadline ] || die "contend: $dir not on node 3 after 10 s"
			sleep 0.05
		done
		calls_before 1
		bounded "$CONTEND_MAX_S" "$SF" -mode contend -dir "$a" -dir2 "$b" -count "$CONTEND_COUNT" >"$OUT/contend-r$r.txt" 2>&1
		[ "$RUN_STATUS" = ok ] || RUN_STATUS="$RUN_STATUS $(tail -n 1 "$OUT/contend-r$r.txt")"
		record contend "2 nodes x $CONTEND_COUNT creates in one directory (total)" "$r" cairn "$RUN_S" "$((2 * CONTEND_COUNT))" "$RUN_STATUS"
		calls_after contend "2 nodes x $CONTEND_COUNT creates in one directory" "$r" 1 "$CONTEND_COUNT"
		line=$(grep 'mode=contend-latency' "$OUT/contend-r$r.txt" || true)
		p50=$(sed -n 's/.*p50_ms=\([0-9.]*\).*/\1/p' <<<"$line")
		p99=$(sed -n 's/.*p99_ms=\([0-9.]*\).*/\1/p' <<<"$line")
		record contend "create p50 (ms)" "$r" cairn "${p50:-0}" 1 "$RUN_STATUS"
		record contend "create p99 (ms)" "$r" cairn "${p99:-0}" 1 "$RUN_STATUS"
		rm -rf -- "$a"
	done
}

# ---------------------------------------------------------------- main
setup_local
cluster_start
[ "$LOOPBACK" = 1 ] && loopback_start
START_INFO="$(date -u +%Y-%m-%dT%H:%MZ); host $(hostname), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), $(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) MB RAM, kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg); local $LOCAL_DEV (ext4); git $(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo unknown); mount options ${MOUNT_OPTS:-none}"
for b in $ALL_BENCHES; do
	selected "$b" || continue
	log "=== $b"
	"part_$b"
	client_report "$b"
done

target_of() {
	case $1 in
	php) echo "<= 1.1" ;; mediawiki) echo "<= 1.05" ;; reads) echo ">= 0.9" ;; untar) echo "<= 3" ;; meta) echo "<= 1.1" ;; large) echo "<= 2" ;;
	small) echo "<= 1.2" ;; tree) echo "<= 3" ;; git) echo "<= 3" ;; upload) echo "<= 1.8" ;; contend) echo "p99 <= 20 ms" ;;
	esac
}
{
	echo "Cairn FUSE mount (3 nodes on loopback, R=3) vs local ext4 and a plain go-fuse loopback of ext4, same work, ROUNDS=$ROUNDS rotated rounds"
	echo "$START_INFO"
	echo "command: ${GIVEN}bench/mount.sh $BENCHES"
	echo
	echo "| part | case | local (mean) | loopback (mean) | Cairn (mean) | loopback/local | Cairn/local (mean) | (best) | target | | client (mean) | client/Cairn (mean) |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---|---|---:|---:|"
	for b in $ALL_BENCHES; do
		selected "$b" || continue
		awk -F, -v part="$b" -v target="$(target_of "$b")" '
		NR == 1 || $1 != part { next }
		{
			k = $2
			if (!(k in seen)) { seen[k] = 1; order[++n] = k }
			if ($8 != "ok") { fail[k] = 1; next }
			# reads: files/s (higher is better); the rest: seconds.
			v = (part == "reads") ? $7 : $5
			sum[k, $4] += v; cnt[k, $4]++
			if (!((k, $4) in best) || (part == "reads" ? v > best[k, $4] : v < best[k, $4])) best[k, $4] = v
		}
		END {
			unit = (part == "reads") ? " files/s" : " s"
			for (i = 1; i <= n; i++) {
				k = order[i]
				if (part == "contend" && cnt[k, "cairn"] > 0) {
					# Cairn only (two nodes): its own figures; the target is the p99.
					mc = sum[k, "cairn"] / cnt[k, "cairn"]
					v = (k ~ /p99/) ? ((mc <= 20) ? "meets" : "misses") : ""
					printf "| %s | %s | — | — | %.3f (best %.3f) | — | — | — | %s | %s | — | — |\n", part, k, mc, best[k, "cairn"], (k ~ /p99/) ? target : "", (k in fail) ? "FAIL" : v
					continue
				}
				if (cnt[k, "local"] == 0 || cnt[k, "cairn"] == 0) { printf "| %s | %s | — | — | — | — | — | — | %s | FAIL | — | — |\n", part, k, target; continue }
				ml = sum[k, "local"] / cnt[k, "local"]; mc = sum[k, "cairn"] / cnt[k, "cairn"]
				lb = "—"; rl = "—"
				if (cnt[k, "loopback"] > 0) {
					mlb = sum[k, "loopback"] / cnt[k, "loopback"]
					lb = sprintf("%.3f%s", mlb, unit); rl = (ml > 0) ? sprintf("%.2f", mlb / ml) : "—"
				}
				rm = (ml > 0) ? mc / ml : 0; rb = (best[k, "local"] > 0) ? best[k, "cairn"] / best[k, "local"] : 0
				split(target, t, " ")
				ok = (t[1] == "<=") ? (rm <= t[2]) : (rm >= t[2])
				cl = "—"; rc = "—"
				if (cnt[k, "client"] > 0) {
					mcl = sum[k, "client"] / cnt[k, "client"]
					cl = sprintf("%.3f%s", mcl, unit); rc = (mc > 0) ? sprintf("%.2f", mcl / mc) : "—"
				}
				printf "| %s | %s | %.3f%s | %s | %.3f%s | %s | %.2f | %.2f | %s | %s | %s | %s |\n", part, k, ml, unit, lb, mc, unit, rl, rm, rb, target,
					(k in fail) ? "FAIL" : (ok ? "meets" : "misses"), cl, rc
			}
		}' "$CSV"
	done
	echo
	echo "FUSE calls on the Cairn side per item (page, file), round 1, the 8 opcodes that took most time per case (all in calls.tsv):"
	echo
	echo "| part | case | calls per item |"
	echo "|---|---|---|"
	awk -F'\t' 'NR > 1 && $3 == "1" {
		k = $1 "\t" $2
		if (!(k in seen)) { seen[k] = 1; order[++n] = k }
		if (cnt[k]++ < 8) line[k] = line[k] (line[k] == "" ? "" : ", ") $4 " " $6
	}
	END { for (i = 1; i <= n; i++) { split(order[i], p, "\t"); printf "| %s | %s | %s |\n", p[1], p[2], line[order[i]] } }' "$CALLS"
} | tee "$OUT/table.md"
log "raw results in $OUT"
[ "$FAILED" -eq 0 ] || die "some runs failed or hit their time bound (marked in $CSV)"
