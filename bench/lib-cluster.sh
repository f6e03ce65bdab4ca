# shellcheck shell=bash
# bench/lib-cluster.sh: a 3-node Cairn cluster on loopback, for the
# benchmark scripts (cluster.sh, download.sh); sourced after lib.sh. The
# caller sets OUT (logs), CAIRN_BIN (resolve_cairn_bin), CLUSTER_SECRET,
# SERVER_ARGS (extra flags, word-split) and PROFILE (0: no --debug-listen).

# A stopped node would ignore SIGTERM: continue every node before lib.sh's
# cleanup stops them (TERM, then KILL after 10 s).
cluster_cleanup() {
	local rc=$? p
	set +e
	for p in "${BENCH_PIDS[@]}"; do kill -CONT "$p" 2>/dev/null; done
	(exit "$rc") # bench_cleanup exits with $?
	bench_cleanup
}
declare -a NODE_URL NODE_PID NODE_LOG NODE_ID NODE_DEBUG
CLUSTER_N=0

# cluster_start NAME: start a fresh 3-node cluster; sets NODE_URL[1..3],
# NODE_PID[1..3], NODE_LOG[1..3], CL_DIR. Returns once three voters exist.
cluster_start() {
	local name=$1 i port join
	CLUSTER_N=$((CLUSTER_N + 1))
	scratch_dir CL_DIR "cluster-$name"
	for i in 1 2 3; do
		port=$(pick_port)
		NODE_URL[i]=http://127.0.0.1:$port
		NODE_LOG[i]=$OUT/$name-$CLUSTER_N-n$i.log
		join=()
		[ "$i" -eq 1 ] || join=(--join "${NODE_URL[1]}")
		NODE_DEBUG[i]=""
		# CL_MOUNT_MODES (bench/cluster.sh, part prop): node 1 mounts bucket
		# CL_MOUNT_BUCKET once per mode, on CL_DIR/mnt-MODE.
		if [ "$i" -eq 1 ] && [ -n "${CL_MOUNT_MODES:-}" ]; then
			local mode
			for mode in $CL_MOUNT_MODES; do
				mkdir -p "$CL_DIR/mnt-$mode"
				join+=(--mount "$CL_MOUNT_BUCKET:$CL_DIR/mnt-$mode:$mode")
			done
		fi
		if [ "$PROFILE" -gt 0 ]; then
			NODE_DEBUG[i]=127.0.0.1:$(pick_port)
			join+=(--debug-listen "${NODE_DEBUG[i]}")
		fi
		# shellcheck disable=SC2086 # SERVER_ARGS: words
		CAIRN_CLUSTER_SECRET=$CLUSTER_SECRET "$CAIRN_BIN" server --data "$CL_DIR/n$i" \
			--listen "127.0.0.1:$port" "${join[@]}" $SERVER_ARGS >"${NODE_LOG[i]}" 2>&1 &
		NODE_PID[i]=$!
		BENCH_PIDS+=("${NODE_PID[i]}")
		wait_http "${NODE_URL[i]}/_cairn/health" "${NODE_PID[i]}" 60 "${NODE_LOG[i]}"
	done
	local deadline=$((SECONDS + 60))
	until grep -qE 'voters="\[[0-9]+ [0-9]+ [0-9]+\]"' "${NODE_LOG[@]}"; do
		[ $SECONDS -lt $deadline ] || die "cluster $name: no 3 voters after 60 s (logs ${NODE_LOG[*]})"
		sleep 0.2
	done
	for i in 1 2 3; do
		NODE_ID[i]=$(grep -m1 -o 'msg="cluster node" id=[0-9]*' "${NODE_LOG[i]}" | sed 's/.*id=//')
	done
	log "cluster $name: nodes ${NODE_URL[*]} (pids ${NODE_PID[*]}), 3 voters, leader $(leader_node)"
}

