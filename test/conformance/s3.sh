#!/usr/bin/env bash
# S3 conformance of Cairn: the curated ceph/s3-tests list
# (../shared/s3-tests/public.txt) against a local 3-node cluster of
# bin/cairn. Not part of `make test` (it needs the suite and its Python
# requirements, about 2 minutes); results and analysis: docs/conformance.md.
#
#   make build && test/conformance/s3.sh
#
# What it does:
#   1. obtains ceph/s3-tests at run time (S3TESTS_SRC, a git URL or a
#      path: default the mirror /work/.mirror/ceph+s3-tests/repo when
#      present, else https://github.com/ceph/s3-tests) at S3TESTS_COMMIT
#      into a temporary directory, and its requirements into a venv there;
#      nothing is vendored. S3TESTS_DIR and S3TESTS_VENV skip that.
#   2. starts a 3-node cluster on loopback (ports from BASE_PORT, 29001 by
#      default), makes the three users the suite needs as access keys that
#      may create buckets (`cairn key create NAME --allow admin`), named as
#      the runner's config names them (display names), and runs
#      ../shared/s3-tests/run.sh with their ids and secrets.
#   3. prints pytest's summary and the failed tests; stops the cluster and
#      removes the temporary directory (KEEP=1 keeps it).
#
# Environment: S3TESTS_SRC, S3TESTS_COMMIT (default
# 8f0ae7b404a3a2fcf7038bf1e6bf29544fe9b6a3), S3TESTS_DIR, S3TESTS_VENV,
# S3TESTS_LIST (default ../shared/s3-tests/public.txt), RUNNER (default
# ../shared/s3-tests/run.sh), CAIRN_BIN (default bin/cairn), BASE_PORT, KEEP.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
shared=$(cd "$repo/../shared/s3-tests" 2>/dev/null && pwd || echo "")
CAIRN_BIN=${CAIRN_BIN:-$repo/bin/cairn}
S3TESTS_COMMIT=${S3TESTS_COMMIT:-8f0ae7b404a3a2fcf7038bf1e6bf29544fe9b6a3}
S3TESTS_LIST=${S3TESTS_LIST:-$shared/public.txt}
RUNNER=${RUNNER:-$shared/run.sh}
BASE_PORT=${BASE_PORT:-29001}
[ -x "$CAIRN_BIN" ] || { echo "s3.sh: no $CAIRN_BIN (make build)" >&2; exit 2; }
[ -f "$RUNNER" ] && [ -f "$S3TESTS_LIST" ] || { echo "s3.sh: no runner or list (RUNNER, S3TESTS_LIST)" >&2; exit 2; }

work=$(mktemp -d /tmp/cairn-s3conf.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	[ "${KEEP:-0}" = 1 ] && echo "s3.sh: kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT

if [ -z "${S3TESTS_DIR:-}" ]; then
	src=${S3TESTS_SRC:-}
	if [ -z "$src" ]; then
		src=https://github.com/ceph/s3-tests
		[ -d /work/.mirror/ceph+s3-tests/repo ] && src=/work/.mirror/ceph+s3-tests/repo
	fi
	mkdir -p "$work/s3-tests"
	if [ -d "$src" ] && git --git-dir="$src" rev-parse --verify -q "$S3TESTS_COMMIT^{commit}" >/dev/null; then
		git --git-dir="$src" archive "$S3TESTS_COMMIT" | tar -x -C "$work/s3-tests"
	else
		git clone -q "$src" "$work/s3-tests.git" && git -C "$work/s3-tests.git" archive "$S3TESTS_COMMIT" | tar -x -C "$work/s3-tests"
	fi
	S3TESTS_DIR=$work/s3-tests
fi
if [ -z "${S3TESTS_VENV:-}" ]; then
	python3 -m venv "$work/venv"
	"$work/venv/bin/pip" install -q --disable-pip-version-check -r "$S3TESTS_DIR/requirements.txt"
	S3TESTS_VENV=$work/venv
fi

export CAIRN_ADMIN_KEY=s3conf-admin-key-0123456789 CAIRN_CLUSTER_SECRET=s3conf-cluster-secret-0123456789abcdef
for i in 0 1 2; do
	port=$((BASE_PORT + i))
	args=(server --data "$work/data/n$i" --listen "127.0.0.1:$port" --gossip-listen "127.0.0.1:$((port + 100))")
	[ "$i" -gt 0 ] && args+=(--join "http://127.0.0.1:$BASE_PORT")
	"$CAIRN_BIN" "${args[@]}" >"$work/n$i.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 1 300); do
		curl -fs "http://127.0.0.1:$port/_cairn/health" >/dev/null 2>&1 && break
		sleep 0.1
	done
done
export CAIRN_SERVER=http://127.0.0.1:$BASE_PORT
# The users of the runner's config, named with its display names.
key() {
	for _ in $(seq 1 100); do
		if out=$("$CAIRN_BIN" key create "$1" --allow admin --env 2>/dev/null); then
			sed -n 's/^export CAIRN_ACCESS_KEY_ID=\([^ ]*\) CAIRN_SECRET_ACCESS_KEY=\(.*\)$/\1 \2/p' <<<"$out"
			return
		fi
		sleep 0.2
	done
	echo "s3.sh: cannot create key $1" >&2
	exit 1
}
read -r MAIN_AK MAIN_SK < <(key "M. Tester")
read -r ALT_AK ALT_SK < <(key "john.doe")
read -r TENANT_AK TENANT_SK < <(key 'testx$tenanteduser')
export MAIN_AK MAIN_SK ALT_AK ALT_SK TENANT_AK TENANT_SK
export MAIN_UID=$MAIN_AK ALT_UID=$ALT_AK TENANT_UID=$TENANT_AK
export S3TESTS_DIR S3TESTS_VENV S3TESTS_LIST S3_HOST=127.0.0.1 S3_PORT=$BASE_PORT
export S3TESTS_OUT=${S3TESTS_OUT:-$work/result}
bash "$RUNNER" || true
log=$S3TESTS_OUT.log
tail -n 1 "$log"
grep -E '^FAILED' "$log" | sed 's/ - .*//' || true
