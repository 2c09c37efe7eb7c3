#!/usr/bin/env bash
# HTTP lock benchmark: MetaStore's lock service (/v1/lock/) next to etcd's
# v3lock JSON gateway (/v3/lock/), on 1- and 3-member clusters.
#
# For each cluster size and each target in turn, starts a cluster on
# loopback (own ports and data dirs under a temporary directory), runs
# bench/httplockbench with its workers spread over every member, then
# stops the cluster before the next one starts, so runs never compete for
# the CPU. Workloads: lock/unlock pairs per second on uncontended
# resources (one per worker) and handovers per second on one contended
# resource. MetaStore is measured through both APIs; etcd through its
# gateway (it has no /v1/lock/).
#
# Environment knobs:
#   TARGETS="metastore etcd"   which servers to run
#   SIZES="1 3"                cluster sizes
#   WORKERS=16                 concurrent workers
#   DURATION=5s                length of each workload
#   METASTORE_FLAGS=""         extra flags for bin/metastore
#   KEEP=1                     keep the work directory (logs, data) afterwards
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGETS="${TARGETS:-metastore etcd}"
SIZES="${SIZES:-1 3}"
WORKERS="${WORKERS:-16}"
DURATION="${DURATION:-5s}"
METASTORE_FLAGS="${METASTORE_FLAGS:-}"
KEEP="${KEEP:-}"
GO="${GO:-go}"

etcdctl="$root/bin/ref/etcdctl"
ready_timeout=30
declare -A binary=([metastore]="$root/bin/metastore" [etcd]="$root/bin/ref/etcd")
declare -A apis=([metastore]="http-lock v3lock-gateway" [etcd]="v3lock-gateway")
pids=()
base_port=0

log() { echo "httplock: $*" >&2; }
die() { log "$*"; exit 1; }

for target in $TARGETS; do
	[[ -n "${binary[$target]:-}" ]] || die "unknown target '$target' (want metastore and/or etcd)"
	[[ -x "${binary[$target]}" ]] || die "${binary[$target]} missing: run make build tools"
done
[[ -x "$etcdctl" ]] || die "reference etcdctl missing: run make tools"

work="$(mktemp -d "${TMPDIR:-/tmp}/metastore-httplock.XXXXXX")"
stop_cluster() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}
cleanup() {
	stop_cluster
	if [[ -n "$KEEP" ]]; then log "logs and data kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
# shellcheck source=bench/ports.sh
source "$root/bench/ports.sh"

# endpoints SIZE: the members' client host:port list.
endpoints() {
	local list=() i
	for ((i = 0; i < $1; i++)); do list+=("127.0.0.1:$((base_port + 2 * i))"); done
	local IFS=,
	echo "${list[*]}"
}

# start_cluster TARGET SIZE
start_cluster() {
	local target=$1 size=$2 i initial=() extra=()
	base_port="$(free_ports $((2 * size)))" || die "no free loopback ports"
	for ((i = 0; i < size; i++)); do
		initial+=("$target-$i=http://127.0.0.1:$((base_port + 2 * i + 1))")
	done
	local IFS=,
	local initial_cluster="${initial[*]}"
	unset IFS
	if [[ "$target" == metastore && -n "$METASTORE_FLAGS" ]]; then
		read -r -a extra <<<"$METASTORE_FLAGS"
	fi
	for ((i = 0; i < size; i++)); do
		local client="http://127.0.0.1:$((base_port + 2 * i))" peer="http://127.0.0.1:$((base_port + 2 * i + 1))"
		"${binary[$target]}" --name="$target-$i" --data-dir="$work/$target-$size-$i.data" \
			--listen-client-urls="$client" --advertise-client-urls="$client" \
			--listen-peer-urls="$peer" --initial-advertise-peer-urls="$peer" \
			--initial-cluster="$initial_cluster" --initial-cluster-state=new \
			--initial-cluster-token="httplock-$target-$size" \
			"${extra[@]}" >"$work/$target-$size-$i.log" 2>&1 &
		pids+=($!)
	done
	local deadline=$((SECONDS + ready_timeout)) p
	until "$etcdctl" --endpoints="$(endpoints "$size")" --command-timeout=2s endpoint health >/dev/null 2>&1; do
		for p in "${pids[@]}"; do
			kill -0 "$p" 2>/dev/null || die "a $target member exited during start-up; logs: $work/$target-$size-*.log"
		done
		((SECONDS < deadline)) || die "$target cluster of $size not healthy after ${ready_timeout}s"
		sleep 0.2
	done
	"$etcdctl" --endpoints="$(endpoints "$size")" --command-timeout=5s member list 2>/dev/null |
		grep -q ", $target-0, " || die "$(endpoints "$size") is not our $target cluster"
}

# Build first so compilation is not mistaken for a slow server.
(cd "$root" && "$GO" build -o "$work/httplockbench" ./bench/httplockbench)
results="$work/results.txt"
for size in $SIZES; do
	for target in $TARGETS; do
		start_cluster "$target" "$size"
		for api in ${apis[$target]}; do
			log "$size member(s), $target, $api"
			"$work/httplockbench" --api="$api" --endpoints="$(endpoints "$size")" --label="$size:$target" \
				--workers="$WORKERS" --duration="$DURATION" | tee -a "$results" >&2
		done
		stop_cluster
	done
done

echo
echo "HTTP locks: $WORKERS workers, $DURATION per workload (ops/s: uncontended lock/unlock pairs, contended handovers)"
printf '%-8s %-10s %-16s %14s %14s\n' members server api uncontended contended
awk '
	/^RESULT/ {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
		split(f["label"], l, ":")
		key = l[1] " " l[2] " " f["api"]
		if (!(key in seen)) { seen[key] = 1; order[n++] = key }
		v[key, f["workload"]] = f["ops_per_sec"]
	}
	END {
		for (i = 0; i < n; i++) {
			split(order[i], k, " ")
			printf "%-8s %-10s %-16s %14s %14s\n", k[1], k[2], k[3], v[order[i], "uncontended"], v[order[i], "contended"]
		}
	}' "$results"
