#!/usr/bin/env bash
# Side-by-side coordination benchmark of MetaStore and the reference etcd 3.6.
#
# Starts one single-member server per target (own ports, own data dir under
# a temporary directory) and runs bench/coordbench against all of them:
# contended lock acquire/release cycles per second (10 and 100 contenders)
# and election failover time (graceful resign and crash, i.e. lease loss).
#
# Environment knobs:
#   BENCH_SCALE=small          quick run: CONTENDERS=10 DURATION=2s FAILOVERS=3
#   TARGETS="metastore etcd"   which servers to run (either or both)
#   CONTENDERS=10,100          contender counts of the lock benchmark
#   DURATION=10s               length of each lock run
#   FAILOVERS=20               failovers measured per kind
#   METASTORE_FLAGS=""         extra flags for bin/metastore
#   KEEP=1                     keep the work directory (logs, data) afterwards
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ "${BENCH_SCALE:-}" == small ]]; then
	: "${CONTENDERS:=10}" "${DURATION:=2s}" "${FAILOVERS:=3}"
fi
TARGETS="${TARGETS:-metastore etcd}"
CONTENDERS="${CONTENDERS:-10,100}"
DURATION="${DURATION:-10s}"
FAILOVERS="${FAILOVERS:-20}"
METASTORE_FLAGS="${METASTORE_FLAGS:-}"
KEEP="${KEEP:-}"
GO="${GO:-go}"

log() { echo "coordination: $*" >&2; }
die() { log "$*"; exit 1; }


work="$(mktemp -d "${TMPDIR:-/tmp}/metastore-coordbench.XXXXXX")"
name_prefix=coord
# shellcheck source=bench/servers.sh
source "$root/bench/servers.sh"
trap cleanup EXIT
check_targets
args=()
for target in $TARGETS; do
	start_server "$target"
done
for target in $TARGETS; do
	wait_ready "$target"
	args+=(--target "$target=$(endpoint "$target")")
done

# Build first so compilation is not mistaken for a slow server.
(cd "$root" && "$GO" build -o "$work/coordbench" ./bench/coordbench)
"$work/coordbench" "${args[@]}" --contenders="$CONTENDERS" --duration="$DURATION" --failovers="$FAILOVERS"
