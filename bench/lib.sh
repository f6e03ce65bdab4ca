# shellcheck shell=bash
# bench/lib.sh: shared functions for bench/read.sh, bench/ingest.sh and
# bench/nginx.sh. Source it; it defines functions and a few variables only.
#
# Every server it starts listens on 127.0.0.1 only, is recorded in
# BENCH_PIDS and is stopped by bench_cleanup (install it with
# `trap bench_cleanup EXIT`). Every wait is bounded.

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$BENCH_DIR/.." && pwd)
DATA_DIR=${BENCH_DATA:-$BENCH_DIR/.data}
CORPUS_DIR=$DATA_DIR/corpus
SEED=${SEED:-1}
SCALE=${SCALE:-1}
CAIRN_ADMIN_KEY=${CAIRN_ADMIN_KEY:-cairn-bench-admin-key-0000000000} # >= 16 bytes
export CAIRN_ADMIN_KEY

BENCH_PIDS=()      # servers to stop on exit
BENCH_TMPDIRS=()   # scratch directories to remove on exit (unless KEEP=1)

log()  { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die()  { printf '[%s] FATAL: %s\n' "$(date +%H:%M:%S)" "$*" >&2; exit 1; }

# have CMD: is CMD on PATH (or in /usr/sbin, where Debian puts nginx)?
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }

_apt_updated=0
# apt_install PKG...: install Debian packages; runs apt-get update once if
# the first attempt fails.
apt_install() {
	have apt-get || die "need $* but apt-get is not available; install them by hand"
	local sudo=
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	log "installing $* with apt-get"
	if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "$@" >&2; then
		if [ "$_apt_updated" -eq 0 ]; then
			_apt_updated=1
			DEBIAN_FRONTEND=noninteractive $sudo apt-get update -q >&2 || die "apt-get update failed"
			DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "$@" >&2 || die "apt-get install $* failed"
		else
			die "apt-get install $* failed"
		fi
	fi
}

# need_tools CMD:PKG...: install the package of every missing command.
need_tools() {
	local pkgs=() spec
	for spec in "$@"; do
		have "${spec%%:*}" || pkgs+=("${spec#*:}")
	done
	[ ${#pkgs[@]} -eq 0 ] || apt_install "${pkgs[@]}"
	for spec in "$@"; do
		have "${spec%%:*}" || die "${spec%%:*} still missing after installing ${spec#*:}"
	done
}

nginx_bin() { command -v nginx 2>/dev/null || echo /usr/sbin/nginx; }

# port_free PORT: nothing listens on 127.0.0.1:PORT (or any address).
port_free() {
	! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# pick_port: print a free TCP port in 20000-31999, below Linux's ephemeral
# range (32768-60999), so that no outgoing connection (of this run or of
# tests running beside it) takes it before the server binds it.
pick_port() {
	local p
	for _ in $(seq 1 100); do
		p=$((20000 + RANDOM % 12000))
		if port_free "$p" && ! ss -Htan "sport = :$p" 2>/dev/null | grep -q .; then
			echo "$p"
			return 0
		fi
	done
	die "no free port found after 100 tries"
}

# wait_http URL PID TIMEOUT_S [LOG] [any]: poll URL until it answers 2xx (or
# any HTTP status with "any"), at most TIMEOUT_S seconds; fail at once if
# process PID dies (printing LOG's tail).
wait_http() {
	local url=$1 pid=$2 timeout=$3 logf=${4:-} anyst=${5:-} deadline=$((SECONDS + $3)) code
	while [ $SECONDS -lt $deadline ]; do
		if ! kill -0 "$pid" 2>/dev/null; then
			[ -n "$logf" ] && [ -f "$logf" ] && tail -n 30 "$logf" >&2
			die "process $pid exited before $url answered"
		fi
		code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 2 "$url" 2>/dev/null || true)
		case "$code" in
		2??) return 0 ;;
		[1-5]??) [ "$anyst" = any ] && return 0 ;;
		esac
		sleep 0.2
	done
	[ -n "$logf" ] && [ -f "$logf" ] && tail -n 30 "$logf" >&2
	die "$url did not answer within ${timeout}s"
}