# client_start: start node 4 as a client node (cairn server --role client:
# stores no blob, never votes) joining node 1, with a disk cache of
# CLIENT_CACHE bytes; sets NODE_URL[4], NODE_PID[4], NODE_LOG[4]. Returns
# once it serves and has caught up with node 1's bucket list.
client_start() {
	local port
	port=$(pick_port)
	NODE_URL[4]=http://127.0.0.1:$port
	NODE_LOG[4]=$OUT/client-$CLUSTER_N-n4.log
	local debug=()
	NODE_DEBUG[4]=""
	if [ "${PROFILE:-0}" -gt 0 ]; then
		NODE_DEBUG[4]=127.0.0.1:$(pick_port)
		debug=(--debug-listen "${NODE_DEBUG[4]}")
	fi
	# shellcheck disable=SC2086 # SERVER_ARGS: words
	CAIRN_CLUSTER_SECRET=$CLUSTER_SECRET "$CAIRN_BIN" server --data "$CL_DIR/n4" --role client \
		--cache-size "${CLIENT_CACHE:-1073741824}" --listen "127.0.0.1:$port" --join "${NODE_URL[1]}" "${debug[@]}" $SERVER_ARGS >"${NODE_LOG[4]}" 2>&1 &
	NODE_PID[4]=$!
	BENCH_PIDS+=("${NODE_PID[4]}")
	wait_http "${NODE_URL[4]}/_cairn/health" "${NODE_PID[4]}" 60 "${NODE_LOG[4]}"
	log "client node 4: ${NODE_URL[4]} (pid ${NODE_PID[4]})"
}

cluster_stop() {
	local i
	for i in 1 2 3 4; do
		[ -n "${NODE_PID[i]:-}" ] || continue
		kill -CONT "${NODE_PID[i]}" 2>/dev/null || true
		stop_pid "${NODE_PID[i]}"
	done
	unset 'NODE_PID[4]' 'NODE_URL[4]'
	[ "${KEEP:-0}" = 1 ] || rm -rf -- "$CL_DIR"
}

# ccli NODE CMD...: the cairn CLI against node NODE.
ccli() {
	local i=$1
	shift
	CAIRN_SERVER=${NODE_URL[i]} "$CAIRN_BIN" "$@"
}

# bucket_create NAME R [FLAGS...]: create a public bucket with R replicas
# (and the bucket create FLAGS) through node 1,
# retrying for at most 60 s (until the cluster takes writes), then wait until
# every node knows it.
bucket_create() {
	local name=$1 r=$2 deadline=$((SECONDS + 60)) i
	shift 2
	until ccli 1 bucket create "$name" --public --replicas "$r" "$@" >>"$OUT/cli.log" 2>&1; do
		if tail -n 1 "$OUT/cli.log" | grep -qi 'exists'; then break; fi
		if tail -n 1 "$OUT/cli.log" | grep -q '400 Bad Request'; then die "bucket create $name: $(tail -n 1 "$OUT/cli.log")"; fi
		[ $SECONDS -lt $deadline ] || die "bucket create $name failed for 60 s (see $OUT/cli.log)"
		sleep 0.2
	done
	for i in 1 2 3; do
		deadline=$((SECONDS + 30))
		until [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "${NODE_URL[i]}/$name/")" = 200 ]; do
			[ $SECONDS -lt $deadline ] || die "bucket $name not visible on node $i after 30 s"
			sleep 0.05
		done
	done
}

# leader_node: the node number (1-3) the nodes' logs name as Raft leader,
# from each live node's last "raft leader changed" line ("?" if unknown).
leader_node() {
	local i lid=""
	lid=$(cat "${NODE_LOG[@]}" | grep 'msg="raft leader changed"' | sort | tail -n1 |
		sed -n 's/.* leader=\([0-9]*\).*/\1/p')
	for i in 1 2 3; do
		[ -n "$lid" ] && [ "${NODE_ID[i]}" = "$lid" ] && { echo "$i"; return; }
	done
	echo "?"
}

