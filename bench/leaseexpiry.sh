#!/usr/bin/env bash
# Lease mass-expiry benchmark of MetaStore and the reference etcd 3.6.
#
# For each target in turn (one server at a time, so they do not share the
# CPUs) starts a single-member server, runs bench/leaseexpiry against it
# and stops it: LEASES leases with KEYS_PER_LEASE keys each all expire in
# the same second while PUT_CLIENTS clients keep putting; the program
# measures how long until every leased key is gone and the put req/s and
# p99 before, during and after. Both results are printed side by side.
# Expect about LEASES/1000 seconds of expiry per target: etcd, and
# MetaStore after it, revoke at most 1,000 expired leases a second.
#
# Environment knobs:
#   BENCH_SCALE=small          quick run: LEASES=2000 KEYS_PER_LEASE=2 TTL=30 BASELINE=5 AFTER=2
#   TARGETS="metastore etcd"   which servers to run, in this order
#   LEASES=100000              leases, all expiring within the same second
#   KEYS_PER_LEASE=10          keys attached to each lease
#   TTL=300                    seconds from the first grant to the expiry
#                              instant: must cover granting, attaching and
#                              WARMUP+BASELINE (the run says when it is short)
#   PUT_CLIENTS=64             concurrent puts of the load (non-leased keys)
#   BASELINE=20 WARMUP=2       seconds of load measured, and not, before expiry
#   AFTER=5                    seconds of load after the last key is gone
#   BOUND=600                  fail unless all keys are gone this many seconds
#                              after the expiry instant
#   VALUE_SIZE=256             value size of the load's puts
#   METASTORE_FLAGS=""         extra flags for bin/metastore (memory engine by default)
#   SERIES=1                   also print the per-second puts and deletes
#   KEEP=1                     keep the work directory (logs, data, JSON) afterwards
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ "${BENCH_SCALE:-}" == small ]]; then
	: "${LEASES:=2000}" "${KEYS_PER_LEASE:=2}" "${TTL:=30}" "${BASELINE:=5}" "${AFTER:=2}"
fi
TARGETS="${TARGETS:-metastore etcd}"
LEASES="${LEASES:-100000}"
KEYS_PER_LEASE="${KEYS_PER_LEASE:-10}"
TTL="${TTL:-300}"
PUT_CLIENTS="${PUT_CLIENTS:-64}"
BASELINE="${BASELINE:-20}"
WARMUP="${WARMUP:-2}"
AFTER="${AFTER:-5}"
BOUND="${BOUND:-600}"
VALUE_SIZE="${VALUE_SIZE:-256}"
METASTORE_FLAGS="${METASTORE_FLAGS:-}"
SERIES="${SERIES:-}"
KEEP="${KEEP:-}"
GO="${GO:-go}"

log() { echo "leaseexpiry: $*" >&2; }
die() { log "$*"; exit 1; }


work="$(mktemp -d "${TMPDIR:-/tmp}/metastore-leaseexpiry.XXXXXX")"
name_prefix=leaseexpiry
# shellcheck source=bench/servers.sh
source "$root/bench/servers.sh"
trap cleanup EXIT
check_targets

# Build first so compilation is not mistaken for a slow server.
(cd "$root" && "$GO" build -o "$work/leaseexpiry" ./bench/leaseexpiry)

results=()
failed=0
for target in $TARGETS; do
	start_server "$target"
	wait_ready "$target"
	log "$target: $LEASES leases x $KEYS_PER_LEASE keys, TTL ${TTL}s, $PUT_CLIENTS put clients"
	if ! "$work/leaseexpiry" run -name="$target" -endpoints="$(endpoint "$target")" \
		-leases="$LEASES" -keys-per-lease="$KEYS_PER_LEASE" -ttl="${TTL}s" \
		-put-clients="$PUT_CLIENTS" -value-size="$VALUE_SIZE" \
		-warmup="${WARMUP}s" -baseline="${BASELINE}s" -after="${AFTER}s" -bound="${BOUND}s" \
		-json="$work/$target.json" >"$work/$target.table"; then
		log "$target: run failed; server log: $work/$target.log"
		failed=1
	fi
	[[ -s "$work/$target.json" ]] && results+=("$work/$target.json")
	# Stop it before the next target starts; cleanup stops what is left.
	stop_server "$target"
done

if ((${#results[@]} > 0)); then
	echo
	echo "lease mass expiry: $LEASES leases x $KEYS_PER_LEASE keys expiring within one second, $PUT_CLIENTS put clients"
	series=()
	[[ -n "$SERIES" ]] && series=(-series)
	"$work/leaseexpiry" table "${series[@]}" "${results[@]}"
fi
if ((failed)); then
	KEEP=1
	die "at least one run failed"
fi
