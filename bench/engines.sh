#!/usr/bin/env bash
# Storage engines side by side: MetaStore on its memory engine, MetaStore on
# its RocksDB engine, and the reference etcd 3.6, each loaded with the same
# data set (by default 1,000,000 keys of 64 bytes with 256-byte values).
#
# For each target, one at a time (so that they do not compete for the
# machine): start a single-member server on a fresh data dir; load the keys
# (put req/s); read RSS; run random linearizable Gets (range req/s) and
# read RSS again (caches filled by reads); stop it with SIGTERM and
# measure the data dir; start it again and time how
# long it takes to answer a linearizable read of the last key loaded
# (restart-to-first-read, counted from the exec); read RSS again. Then
# print one table. The client side is bench/engines (a small Go program);
# this script only starts, stops and measures processes.
#
# Environment knobs:
#   TARGETS="memory rocksdb etcd"  which servers to run, in this order
#   KEYS=1000000 KEY_SIZE=64 VAL_SIZE=256   the data set
#   CLIENTS=256 CONNS=16           concurrent requests and gRPC connections
#   RANGE_TOTAL=100000             Gets in the range measurement
#   STEP_TIMEOUT=300               seconds any one step may take
#   METASTORE_FLAGS=""             extra flags for both MetaStore targets
#                                  (e.g. --rocksdb-block-cache-bytes=67108864)
#   KEEP=1                         keep the work directory (logs, data)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGETS="${TARGETS:-memory rocksdb etcd}"
KEYS="${KEYS:-1000000}"
KEY_SIZE="${KEY_SIZE:-64}"
VAL_SIZE="${VAL_SIZE:-256}"
CLIENTS="${CLIENTS:-256}"
CONNS="${CONNS:-16}"
RANGE_TOTAL="${RANGE_TOTAL:-100000}"
STEP_TIMEOUT="${STEP_TIMEOUT:-300}"
METASTORE_FLAGS="${METASTORE_FLAGS:-}"
KEEP="${KEEP:-}"

# Ports are picked per target (pick_ports), and kept for its restart (the
# member's identity derives from its peer URL): other processes on the
# machine, test suites included, take loopback ports too.
client_port=""
peer_port=""
endpoint=""

log() { echo "engines: $*" >&2; }
die() { log "$*"; exit 1; }

declare -A binary=([memory]="$root/bin/metastore" [rocksdb]="$root/bin/metastore" [etcd]="$root/bin/ref/etcd")
declare -A flags=([memory]="--storage-engine=memory $METASTORE_FLAGS" [rocksdb]="--storage-engine=rocksdb $METASTORE_FLAGS" [etcd]="")
for target in $TARGETS; do
	[[ -n "${binary[$target]:-}" ]] || die "unknown target '$target' (want memory, rocksdb and/or etcd)"
	[[ -x "${binary[$target]}" ]] || die "${binary[$target]} missing: run make build tools"
done

work="$(mktemp -d "${TMPDIR:-/tmp}/metastore-engines.XXXXXX")"
server_pid=""
started_at=""
cleanup() {
	if [[ -n "$server_pid" ]]; then
		kill -9 "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	if [[ -n "$KEEP" ]]; then
		log "logs and data kept in $work"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT

loader="$work/engines"
(cd "$root" && go build -o "$loader" ./bench/engines) || die "cannot build the loader (bench/engines)"
client() {
	timeout "$STEP_TIMEOUT" "$loader" "$@" -endpoint="$endpoint" -keys="$KEYS" \
		-key-size="$KEY_SIZE" -value-size="$VAL_SIZE" -clients="$CLIENTS" -conns="$CONNS"
}

# shellcheck source=bench/ports.sh
source "$root/bench/ports.sh"

# pick_ports: free client and peer ports for the next server.
pick_ports() {
	client_port="$(free_ports 2)" || die "no free loopback ports"
	peer_port=$((client_port + 1)) endpoint="127.0.0.1:$client_port"
}

# start_server TARGET: starts it in the background; sets server_pid and
# started_at (Unix nanoseconds just before the exec).
start_server() {
	local target=$1 name="engines-$1" extra=()
	read -r -a extra <<<"${flags[$target]}"
	started_at="$(date +%s%N)"
	"${binary[$target]}" --name="$name" --data-dir="$work/$target.data" \
		--listen-client-urls="http://$endpoint" --advertise-client-urls="http://$endpoint" \
		--listen-peer-urls="http://127.0.0.1:$peer_port" \
		--initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
		--initial-cluster="$name=http://127.0.0.1:$peer_port" --initial-cluster-state=new \
		"${extra[@]}" >>"$work/$target.log" 2>&1 &
	server_pid=$!
}

stop_server() {
	kill -TERM "$server_pid"
	local deadline=$((SECONDS + STEP_TIMEOUT))
	while kill -0 "$server_pid" 2>/dev/null; do
		((SECONDS < deadline)) || die "server did not stop within ${STEP_TIMEOUT}s"
		sleep 0.1
	done
	wait "$server_pid" 2>/dev/null || true
	server_pid=""
}

rss_mib() { awk '/^VmRSS:/ { printf "%.0f", $2 / 1024 }' "/proc/$server_pid/status"; }

# value KEY OUTPUT: the value of KEY=... in the loader's output.
value() { sed -n "s/^$1=//p" <<<"$2"; }

declare -A result=()
for target in $TARGETS; do
	log "$target: start"
	pick_ports
	start_server "$target"
	client first-read -since="$started_at" -expect-key=false >/dev/null || die "$target did not start; log: $work/$target.log"
	log "$target: load $KEYS keys"
	out="$(client load)" || die "$target: load failed; log: $work/$target.log"
	result[$target.put]="$(value put_rps "$out")"
	result[$target.rss_load]="$(rss_mib)"
	log "$target: $RANGE_TOTAL random linearizable gets"
	out="$(client range -total="$RANGE_TOTAL")" || die "$target: range failed; log: $work/$target.log"
	result[$target.range]="$(value range_rps "$out")"
	result[$target.rss_range]="$(rss_mib)"
	log "$target: stop and restart"
	stop_server
	result[$target.disk]="$(du -sm "$work/$target.data" | cut -f1)"
	start_server "$target"
	out="$(client first-read -since="$started_at")" || die "$target: no read after restart; log: $work/$target.log"
	result[$target.first_read]="$(value first_read_ms "$out")"
	result[$target.rss_restart]="$(rss_mib)"
	stop_server
	rm -rf "$work/$target.data"
done

echo
echo "keys=$KEYS key-size=$KEY_SIZE val-size=$VAL_SIZE clients=$CLIENTS conns=$CONNS range-gets=$RANGE_TOTAL"
rows=(
	"put req/s:put"
	"range req/s (linearizable):range"
	"RSS after load (MiB):rss_load"
	"RSS after the gets (MiB):rss_range"
	"data dir (MiB):disk"
	"restart to first read (ms):first_read"
	"RSS after restart (MiB):rss_restart"
)
printf '%-28s' ""
for target in $TARGETS; do
	case "$target" in
	memory | rocksdb) printf '  %18s' "metastore-$target" ;;
	*) printf '  %18s' "$target-3.6" ;;
	esac
done
echo
for row in "${rows[@]}"; do
	printf '%-28s' "${row%%:*}"
	for target in $TARGETS; do
		printf '  %18s' "${result[$target.${row#*:}]:-?}"
	done
	echo
done
