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
#   BENCH_SCALE=small          quick run: DURATION=2s
#   TARGETS="metastore etcd"   which servers to run
#   SIZES="1 3"                cluster sizes
#   WORKERS=16                 concurrent workers
#   DURATION=5s                length of each workload
#   METASTORE_FLAGS=""         extra flags for bin/metastore
#   KEEP=1                     keep the work directory (logs, data) afterwards
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ "${BENCH_SCALE:-}" == small ]]; then
	: "${DURATION:=2s}"
fi
TARGETS="${TARGETS:-metastore etcd}"
SIZES="${SIZES:-1 3}"
WORKERS="${WORKERS:-16}"
DURATION="${DURATION:-5s}"
METASTORE_FLAGS="${METASTORE_FLAGS:-}"
KEEP="${KEEP:-}"
GO="${GO:-go}"

declare -A apis=([metastore]="http-lock v3lock-gateway" [etcd]="v3lock-gateway")

log() { echo "httplock: $*" >&2; }
die() { log "$*"; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/metastore-httplock.XXXXXX")"
name_prefix=httplock
# shellcheck source=bench/servers.sh
source "$root/bench/servers.sh"
trap cleanup EXIT
check_targets

# Build first so compilation is not mistaken for a slow server.
(cd "$root" && "$GO" build -o "$work/httplockbench" ./bench/httplockbench)
results="$work/results.txt"
for size in $SIZES; do
	for target in $TARGETS; do
		members=$size
		start_server "$target"
		wait_ready "$target"
		for api in ${apis[$target]}; do
			log "$size member(s), $target, $api"
			"$work/httplockbench" --api="$api" --endpoints="$(endpoints "$target")" --label="$size:$target" \
				--workers="$WORKERS" --duration="$DURATION" | tee -a "$results" >&2
		done
		stop_server "$target"
		rm -rf "$work/$target"*.data
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
