#!/usr/bin/env bash
# Side-by-side benchmark of MetaStore and the reference etcd 3.6.
#
# Starts one single-member server per target (own ports, own data dir under
# a temporary directory), runs etcd's own `benchmark` tool against each in
# turn - put, linearizable range, serializable range, lease keep-alive and
# two watch workloads - and prints req/s and p99 latency per workload next
# to each other.
#
# Environment knobs (defaults match the etcd performance docs):
#   TARGETS="metastore etcd"   which servers to run (either or both)
#   CONNS=100 CLIENTS=1000     gRPC connections and concurrent clients
#   TOTAL=100000               requests per workload
#   KEY_SIZE=8 VAL_SIZE=256    put request shape (range reads one such value)
#   METASTORE_FLAGS=""         extra flags for bin/metastore (e.g. --storage-engine=rocksdb)
#   WORKLOADS="put range-linearizable range-serializable lease-keepalive watch-latency watch"
#   WATCH_STREAMS=10 WATCHERS_PER_STREAM=1000   watch-latency: 10,000 watchers
#   WATCH_PUTS=1000 WATCH_PUT_RATE=100          watch-latency: puts observed by every watcher
#   WATCH_BENCH_STREAMS=100 WATCH_BENCH_WATCHERS_PER_STREAM=100
#                              watch: 10,000 watchers, created one at a time per
#                              stream (clientv3), all streams at once
#   WATCH_BENCH_KEYS=100       watch: distinct keys watched (each by 10,000/100
#                              watchers)
#   WATCH_BENCH_PUTS=10000 WATCH_BENCH_PUT_RATE=0
#                              watch: puts spread over those keys, from CLIENTS
#                              writers (rate 0: unlimited); events delivered =
#                              puts x watchers per key (1,000,000)
# The watch workload reports two rows: watch-create (creates/s and create
# p99) and watch-events (events/s delivered while the puts run; no p99, as
# the tool times only its own hand-off of each received event).
#   KEEP=1                     keep the work directory (logs, data) afterwards
#   TLS=1                      both servers serve https with client certificate
#                              authentication (--cert-file, --key-file,
#                              --trusted-ca-file, --client-cert-auth; certificates
#                              from bench/tlscerts), and the tool connects with
#                              --cacert/--cert/--key
#   AUTH_USER=root:secret      enable authentication (root user and role) on both
#                              servers and run the tool as that user (--user)
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
TLS="${TLS:-}"
AUTH_USER="${AUTH_USER:-}"

benchmark="$root/bin/ref/benchmark"
etcdctl="$root/bin/ref/etcdctl"
read -r -a workloads <<<"${WORKLOADS:-put range-linearizable range-serializable lease-keepalive watch-latency watch}"
WATCH_STREAMS="${WATCH_STREAMS:-10}"
WATCHERS_PER_STREAM="${WATCHERS_PER_STREAM:-1000}"
WATCH_PUTS="${WATCH_PUTS:-1000}"
WATCH_PUT_RATE="${WATCH_PUT_RATE:-100}"
WATCH_BENCH_STREAMS="${WATCH_BENCH_STREAMS:-100}"
WATCH_BENCH_WATCHERS_PER_STREAM="${WATCH_BENCH_WATCHERS_PER_STREAM:-100}"
WATCH_BENCH_KEYS="${WATCH_BENCH_KEYS:-100}"
WATCH_BENCH_PUTS="${WATCH_BENCH_PUTS:-10000}"
WATCH_BENCH_PUT_RATE="${WATCH_BENCH_PUT_RATE:-0}"
ready_timeout=30

declare -A binary=([metastore]="$root/bin/metastore" [etcd]="$root/bin/ref/etcd")
# Picked by start_server (bench/single-member.sh).
declare -A client_port=()
declare -A peer_port=()
declare -A pid=()
declare -A rps=()
declare -A p99=()

log() { echo "compare: $*" >&2; }
die() { log "$*"; exit 1; }


work="$(mktemp -d "${TMPDIR:-/tmp}/metastore-bench.XXXXXX")"
name_prefix=bench
# shellcheck source=bench/single-member.sh
source "$root/bench/single-member.sh"
trap cleanup EXIT
check_targets
[[ -x "$benchmark" ]] || die "reference benchmark tool missing: run make tools"
# shellcheck source=bench/results.sh
source "$root/bench/results.sh"
[[ "$TLS" == 1 ]] && setup_tls
user_flags=()
[[ -n "$AUTH_USER" ]] && user_flags=(--user="$AUTH_USER")