# stop_pid PID: TERM, wait up to 10 s, then KILL. Only the given PID.
stop_pid() {
	local pid=$1
	kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 1 50); do
		kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
		sleep 0.2
	done
	log "process $pid ignored SIGTERM for 10 s; sending SIGKILL"
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

bench_cleanup() {
	local rc=$? pid d
	trap - EXIT INT TERM
	for pid in "${BENCH_PIDS[@]}"; do
		stop_pid "$pid"
	done
	if [ "${KEEP:-0}" != 1 ]; then
		for d in "${BENCH_TMPDIRS[@]}"; do
			[ -n "$d" ] && rm -rf -- "$d"
		done
	fi
	exit "$rc"
}

# bench_traps: stop servers and remove scratch directories on any exit.
bench_traps() {
	trap bench_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

# scratch_dir VAR NAME: make a new directory under $DATA_DIR/run, removed on
# exit, and store its path in VAR. (Not a $(...) call: the subshell would lose
# the cleanup record.)
scratch_dir() {
	mkdir -p "$DATA_DIR/run"
	local d
	d=$(mktemp -d "$DATA_DIR/run/$2.XXXXXX") || die "mktemp failed"
	BENCH_TMPDIRS+=("$d")
	printf -v "$1" '%s' "$d"
}

# ensure_corpus PROFILE: generate $CORPUS_DIR/PROFILE unless complete
# (paths.txt present and made with the same seed and scale).
ensure_corpus() {
	local profile=$1 dir=$CORPUS_DIR/$1 stamp
	stamp="seed=$SEED scale=$SCALE"
	if [ -f "$dir/paths.txt" ] && [ "$(cat "$dir.stamp" 2>/dev/null)" = "$stamp" ]; then
		return 0
	fi
	log "generating corpus $profile ($stamp) in $dir"
	rm -rf -- "$dir" "$dir.stamp"
	mkdir -p "$CORPUS_DIR"
	(cd "$REPO_DIR" && go run ./bench/corpus -profile "$profile" -seed "$SEED" -scale "$SCALE" -out "$dir") ||
		die "corpus generation failed"
	echo "$stamp" >"$dir.stamp"
}

# nginx_start ROOT PORT: run nginx (not daemonized) serving ROOT on
# 127.0.0.1:PORT; sets NGINX_PID and NGINX_RUN. Waits until it answers.
nginx_start() {
	local root port=$2 run user_line="" ofc="" mime=/etc/nginx/mime.types
	root=$(cd "$1" && pwd) || die "no such directory: $1"
	scratch_dir run nginx
	mkdir -p "$run"/{client_body,proxy,fastcgi,uwsgi,scgi}
	if [ "$(id -u)" -eq 0 ]; then
		user_line="user $(id -un) $(id -gn);"
	fi
	[ "${NGINX_OPEN_FILE_CACHE:-0}" = 1 ] &&
		ofc='open_file_cache max=100000 inactive=60s; open_file_cache_valid 60s;'
	if [ ! -f "$mime" ]; then
		# Minimal fallback so the config loads without the Debian file.
		mime=$run/mime.types
		printf 'types { text/html html; text/css css; application/javascript js; image/png png; image/jpeg jpg; image/gif gif; text/plain txt; application/json json; }\n' >"$mime"
	fi
	local ssl="" ssl_lines="" scheme=http
	if [ -n "${NGINX_TLS_CERT:-}" ]; then
		ssl=ssl scheme=https
		ssl_lines="ssl_certificate $NGINX_TLS_CERT; ssl_certificate_key $NGINX_TLS_KEY; ssl_protocols TLSv1.2 TLSv1.3; ssl_session_cache shared:SSL:10m;"
	fi
	sed -e "s|@ROOT@|$root|g" -e "s|@PORT@|$port|g" -e "s|@RUN@|$run|g" \
		-e "s|@SSL@|$ssl|g" -e "s|@SSL_LINES@|$ssl_lines|g" \
		-e "s|@USER_LINE@|$user_line|g" -e "s|@OPEN_FILE_CACHE@|$ofc|g" \
		-e "s|@MIME_TYPES@|$mime|g" \
		"$BENCH_DIR/nginx.conf.tmpl" >"$run/nginx.conf"
	"$(nginx_bin)" -t -q -p "$run" -e "$run/error.log" -c "$run/nginx.conf" ||
		die "nginx rejected $run/nginx.conf"
	"$(nginx_bin)" -p "$run" -e "$run/error.log" -c "$run/nginx.conf" >"$run/stdout.log" 2>&1 &
	NGINX_PID=$!
	# shellcheck disable=SC2034 # used by the callers
	NGINX_RUN=$run
	BENCH_PIDS+=("$NGINX_PID")
	# Any HTTP answer proves it listens (/ of a directory without index is a 403).
	wait_http "$scheme://127.0.0.1:$port/" "$NGINX_PID" 15 "$run/error.log" any
	log "nginx $NGINX_PID serving $root on 127.0.0.1:$port"
}

# resolve_cairn_bin: set CAIRN_BIN to the cairn binary of this checkout.
# A preset CAIRN_BIN wins; else bin/cairn, (re)built with `make build` when the
# Makefile has that target; else `go build ./cmd/cairn` into $DATA_DIR/bin.
# Call it once, outside a subshell.
resolve_cairn_bin() {
	if [ -n "${CAIRN_BIN:-}" ]; then
		[ -x "$CAIRN_BIN" ] || die "CAIRN_BIN=$CAIRN_BIN is not executable"
		return
	fi
	# Always built (go build is quick when nothing changed): a bin/cairn
	# left from an older checkout must not be what a benchmark measures.
	if [ -f "$REPO_DIR/Makefile" ] && grep -q '^build:' "$REPO_DIR/Makefile"; then
		log "building bin/cairn with make build"
		make -C "$REPO_DIR" build >&2 || die "make build failed"
	fi
	if [ -x "$REPO_DIR/bin/cairn" ]; then
		CAIRN_BIN=$REPO_DIR/bin/cairn
		return
	fi
	log "no bin/cairn and no make build target; go build ./cmd/cairn into $DATA_DIR/bin"
	mkdir -p "$DATA_DIR/bin"
	(cd "$REPO_DIR" && go build -o "$DATA_DIR/bin/cairn" ./cmd/cairn) >&2 || die "go build ./cmd/cairn failed"
	CAIRN_BIN=$DATA_DIR/bin/cairn
}

# cairn_start PORT: start a fresh single Cairn node with an empty data
# directory on 127.0.0.1:PORT; sets CAIRN_PID, CAIRN_DATA, CAIRN_URL.
cairn_start() {
	local port=$1
	[ -n "${CAIRN_BIN:-}" ] || resolve_cairn_bin
	scratch_dir CAIRN_DATA cairn
	CAIRN_URL=${CAIRN_SCHEME:-http}://127.0.0.1:$port
	# shellcheck disable=SC2086 # CAIRN_EXTRA_ARGS is a list of flags
	"$CAIRN_BIN" server --data "$CAIRN_DATA/data" --listen "127.0.0.1:$port" ${CAIRN_EXTRA_ARGS:-} >"$CAIRN_DATA/server.log" 2>&1 &
	CAIRN_PID=$!
	BENCH_PIDS+=("$CAIRN_PID")
	wait_http "$CAIRN_URL/_cairn/health" "$CAIRN_PID" "${CAIRN_START_TIMEOUT:-60}" "$CAIRN_DATA/server.log"
	log "cairn $CAIRN_PID on $CAIRN_URL, data in $CAIRN_DATA/data (log: $CAIRN_DATA/server.log)"
}

# cairn_stop: stop the node started by cairn_start.
cairn_stop() {
	[ -n "${CAIRN_PID:-}" ] && stop_pid "$CAIRN_PID"
	CAIRN_PID=
}

# cairn CMD...: run the cairn CLI against the node started by cairn_start.
cairn() {
	CAIRN_SERVER=$CAIRN_URL "$CAIRN_BIN" "$@"
}

# cairn_load DIR BUCKET: create a public bucket and cairn sync DIR into it.
cairn_load() {
	local dir=$1 bucket=$2
	cairn bucket create "$bucket" --public >&2 || die "cairn bucket create $bucket failed"
	cairn sync "$dir" "$bucket" --no-progress --jobs "${SYNC_JOBS:-16}" >&2 ||
		die "cairn sync $dir $bucket failed"
}

# spot_check BASE_URL ROOT PATHS_FILE N: GET N random paths of PATHS_FILE
# from BASE_URL and compare their SHA-256 with the files under ROOT.
spot_check() {
	local base=$1 root=$2 list=$3 n=$4 p want got bad=0
	while IFS= read -r p; do
		want=$(sha256sum <"$root/$p" | cut -d' ' -f1)
		got=$(curl -fsS --max-time 30 "$base/$p" | sha256sum | cut -d' ' -f1) || got="GET failed"
		if [ "$want" != "$got" ]; then
			log "spot check: $base/$p differs from $root/$p ($got)"
			bad=$((bad + 1))
		fi
	done < <(sample_lines "$n" "$list")
	[ "$bad" -eq 0 ] || die "spot check: $bad of $n files served wrong from $base"
	log "spot check: $n random files from $base match the local copies"
}

# sample_lines N LIST: N lines of file LIST drawn at random (with
# repeats; seeded by SEED, so the same in every run).
sample_lines() {
	awk -v n="$1" -v seed="$SEED" 'BEGIN {srand(seed)} {a[NR] = $0}
		END {for (i = 0; i < n && NR > 0; i++) print a[int(rand() * NR) + 1]}' "$2"
}

# machine_info: a one-paragraph description of this machine for result files.
machine_info() {
	local cpu
	cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')
	printf 'host %s, %s CPUs (%s), %s MB RAM, kernel %s; %s; %s; git %s; load average before the run %s\n' \
		"$(hostname)" "$(nproc)" "${cpu:-unknown CPU}" \
		"$(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo)" "$(uname -r)" \
		"$("$(nginx_bin)" -v 2>&1 | sed 's/.*: //')" \
		"$(wrk -v 2>&1 | head -n1 | awk '{print $1, $2}')" \
		"$(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
		"${BENCH_START_LOAD:-unknown}"
}

# check_quiet: warn when the machine is busy before a benchmark starts (the
# 1-minute load average above 1 on this machine's cores): other processes
# share the cores with the client and the servers and move the ratios by
# tens of percent (bench/README.md, "One method").
check_quiet() {
	local load
	load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo 0)
	BENCH_START_LOAD=$load
	if awk -v l="$load" 'BEGIN { exit !(l > 1.0) }'; then
		log "WARNING: load average $load before the benchmark: other work shares the cores; ratios from this run are not comparable (bench/README.md, \"One method\")"
	fi
}

