#!/usr/bin/env bash
# POSIX conformance of Cairn's FUSE mount: pjdfstest and fsx, with a local
# ext4 file system as the baseline. Not part of `make test` (it needs root,
# /dev/fuse, a loop device and about 15 minutes on 2 cores; every stage has
# a timeout, below); results and analysis: docs/conformance.md.
#
#   make build && test/conformance/mount.sh        # as root
#
# What it does:
#   1. obtains and builds pjdfstest (github pjd/pjdfstest) and fsx
#      (ltp/fsx.c of github kdave/xfstests) in a temporary directory, at
#      run time; nothing is vendored. Missing Debian packages are installed
#      with apt-get.
#   2. starts `cairn dev --data WORK/data --mount web` (a local 3-node
#      cluster), waits for node 2's mount, and runs pjdfstest's test
#      directories below with `prove -r`, from inside a directory on a
#      loop-mounted ext4 image and from inside a directory on the mount.
#      (pjdfstest has no tests/create: open/ covers O_CREAT.)
#   3. runs fsx for FSX_OPS operations on a file on the mount (and, with
#      the same seed, on ext4).
#   4. prints a summary; exits 1 when a test file that passes on ext4 fails
#      on Cairn (any assertion, FIFOs, sockets and devices included: the
#      mount makes them since issue 32) or when fsx fails on Cairn.
#   5. always stops the cluster (SIGTERM: it unmounts), unmounts what it
#      mounted and removes its temporary directory.
#
# Environment (all optional):
#   PJDFSTEST_SRC   git URL or path of pjdfstest's repository
#                   (default: /work/.mirror/pjd+pjdfstest/repo when present,
#                   else https://github.com/pjd/pjdfstest)
#   PJDFSTEST_DIR   an already-built pjdfstest tree (holds the executable
#                   `pjdfstest` and `tests/`): no clone, no build
#   XFSTESTS_SRC    git URL or path of xfstests (default:
#                   /work/.mirror/kdave+xfstests/repo when present, else
#                   https://github.com/kdave/xfstests)
#   FSX_BIN         an already-built fsx: no clone, no build
#   PJD_DIRS        pjdfstest test directories to run (default below)
#   FSX_OPS         fsx operations (default 100000)
#   FSX_SEED        fsx -S seed (default 0: fsx picks one and prints it)
#   CAIRN_BIN       the cairn binary (default: bin/cairn of this checkout)
#   CAIRN_PORT      port of node 1 (default: a free one from 20000 up)
#   DEV_ARGS        extra flags of `cairn dev` (--mount-handles: the mount
#                   with a handle per open file instead of no-open mode)
#   MOUNT_OPTS      the mount's options (noflush, handles; default none: the
#                   default flush mode; docs/operations.md, "Mount modes")
#   RESULTS_DIR     when set, every log (TAP output per file, the
#                   classification log, fsx logs, the cluster's log) is
#                   copied there before the temporary directory goes
#   KEEP_WORK=1     keep the temporary directory (printed at the end)
#   Timeouts in seconds: APT_TIMEOUT (600), BUILD_TIMEOUT (900),
#   MOUNT_TIMEOUT (120), PJD_FILE_TIMEOUT (600, one .t file),
#   PJD_DIR_TIMEOUT (3600, one prove -r of a directory), FSX_TIMEOUT (3600),
#   STOP_TIMEOUT (60, the cluster's exit after SIGTERM).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CAIRN_BIN=${CAIRN_BIN:-$ROOT/bin/cairn}
PJD_DIRS=${PJD_DIRS:-"open create truncate ftruncate rename unlink mkdir rmdir symlink link chmod chown utimensat posix_fallocate mkfifo mknod"}
FSX_OPS=${FSX_OPS:-100000}
FSX_SEED=${FSX_SEED:-0}
APT_TIMEOUT=${APT_TIMEOUT:-600}
BUILD_TIMEOUT=${BUILD_TIMEOUT:-900}
MOUNT_TIMEOUT=${MOUNT_TIMEOUT:-120}
PJD_FILE_TIMEOUT=${PJD_FILE_TIMEOUT:-600}
PJD_DIR_TIMEOUT=${PJD_DIR_TIMEOUT:-3600}
FSX_TIMEOUT=${FSX_TIMEOUT:-3600}
STOP_TIMEOUT=${STOP_TIMEOUT:-60}

