#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# bench/nginx.sh: serve a directory with nginx (bench/nginx.conf.tmpl) on
# 127.0.0.1, in the foreground, until Ctrl-C or TIMEOUT seconds (default 3600).
#
#   bench/nginx.sh DIR [PORT]
#
# The same function (nginx_start in bench/lib.sh) starts the baseline in
# bench/read.sh; this wrapper is for trying the configuration by hand.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ $# -ge 1 ] || die "usage: bench/nginx.sh DIR [PORT]"
need_tools nginx:nginx curl:curl
bench_traps
port=${2:-$(pick_port)}
port_free "$port" || die "port $port is in use"
nginx_start "$1" "$port"
log "serving $1 at http://127.0.0.1:$port/ (config $NGINX_RUN/nginx.conf); Ctrl-C to stop"
deadline=$((SECONDS + ${TIMEOUT:-3600}))
while [ $SECONDS -lt $deadline ] && kill -0 "$NGINX_PID" 2>/dev/null; do
	sleep 1
done