# shellcheck disable=SC2034 # used by the scripts that source this
CLK_TCK=$(getconf CLK_TCK)
# pid_ticks PID...: CPU clock ticks (utime + stime, CLK_TCK a second) used
# so far by the processes PID... (0 for one that is gone).
pid_ticks() {
	local p t=0
	for p in "$@"; do
		t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
	done
	echo "$t"
}

# cairn_count_at URL BUCKET: the number of files in BUCKET, listed through
# the node at URL (every page of a recursive listing).
cairn_count_at() {
	local url=$1 bucket=$2 after="" page n=0
	for _ in $(seq 1 10000); do
		page=$(curl -fsS -G --max-time 60 -H 'Accept: application/json' \
			-H "Authorization: Bearer $CAIRN_ADMIN_KEY" \
			--data-urlencode recursive=1 --data-urlencode limit=10000 \
			--data-urlencode "after=$after" "$url/$bucket/") || return 1
		n=$((n + $(grep -o '"is_dir":false' <<<"$page" | wc -l)))
		grep -q '"truncated":true' <<<"$page" || { echo "$n"; return 0; }
		after=$(sed -n 's/.*"next_token":"\([^"]*\)".*/\1/p' <<<"$page")
		[ -n "$after" ] || return 1
	done
	return 1
}