# fsx options besides -N and -S, one per feature Cairn's mount does not
# implement (internal/frontend/fuse/handle.go: Allocate takes mode 0 only
# and answers EOPNOTSUPP to every other mode; there is no ioctl, no
# O_DIRECT, no RWF_* flag). fsx would find most of these out itself at
# start (it probes each and disables what answers EOPNOTSUPP), but saying
# them keeps a probe's quirk from turning into a false failure:
#   -K  no fallocate(FALLOC_FL_KEEP_SIZE)
#   -H  no fallocate(FALLOC_FL_PUNCH_HOLE)
#   -z  no fallocate(FALLOC_FL_ZERO_RANGE)
#   -C  no fallocate(FALLOC_FL_COLLAPSE_RANGE)
#   -I  no fallocate(FALLOC_FL_INSERT_RANGE)
#   -u  no fallocate(FALLOC_FL_UNSHARE_RANGE)
#   -a  no RWF_ATOMIC writes (they need O_DIRECT; fsx turns them off
#       without -Z anyway)
# RWF_DONTCACHE (a page-cache hint) is left to fsx's probe: its usage
# lists -T for it, but its getopt string (at xfstests 63a29724) does not
# accept -T; the probe turns it off when the read answers EOPNOTSUPP.
# Kept: read/write at any offset, truncate (grow and shrink), mmap reads
# and shared mmap writes (the mount supports them), fallocate mode 0
# (posix_fallocate), copy_file_range (the kernel falls back to a copy
# through read and write). Clone range (-J), dedupe range (-B) and exchange
# range (-0) are not compiled in: the minimal build below has no
# <linux/fs.h>/<xfs/xfs.h>, so fsx has no FICLONERANGE, FIDEDUPERANGE or
# XFS_IOC_EXCHANGE_RANGE.
FSX_OPTS=(-K -H -z -C -I -u -a)