# enable_auth TARGET: the root user (AUTH_USER) with the root role, then
# authentication on.
enable_auth() {
	local ctl=("$etcdctl" --endpoints="$(endpoint "$1")" "${client_tls_flags[@]}")
	"${ctl[@]}" role add root >/dev/null || die "$1: role add root"
	"${ctl[@]}" user add "${AUTH_USER%%:*}" --new-user-password="${AUTH_USER#*:}" >/dev/null || die "$1: user add"
	"${ctl[@]}" user grant-role "${AUTH_USER%%:*}" root >/dev/null || die "$1: user grant-role"
	"${ctl[@]}" auth enable >/dev/null || die "$1: auth enable"
}

# run_workload TARGET WORKLOAD: runs the benchmark, records req/s and p99.
run_workload() {
	local target=$1 workload=$2 out="$work/$1.$2.txt"
	local args=(--endpoints="$(endpoint "$target")" "${client_tls_flags[@]}" "${user_flags[@]}" --conns="$CONNS" --clients="$CLIENTS")
	case "$workload" in
	put) args+=(put --total="$TOTAL" --key-size="$KEY_SIZE" --val-size="$VAL_SIZE") ;;
	range-linearizable) args+=(range foo --total="$TOTAL" --consistency=l) ;;
	range-serializable) args+=(range foo --total="$TOTAL" --consistency=s) ;;
	lease-keepalive) args+=(lease-keepalive --total="$TOTAL") ;;
	# Latency from put to every watcher's event, 10,000 watchers by default.
	watch-latency) args+=(watch-latency --streams="$WATCH_STREAMS" --watchers-per-stream="$WATCHERS_PER_STREAM"
		--put-total="$WATCH_PUTS" --put-rate="$WATCH_PUT_RATE" --val-size="$VAL_SIZE") ;;
	# Watch creation, then event delivery under concurrent puts. Sequential
	# keys make the watched keys distinct (by default they are one key).
	watch) args+=(watch --streams="$WATCH_BENCH_STREAMS" --watch-per-stream="$WATCH_BENCH_WATCHERS_PER_STREAM"
		--watched-key-total="$WATCH_BENCH_KEYS" --key-space-size="$WATCH_BENCH_KEYS" --sequential-keys
		--key-size="$KEY_SIZE" --put-total="$WATCH_BENCH_PUTS" --put-rate="$WATCH_BENCH_PUT_RATE") ;;
	*) die "unknown workload '$workload'" ;;
	esac
	run_benchmark "$target" "$workload" "$out" "${args[@]}"
	case "$workload" in
	# watch-latency prints a put summary, then the one that matters: the
	# watch events summary (events/s delivered, put-to-event latency).
	watch-latency)
		sed -n '/^Watch events summary/,$p' "$out" >"$out.events"
		record "$workload" "$target" "$out.events"
		;;
	# watch prints a creation summary (each create's round trip), then the
	# events received summary, whose latencies are the tool's own hand-off
	# of an event already received: only its rate is kept.
	watch)
		record watch-create "$target" "$out"
		sed -n '/^Watch events received summary/,$p' "$out" >"$out.events"
		record watch-events "$target" "$out.events"
		p99[$target.watch-events]=-
		;;
	*) record "$workload" "$target" "$out" ;;
	esac
}

for target in $TARGETS; do
	start_server "$target"
done
for target in $TARGETS; do
	wait_ready "$target"
	[[ -n "$AUTH_USER" ]] && enable_auth "$target"
	# The range workloads read "foo"; give it a value of the put size.
	"$etcdctl" --endpoints="$(endpoint "$target")" "${client_tls_flags[@]}" "${user_flags[@]}" \
		put foo "$(head -c "$VAL_SIZE" /dev/zero | tr '\0' v)" >/dev/null
done

for workload in "${workloads[@]}"; do
	for target in $TARGETS; do
		run_workload "$target" "$workload"
	done
done

# One row per workload; watch gives two.
rows=()
for workload in "${workloads[@]}"; do
	if [[ "$workload" == watch ]]; then
		rows+=(watch-create watch-events)
	else
		rows+=("$workload")
	fi
done

echo
echo "conns=$CONNS clients=$CLIENTS total=$TOTAL key-size=$KEY_SIZE val-size=$VAL_SIZE${TLS:+ tls=$TLS}${AUTH_USER:+ auth=on}"
print_table "${rows[@]}"
