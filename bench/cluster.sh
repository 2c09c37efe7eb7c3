#!/usr/bin/env bash
# Three-member benchmark of MetaStore and the reference etcd 3.6.
#
# For each target in turn, starts a 3-member cluster on loopback (own
# ports, own data dirs under a temporary directory), runs etcd's own
# `benchmark` tool with its clients spread over all three members - put,
# linearizable range, serializable range - then stops the cluster before
# the next target starts, so the two never compete for the CPU. Prints
# req/s and p99 latency per workload next to each other.
#
# Writes sent to followers are forwarded to the leader by raft and
# linearizable reads on followers take a ReadIndex round, so this measures
# the replicated path that a single-member run (bench/compare.sh) does not.
#
# Environment knobs (defaults match the etcd performance docs):
#   TARGETS="metastore etcd"   which servers to run (either or both)
#   CONNS=100 CLIENTS=1000     gRPC connections and concurrent clients
#   TOTAL=100000               requests per workload
#   KEY_SIZE=8 VAL_SIZE=256    put request shape (range reads one such value)
#   METASTORE_FLAGS=""         extra flags for bin/metastore (e.g. --storage-engine=rocksdb)
#   KEEP=1                     keep the work directory (logs, data) afterwards
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGETS="${TARGETS:-metastore etcd}"
CONNS="${CONNS:-100}"
CLIENTS="${CLIENTS:-1000}"
TOTAL="${TOTAL:-100000}"
KEY_SIZE="${KEY_SIZE:-8}"
VAL_SIZE="${VAL_SIZE:-256}"
METASTORE_FLAGS="${METASTORE_FLAGS:-}"
KEEP="${KEEP:-}"

benchmark="$root/bin/ref/benchmark"
etcdctl="$root/bin/ref/etcdctl"
workloads=(put range-linearizable range-serializable)
members=(0 1 2)
ready_timeout=30

declare -A binary=([metastore]="$root/bin/metastore" [etcd]="$root/bin/ref/etcd")
# Member i of a target listens on base+2i (clients) and base+2i+1 (peers);
# base is picked free before the target's cluster starts.
declare -A base_port=()
declare -A rps=()
declare -A p99=()
pids=()

log() { echo "cluster-bench: $*" >&2; }
die() { log "$*"; exit 1; }

for target in $TARGETS; do
	[[ -n "${binary[$target]:-}" ]] || die "unknown target '$target' (want metastore and/or etcd)"
	[[ -x "${binary[$target]}" ]] || die "${binary[$target]} missing: run make build tools"
done
[[ -x "$benchmark" && -x "$etcdctl" ]] || die "reference tools missing: run make tools"

work="$(mktemp -d "${TMPDIR:-/tmp}/metastore-cluster-bench.XXXXXX")"
stop_cluster() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	pids=()
}
cleanup() {
	stop_cluster
	if [[ -n "$KEEP" ]]; then
		log "logs and data kept in $work"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
# shellcheck source=bench/ports.sh
source "$root/bench/ports.sh"
# shellcheck source=bench/results.sh
source "$root/bench/results.sh"

client_port() { echo $((base_port[$1] + 2 * $2)); }
peer_port() { echo $((base_port[$1] + 2 * $2 + 1)); }
endpoints() {
	local target=$1 list=() i
	for i in "${members[@]}"; do list+=("127.0.0.1:$(client_port "$target" "$i")"); done
	local IFS=,
	echo "${list[*]}"
}

start_cluster() {
	local target=$1 i initial=() extra=()
	base_port[$target]="$(free_ports $((2 * ${#members[@]})))" || die "no free loopback ports"
	for i in "${members[@]}"; do
		initial+=("$target-$i=http://127.0.0.1:$(peer_port "$target" "$i")")
	done
	local IFS=,
	local initial_cluster="${initial[*]}"
	unset IFS
	if [[ "$target" == metastore && -n "$METASTORE_FLAGS" ]]; then
		read -r -a extra <<<"$METASTORE_FLAGS"
	fi
	for i in "${members[@]}"; do
		local client peer
		client="http://127.0.0.1:$(client_port "$target" "$i")"
		peer="http://127.0.0.1:$(peer_port "$target" "$i")"
		"${binary[$target]}" --name="$target-$i" --data-dir="$work/$target-$i.data" \
			--listen-client-urls="$client" --advertise-client-urls="$client" \
			--listen-peer-urls="$peer" --initial-advertise-peer-urls="$peer" \
			--initial-cluster="$initial_cluster" --initial-cluster-state=new \
			--initial-cluster-token="bench-$target" \
			"${extra[@]}" >"$work/$target-$i.log" 2>&1 &
		pids+=($!)
	done
}

wait_ready() {
	local target=$1 deadline=$((SECONDS + ready_timeout)) p
	until "$etcdctl" --endpoints="$(endpoints "$target")" --command-timeout=2s \
		endpoint health >/dev/null 2>&1; do
		for p in "${pids[@]}"; do
			kill -0 "$p" 2>/dev/null || die "a $target member exited during start-up; logs: $work/$target-*.log"
		done
		((SECONDS < deadline)) || die "$target cluster not healthy after ${ready_timeout}s; logs: $work/$target-*.log"
		sleep 0.2
	done
}

# run_workload TARGET WORKLOAD: runs the benchmark, records req/s and p99.
run_workload() {
	local target=$1 workload=$2 out="$work/$1.$2.txt"
	local args=(--endpoints="$(endpoints "$target")" --conns="$CONNS" --clients="$CLIENTS")
	case "$workload" in
	put) args+=(put --total="$TOTAL" --key-size="$KEY_SIZE" --val-size="$VAL_SIZE") ;;
	range-linearizable) args+=(range foo --total="$TOTAL" --consistency=l) ;;
	range-serializable) args+=(range foo --total="$TOTAL" --consistency=s) ;;
	esac
	run_benchmark "$target" "$workload" "$out" "${args[@]}"
	record "$workload" "$target" "$out"
}

for target in $TARGETS; do
	start_cluster "$target"
	wait_ready "$target"
	# The range workloads read "foo"; give it a value of the put size.
	"$etcdctl" --endpoints="$(endpoints "$target")" put foo "$(head -c "$VAL_SIZE" /dev/zero | tr '\0' v)" >/dev/null
	for workload in "${workloads[@]}"; do
		run_workload "$target" "$workload"
	done
	stop_cluster
done

echo
echo "3 members; conns=$CONNS clients=$CLIENTS total=$TOTAL key-size=$KEY_SIZE val-size=$VAL_SIZE"
print_table "${workloads[@]}"