log() { printf '== %s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'mount.sh: %s\n' "$*" >&2; exit 2; }

[ "$(id -u)" = 0 ] || die "run as root (pjdfstest needs it, and so do the loop and FUSE mounts)"
[ -c /dev/fuse ] || die "/dev/fuse is missing"
[ -x "$CAIRN_BIN" ] || die "$CAIRN_BIN is missing: run make build first"

# ---------------------------------------------------------------- packages
need_pkgs=()
need() { command -v "$1" >/dev/null 2>&1 || need_pkgs+=("$2"); }
need git git
need gcc gcc
need make make
need perl perl
need prove perl
need openssl openssl            # pjdfstest's namegen: openssl md5
need timeout coreutils
need mkfs.ext4 e2fsprogs
need losetup mount
need findmnt util-linux
if [ -z "${PJDFSTEST_DIR:-}" ]; then
	need autoreconf autoconf
	need aclocal automake
	need libtoolize libtool
fi
if [ ${#need_pkgs[@]} -gt 0 ]; then
	command -v apt-get >/dev/null || die "missing commands; install: ${need_pkgs[*]}"
	log "installing with apt-get: ${need_pkgs[*]}"
	export DEBIAN_FRONTEND=noninteractive
	timeout "$APT_TIMEOUT" apt-get update -qq >/dev/null
	timeout "$APT_TIMEOUT" apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi

# ----------------------------------------------------------------- cleanup
WORK=$(mktemp -d /tmp/cairn-conformance.XXXXXX)
CLUSTER_PID=
EXT4_MNT=
# The long stages (prove, fsx) run in the background under timeout(1)
# while the script waits, so that a signal to the script is acted on at
# once: cleanup then stops the stage (timeout passes the signal on to its
# process group) before it stops the cluster.
STAGE_PID=
cleanup() {
	local rc=$? pid=$CLUSTER_PID
	trap - EXIT INT TERM
	set +e
	cd /
	if [ -n "$STAGE_PID" ] && kill -0 "$STAGE_PID" 2>/dev/null; then
		log "stopping the running stage (SIGTERM to $STAGE_PID)"
		kill -TERM "$STAGE_PID"
		wait "$STAGE_PID" 2>/dev/null
	fi
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		log "stopping the cluster (SIGTERM to $pid)"
		kill -TERM "$pid"
		for _ in $(seq "$STOP_TIMEOUT"); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
		if kill -0 "$pid" 2>/dev/null; then
			log "the cluster did not stop in ${STOP_TIMEOUT}s: SIGKILL"
			kill -KILL "$pid"
		fi
		wait "$pid" 2>/dev/null
	fi
	local m
	for m in "$WORK"/data/mnt/node*/*; do
		if [ -d "$m" ] && mountpoint -q "$m" 2>/dev/null; then
			log "unmounting $m (left mounted)"
			umount "$m" 2>/dev/null || umount -l "$m"
		fi
	done
	if [ -n "$EXT4_MNT" ] && mountpoint -q "$EXT4_MNT"; then
		umount "$EXT4_MNT" 2>/dev/null || umount -l "$EXT4_MNT" # the loop device goes with it (autoclear)
	fi
	if [ -n "${RESULTS_DIR:-}" ]; then
		mkdir -p "$RESULTS_DIR"
		cp -r "$WORK/results/." "$RESULTS_DIR/" 2>/dev/null
		cp "$WORK/cluster.log" "$RESULTS_DIR/" 2>/dev/null
		log "logs copied to $RESULTS_DIR"
	fi
	if [ "${KEEP_WORK:-}" = 1 ]; then
		log "kept $WORK"
	elif findmnt -rn -o TARGET | grep -q "^$WORK/"; then
		log "something is still mounted under $WORK: not removing it"
	else
		rm -rf --one-file-system "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "$WORK/results"

# git clone of a URL or a local repository (bare or not), depth 1.
clone() {
	local src=$1 dst=$2
	[ -d "$src" ] && src="file://$(cd "$src" && pwd)"
	timeout "$BUILD_TIMEOUT" git clone -q --depth 1 "$src" "$dst"
	git -C "$dst" log -1 --format='%H %cs' >"$dst.commit"
}

# ------------------------------------------------------------- pjdfstest
# $WORK/pjd holds: tests/ (copied), pjdfstest.real (the program) and
# pjdfstest, a wrapper that tests/misc.sh finds and runs for every call.
#
# The wrapper logs each call with its test file (PJD_T) and
# assertion number (ntest: exported into the tests' shells, so a call
# made for assertion N sees N), which the summary shows for assertions
# that print no call (test_check).
PJD=$WORK/pjd
mkdir -p "$PJD"
if [ -n "${PJDFSTEST_DIR:-}" ]; then
	[ -x "$PJDFSTEST_DIR/pjdfstest" ] && [ -f "$PJDFSTEST_DIR/tests/misc.sh" ] ||
		die "PJDFSTEST_DIR=$PJDFSTEST_DIR has no pjdfstest executable and tests/misc.sh"
	src=$PJDFSTEST_DIR
	echo "prebuilt $PJDFSTEST_DIR" >"$WORK/results/pjdfstest.commit"
else
	if [ -n "${PJDFSTEST_SRC:-}" ]; then url=$PJDFSTEST_SRC
	elif [ -d /work/.mirror/pjd+pjdfstest/repo ]; then url=/work/.mirror/pjd+pjdfstest/repo
	else url=https://github.com/pjd/pjdfstest; fi
	log "building pjdfstest from $url"
	clone "$url" "$WORK/pjd-src"
	cp "$WORK/pjd-src.commit" "$WORK/results/pjdfstest.commit"
	(cd "$WORK/pjd-src" && timeout "$BUILD_TIMEOUT" bash -c \
		'autoreconf -ifs && ./configure -q && make -s pjdfstest') >"$WORK/results/pjdfstest-build.log" 2>&1 ||
		{ tail -30 "$WORK/results/pjdfstest-build.log" >&2; die "pjdfstest did not build"; }
	src=$WORK/pjd-src
fi
cp -r "$src/tests" "$PJD/tests"
cp "$src/pjdfstest" "$PJD/pjdfstest.real"
cat >"$PJD/pjdfstest" <<'WRAP'
#!/bin/bash
# mount.sh's wrapper around pjdfstest: logs the call.
[ -n "${PJD_LOG:-}" ] && printf '%s\t%s\t%s\n' "${PJD_T:-?}" "${ntest:-?}" "$*" >>"$PJD_LOG"
exec "$0.real" "$@"
WRAP
chmod +x "$PJD/pjdfstest"
# prove runs every .t through this: its TAP output and exit status are
# kept per file, and it is bounded in time. A "Bail out!" (utimensat/09.t
# prints one when it cannot probe 64-bit timestamps) is kept in the file's
# TAP but hidden from prove, which would otherwise skip the rest of the
# directory.
cat >"$PJD/run-t" <<'RUNT'
#!/bin/bash
export PJD_T=$1
out=$PJD_TAP/$(printf '%s' "${1#"$PJD_TESTS"/}" | tr / _)
# --foreground: stay in prove's process group, which the script's cleanup
# signals (the test's own children are short calls of pjdfstest)
timeout --foreground -k 10 "$PJD_FILE_TIMEOUT" /bin/sh "$1" | tee "$out.tap" | sed 's/^Bail out!/# (mount.sh hid from prove:) Bail out!/'
rc=${PIPESTATUS[0]}
echo "$rc" >"$out.rc"
exit "$rc"
RUNT
chmod +x "$PJD/run-t"

# -------------------------------------------------------------------- fsx
FSX=$WORK/fsx
if [ -n "${FSX_BIN:-}" ]; then
	[ -x "$FSX_BIN" ] || die "FSX_BIN=$FSX_BIN is not executable"
	cp "$FSX_BIN" "$FSX"
	echo "prebuilt $FSX_BIN" >"$WORK/results/xfstests.commit"
else
	if [ -n "${XFSTESTS_SRC:-}" ]; then url=$XFSTESTS_SRC
	elif [ -d /work/.mirror/kdave+xfstests/repo ]; then url=/work/.mirror/kdave+xfstests/repo
	else url=https://github.com/kdave/xfstests; fi
	log "building fsx from $url"
	clone "$url" "$WORK/xfstests"
	cp "$WORK/xfstests.commit" "$WORK/results/xfstests.commit"
	# fsx.c includes src/global.h, which includes the <config.h> that
	# xfstests' configure writes; this one names the standard headers
	# global.h may include. No libaio (-DAIO), no liburing (-DURING), no
	# xfsprogs headers: fsx then has no AIO/io_uring modes and no clone,
	# dedupe or exchange range.
	mkdir -p "$WORK/fsx-cfg"
	cat >"$WORK/fsx-cfg/config.h" <<'CFG'
#define HAVE_SYS_TYPES_H 1
#define HAVE_SYS_STAT_H 1
#define HAVE_SYS_TIME_H 1
#define HAVE_SYS_IOCTL_H 1
#define HAVE_SYS_PARAM_H 1
#define HAVE_SYS_MMAN_H 1
#define HAVE_SYS_FCNTL_H 1
#define HAVE_UNISTD_H 1
#define HAVE_STDLIB_H 1
#define HAVE_STRING_H 1
#define HAVE_STRINGS_H 1
#define HAVE_ERRNO_H 1
#define HAVE_LIBGEN_H 1
#define HAVE_ASSERT_H 1
#define STDC_HEADERS 1
#include <getopt.h>
CFG
	# The flags of xfstests' own build (include/builddefs.in: PCFLAGS,
	# GCCFLAGS), plus the features configure would find on Linux:
	# <err.h>, <linux/falloc.h> (fallocate modes) and copy_file_range.
	timeout "$BUILD_TIMEOUT" gcc -O2 -std=gnu11 -funsigned-char -fno-strict-aliasing \
		-D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 \
		-DHAVE_ERR_H -DHAVE_LINUX_FALLOC_H -DHAVE_COPY_FILE_RANGE \
		-I"$WORK/fsx-cfg" -I"$WORK/xfstests/src" \
		-o "$FSX" "$WORK/xfstests/ltp/fsx.c" >"$WORK/results/fsx-build.log" 2>&1 ||
		{ tail -30 "$WORK/results/fsx-build.log" >&2; die "fsx did not build"; }
fi

# ------------------------------------------------------------------ ext4
EXT4_MNT=$WORK/ext4
mkdir -p "$EXT4_MNT"
truncate -s 2G "$WORK/ext4.img"
if mkfs.ext4 -q -F "$WORK/ext4.img" && mount -o loop "$WORK/ext4.img" "$EXT4_MNT"; then
	EXT4_DIR=$EXT4_MNT
	log "ext4 baseline: loop-mounted image on $EXT4_MNT"
else
	EXT4_MNT=
	[ "$(stat -f -c %T "$WORK")" = ext2/ext3 ] || die "no loop mount, and $WORK is not on ext4: no baseline"
	EXT4_DIR=$WORK/ext4dir
	mkdir -p "$EXT4_DIR"
	log "ext4 baseline: no loop mount; using $EXT4_DIR ($WORK is on ext4)"
fi

# ---------------------------------------------------------------- cluster
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
if [ -z "${CAIRN_PORT:-}" ]; then
	CAIRN_PORT=20000
	while ! { port_free "$CAIRN_PORT" && port_free $((CAIRN_PORT + 1)) && port_free $((CAIRN_PORT + 2)); }; do
		CAIRN_PORT=$((CAIRN_PORT + 10))
		[ "$CAIRN_PORT" -lt 30000 ] || die "no three free ports from 20000 to 30000"
	done
fi
log "starting: $CAIRN_BIN dev --data $WORK/data --port $CAIRN_PORT --mount web${MOUNT_OPTS:+:$MOUNT_OPTS} ${DEV_ARGS:-}"
# shellcheck disable=SC2086 # DEV_ARGS is a list of flags
"$CAIRN_BIN" dev --data "$WORK/data" --port "$CAIRN_PORT" --mount "web${MOUNT_OPTS:+:$MOUNT_OPTS}" ${DEV_ARGS:-} >"$WORK/cluster.log" 2>&1 &
CLUSTER_PID=$!
MNT=$WORK/data/mnt/node2/web
for _ in $(seq $((MOUNT_TIMEOUT * 2))); do
	kill -0 "$CLUSTER_PID" 2>/dev/null || { tail -30 "$WORK/cluster.log" >&2; die "cairn dev exited"; }
	if mountpoint -q "$MNT" 2>/dev/null && [ "$(findmnt -n -o FSTYPE "$MNT")" = fuse.cairn ]; then break; fi
	sleep 0.5
done
[ "$(findmnt -n -o FSTYPE "$MNT" 2>/dev/null)" = fuse.cairn ] ||
	{ tail -30 "$WORK/cluster.log" >&2; die "node 2's mount $MNT did not appear in ${MOUNT_TIMEOUT}s"; }
log "node 2's mount is up: $MNT"

# -------------------------------------------------------------- pjdfstest
export PJD_TESTS=$PJD/tests PJD_FILE_TIMEOUT
dirs=()
for d in $PJD_DIRS; do
	if [ -d "$PJD/tests/$d" ]; then dirs+=("$d"); else log "pjdfstest has no tests/$d: skipped"; fi
done
run_pjd() { # target directory-on-the-fs
	local target=$1 base=$2 d rc
	local dir=$base/pjdfstest.$$
	mkdir -p "$dir" "$WORK/results/tap-$target"
	export PJD_TAP=$WORK/results/tap-$target PJD_LOG=$WORK/results/calls-$target.log
	: >"$PJD_LOG"
	for d in "${dirs[@]}"; do
		log "pjdfstest $d on $target ($dir)"
		rc=0
		(cd "$dir" && export ntest=0 &&
			exec timeout -k 30 "$PJD_DIR_TIMEOUT" prove -r -v --exec "$PJD/run-t" "$PJD/tests/$d") \
			>"$WORK/results/prove-$target-$d.log" 2>&1 &
		STAGE_PID=$!
		wait "$STAGE_PID" || rc=$?
		STAGE_PID=
		[ $rc = 124 ] && log "prove -r $d on $target: timed out after ${PJD_DIR_TIMEOUT}s"
		tail -1 "$WORK/results/prove-$target-$d.log" >&2
	done
	rm -rf "$dir" || log "could not remove $dir"
}
run_pjd ext4 "$EXT4_DIR"
run_pjd cairn "$MNT"

# -------------------------------------------------------------------- fsx
run_fsx() { # target directory seed
	local target=$1 dir=$2/fsx.$$ seed=$3 rc=0
	mkdir -p "$dir" "$WORK/results/fsx-$target"
	log "fsx -N $FSX_OPS -S $seed ${FSX_OPTS[*]} on $target"
	(cd "$dir" && exec timeout -k 30 "$FSX_TIMEOUT" "$FSX" -N "$FSX_OPS" -S "$seed" "${FSX_OPTS[@]}" \
		-P "$WORK/results/fsx-$target" "$dir/fsx.file") >"$WORK/results/fsx-$target.log" 2>&1 &
	STAGE_PID=$!
	wait "$STAGE_PID" || rc=$?
	STAGE_PID=
	echo "$rc" >"$WORK/results/fsx-$target.rc"
	rm -rf "$dir" || log "could not remove $dir"
	tail -3 "$WORK/results/fsx-$target.log" >&2
}
run_fsx cairn "$MNT" "$FSX_SEED"
seed=$(sed -n 's/^Seed set to \([0-9-]*\).*/\1/p' "$WORK/results/fsx-cairn.log" | head -1)
run_fsx ext4 "$EXT4_DIR" "${seed:-$FSX_SEED}"

# ---------------------------------------------------------------- summary
rc=0
perl - "$WORK/results" "$PJD/tests" "${dirs[@]}" >"$WORK/results/summary.txt" <<'PERL' || rc=$?
use strict; use warnings;
my ($res, $tests, @dirs) = @ARGV;
my @targets = ('ext4', 'cairn');
my $exit = 0;

# calls-<target>.log: test file, assertion number, arguments
my %calls;
for my $t (@targets) {
	open(my $f, '<', "$res/calls-$t.log") or next;
	while (<$f>) {
		chomp; my ($file, $n, $args) = split /\t/, $_, 3;
		next unless defined $args;
		$file =~ s{^.*/tests/}{};
		push @{$calls{$t}{$file}{$n}}, $args;
	}
}
sub ranges { my @n = sort { $a <=> $b } @_; my @r;
	while (@n) { my $s = shift @n; my $e = $s; $e = shift @n while @n && $n[0] == $e + 1; push @r, $s == $e ? $s : "$s-$e" }
	join(',', @r) }
sub short { my $t = shift; $t =~ s{([^\s']{61,})}{'<' . length($1) . '-byte path>'}ge; $t } # pjdfstest's long names and paths
# one .t file's result on a target
sub result {
	my ($t, $file) = @_;
	local $_; # the caller's $_ is an alias of @targets
	(my $base = $file) =~ s{/}{_}g;
	my %r = (status => 'NORUN', fail => [], failed => {}, text => {}, note => '', abnormal => 1, plan => -1);
	open(my $f, '<', "$res/tap-$t/$base.tap") or return \%r;
	my ($plan, %seen);
	while (<$f>) {
		chomp;
		if (/^1\.\.(\d+)/) { $plan = $1 }
		elsif (/^(not )?ok (\d+)(.*)$/) {
			$seen{$2} = 1;
			next unless $1 && $3 !~ /#\s*TODO/i;
			push @{$r{fail}}, $2; $r{failed}{$2} = 1; ($r{text}{$2} = $3) =~ s/^\s*-\s*//;
		}
		elsif (/^Bail out!/) { $r{note} .= ' bailed out;' }
	}
	my $rc = '';
	if (open(my $g, '<', "$res/tap-$t/$base.rc")) { $rc = <$g> // ''; chomp $rc }
	my @missing = defined $plan ? grep { !$seen{$_} } 1 .. $plan : ();
	$r{note} .= ' no plan;' unless defined $plan;
	$r{note} .= ' timed out;' if $rc eq '124' || $rc eq '137';
	$r{note} .= " exit $rc;" if $rc ne '' && $rc ne '0' && $rc ne '124' && $rc ne '137';
	$r{note} .= ' not run: ' . ranges(@missing) . ';' if @missing;
	$r{abnormal} = $r{note} ne '';
	$r{status} = (!@{$r{fail}} && !$r{abnormal}) ? 'PASS' : 'FAIL';
	$r{plan} = $plan // -1;
	return \%r;
}
my @files;
for my $d (@dirs) {
	opendir(my $dh, "$tests/$d") or next;
	push @files, map { "$d/$_" } sort grep { /\.t$/ } readdir $dh;
}
my (@details, %count);
my $fmt = "%-21s %-5s %-5s %-10s %s\n";
printf $fmt, 'pjdfstest file', 'ext4', 'cairn', 'verdict', 'cairn: failing assertions';
for my $file (@files) {
	my ($e, $c) = map { result($_, $file) } @targets;
	for my $n (@{$c->{fail}}) {
		my $text = $c->{text}{$n};
		# a test_check assertion prints no call: show the calls made for it
		$text = 'test_check after: ' . join(' ; ', map { "#$_: " . join(' ; ', @{$calls{cairn}{$file}{$_} // []}) } grep { $_ > 0 } $n - 1, $n) if $text eq '';
		push @details, sprintf("%s #%d%s: %s", $file, $n, $e->{failed}{$n} ? ' [fails on ext4 too]' : '', short($text));
	}
	push @details, "$file: ended abnormally:$c->{note}" if $c->{abnormal};
	my $verdict;
	if ($e->{status} ne 'PASS') { $verdict = $c->{status} eq 'PASS' ? 'ok' : 'ext4-fails' }
	elsif ($c->{status} ne 'PASS') { $verdict = 'REGRESSION'; $exit = 1 }
	else { $verdict = 'ok' }
	$count{$verdict}++;
	my @what;
	push @what, ranges(@{$c->{fail}}) if @{$c->{fail}};
	# rename/22.t runs only on ext4, UFS and ZFS (require rename_ctime)
	push @what, "plan $c->{plan} (ext4: $e->{plan})" if $c->{plan} != $e->{plan};
	push @what, "cairn:$c->{note}" if $c->{abnormal};
	push @what, "ext4:$e->{note}" if $e->{abnormal};
	printf $fmt, $file, $e->{status}, $c->{status}, $verdict, join('; ', @what);
}
print "\n", join(', ', map { "$_: $count{$_}" } sort keys %count), " (of ", scalar(@files), " files)\n";
print "\nCairn's failing assertions:\n", map { "  $_\n" } @details if @details;
exit $exit;
PERL
for t in cairn ext4; do
	frc=$(cat "$WORK/results/fsx-$t.rc")
	if [ "$frc" = 0 ] && grep -q 'operations completed A-OK' "$WORK/results/fsx-$t.log"; then
		res="PASS: $(grep -o 'All [0-9]* operations completed A-OK!' "$WORK/results/fsx-$t.log")"
	else
		res="FAIL (exit $frc): $(grep -m1 -iE 'mismatch|error|fail|bad|short' "$WORK/results/fsx-$t.log" || tail -1 "$WORK/results/fsx-$t.log")"
		[ "$t" = cairn ] && rc=1
	fi
	printf '\nfsx on %-5s (-N %s -S %s %s, seed %s): %s\n' "$t" "$FSX_OPS" "$( [ $t = cairn ] && echo "$FSX_SEED" || echo "${seed:-$FSX_SEED}")" \
		"${FSX_OPTS[*]}" "$(sed -n 's/^Seed set to \([0-9-]*\).*/\1/p' "$WORK/results/fsx-$t.log" | head -1)" "$res" >>"$WORK/results/summary.txt"
done
{
	echo
	echo "pjdfstest: $(cat "$WORK/results/pjdfstest.commit")"
	echo "xfstests:  $(cat "$WORK/results/xfstests.commit")"
	echo "cairn:     $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?') ($CAIRN_BIN)"
	echo "kernel:    $(uname -r)"
	[ $rc = 0 ] && echo "RESULT: PASS" || echo "RESULT: FAIL"
} >>"$WORK/results/summary.txt"
cat "$WORK/results/summary.txt"
exit "$rc"
