#!/usr/bin/env bash
# Side-by-side benchmark of MetaStore and the reference etcd 3.6.
#
# Starts one server per target - a single member, or a cluster of MEMBERS
# members (own ports, own data dirs under a temporary directory) - and
# runs etcd's own `benchmark` tool against each in turn, workload by
# workload: one writer, 1,000 writers, linearizable and serializable
# ranges, 4-put transactions, watch latency at 100 and 10,000 watchers,
# lease keep-alives and watch creation/delivery. ROUNDS rounds, the order
# of the targets alternated from one round to the next; the table shows
# the medians and MetaStore's ratio to etcd (MetaStore / etcd).
#
# Figures per workload and target:
#   req/s, p99 and average latency   from the tool's summary
#   server CPU per request           utime+stime (/proc/PID/stat) used by
#                                    the server's members during the
#                                    workload, divided by its requests
#   peak RSS                         VmHWM (/proc/PID/status) reached during
#                                    the workload (reset before each one),
#                                    summed over the members
# With MEMBERS=3 the tool spreads its connections over all members
# (writes sent to followers are forwarded, linearizable reads there take
# a ReadIndex round), except the one-writer workload, which writes to the
# leader (--target-leader) so that both servers are measured on the same
# path whoever won the election.
#
# Environment knobs (defaults match the etcd performance docs):
#   BENCH_SCALE=small          quick run: small defaults for the sizes below
#   TARGETS="metastore etcd"   which servers to run (either or both)
#   BASELINE=PATH              also run another build of MetaStore (target
#                              "baseline", with METASTORE_FLAGS), to measure a
#                              change before/after in the same run as etcd; its
#                              figures are in RESULTS and in the table below
#                              the main one (baseline ÷ etcd)
#   MEMBERS=1                  members per server (3: a cluster)
#   ROUNDS=3                   rounds; the target order alternates
#   CONNS=100 CLIENTS=1000     gRPC connections and concurrent clients
#   TOTAL=100000               requests per workload
#   TOTAL_ONE_CLIENT=10000     requests of the one-writer workload
#   KEY_SIZE=8 VAL_SIZE=256    put request shape (range reads one such value)
#   TXN_OPS=4                  puts per transaction (txn-put)
#   METASTORE_FLAGS=""         extra flags for bin/metastore (e.g. --storage-engine=rocksdb)
#   WORKLOADS="put-1client put range-linearizable range-serializable txn-put
#              watch-latency-100 watch-latency lease-keepalive watch"
#   WATCH_STREAMS=10 WATCHERS_PER_STREAM=1000   watch-latency: 10,000 watchers
#                              (watch-latency-100: the tool's default shape, 10
#                              streams of 10; one stream of 100 would exceed a
#                              stream's response pacing, internal/watch/pace.go)
#   WATCH_PUTS=1000 WATCH_PUT_RATE=100          watch-latency-100: puts observed by every watcher
#   WATCH_MANY_PUTS=100        watch-latency (10,000 watchers): puts observed by
#                              every watcher, at WATCH_PUT_RATE; 1,000,000 events.
#                              (1,000 puts, 10,000,000 events, took etcd 6-15
#                              minutes to deliver per round on 2 cores: the
#                              client's backlog, not the server's latency.)
#   WATCH_BENCH_STREAMS=100 WATCH_BENCH_WATCHERS_PER_STREAM=100
#                              watch: 10,000 watchers, created one at a time per
#                              stream (clientv3), all streams at once
#   WATCH_BENCH_KEYS=100       watch: distinct keys watched (each by 10,000/100
#                              watchers)
#   WATCH_BENCH_PUTS=10000 WATCH_BENCH_PUT_RATE=0
#                              watch: puts spread over those keys, from CLIENTS
#                              writers (rate 0: unlimited); events delivered =
#                              puts x watchers per key (1,000,000)
# The watch-latency rows count delivered events as requests (req/s is
# events/s, CPU is per event). The watch workload reports two rows:
# watch-create (creates/s and create p99) and watch-events (events/s
# delivered while the puts run, CPU of the whole workload per event; no
# p99, as the tool times only its own hand-off of each received event).
#   RESULTS=FILE               also append every measurement to FILE (lines of
#                              "config round target workload metric value",
#                              tab-separated; bench/table reads them)
#   CONFIG=LABEL               the config column of those lines (default
#                              "N member(s)" and METASTORE_FLAGS)
#   KEEP=1                     keep the work directory (logs, data) afterwards
#   TLS=1                      the servers serve https with client certificate
#                              authentication (--cert-file, --key-file,
#                              --trusted-ca-file, --client-cert-auth; certificates
#                              from test/tlscerts), and the tool connects with
#                              --cacert/--cert/--key
#   AUTH_USER=root:secret      enable authentication (root user and role) on the
#                              servers and run the tool as that user (--user)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ "${BENCH_SCALE:-}" == small ]]; then
	: "${CONNS:=10}" "${CLIENTS:=50}" "${TOTAL:=3000}" "${TOTAL_ONE_CLIENT:=300}"
	: "${WATCHERS_PER_STREAM:=100}" "${WATCH_PUTS:=100}"
	: "${WATCH_BENCH_STREAMS:=10}" "${WATCH_BENCH_PUTS:=1000}"
fi
TARGETS="${TARGETS:-metastore etcd}"
BASELINE="${BASELINE:-}"
[[ -z "$BASELINE" ]] || TARGETS="$TARGETS baseline"
MEMBERS="${MEMBERS:-1}"
ROUNDS="${ROUNDS:-3}"
CONNS="${CONNS:-100}"
CLIENTS="${CLIENTS:-1000}"
TOTAL="${TOTAL:-100000}"
TOTAL_ONE_CLIENT="${TOTAL_ONE_CLIENT:-10000}"
KEY_SIZE="${KEY_SIZE:-8}"
VAL_SIZE="${VAL_SIZE:-256}"
TXN_OPS="${TXN_OPS:-4}"
METASTORE_FLAGS="${METASTORE_FLAGS:-}"
KEEP="${KEEP:-}"
TLS="${TLS:-}"
AUTH_USER="${AUTH_USER:-}"
members_label="$MEMBERS member$( ((MEMBERS == 1)) || echo s)"
CONFIG="${CONFIG:-$members_label${METASTORE_FLAGS:+, $METASTORE_FLAGS}}"
RESULTS="${RESULTS:-}"
GO="${GO:-go}"

read -r -a workloads <<<"${WORKLOADS:-put-1client put range-linearizable range-serializable txn-put watch-latency-100 watch-latency lease-keepalive watch}"
WATCH_STREAMS="${WATCH_STREAMS:-10}"
WATCHERS_PER_STREAM="${WATCHERS_PER_STREAM:-1000}"
WATCH_PUTS="${WATCH_PUTS:-1000}"
WATCH_MANY_PUTS="${WATCH_MANY_PUTS:-100}"
WATCH_PUT_RATE="${WATCH_PUT_RATE:-100}"
WATCH_BENCH_STREAMS="${WATCH_BENCH_STREAMS:-100}"
WATCH_BENCH_WATCHERS_PER_STREAM="${WATCH_BENCH_WATCHERS_PER_STREAM:-100}"
WATCH_BENCH_KEYS="${WATCH_BENCH_KEYS:-100}"
WATCH_BENCH_PUTS="${WATCH_BENCH_PUTS:-10000}"
WATCH_BENCH_PUT_RATE="${WATCH_BENCH_PUT_RATE:-0}"

log() { echo "compare: $*" >&2; }
die() { log "$*"; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/metastore-bench.XXXXXX")"
members=$MEMBERS
# shellcheck source=bench/servers.sh
source "$root/bench/servers.sh"
trap cleanup EXIT
if [[ -n "$BASELINE" ]]; then
	binary[baseline]="$BASELINE"
	server_flags[baseline]="$METASTORE_FLAGS"
fi
check_targets
[[ -x "$benchmark" ]] || die "reference benchmark tool missing: run make tools"
# shellcheck source=bench/results.sh
source "$root/bench/results.sh"
[[ "$TLS" == 1 ]] && setup_tls
user_flags=()
[[ -n "$AUTH_USER" ]] && user_flags=(--user="$AUTH_USER")
raw="$work/raw.txt"
: >"$raw"
build_table

# enable_auth TARGET: the root user (AUTH_USER) with the root role, then
# authentication on.
enable_auth() {
	local ctl=("$etcdctl" --endpoints="$(endpoints "$1")" "${client_tls_flags[@]}")
	"${ctl[@]}" role add root >/dev/null || die "$1: role add root"
	"${ctl[@]}" user add "${AUTH_USER%%:*}" --new-user-password="${AUTH_USER#*:}" >/dev/null || die "$1: user add"
	"${ctl[@]}" user grant-role "${AUTH_USER%%:*}" root >/dev/null || die "$1: user grant-role"
	"${ctl[@]}" auth enable >/dev/null || die "$1: auth enable"
}

# workload_args WORKLOAD: the tool's arguments after the global ones.
workload_args() {
	case "$1" in
	put-1client) echo put --total="$TOTAL_ONE_CLIENT" --key-size="$KEY_SIZE" --val-size="$VAL_SIZE" ;;
	put) echo put --total="$TOTAL" --key-size="$KEY_SIZE" --val-size="$VAL_SIZE" ;;
	range-linearizable) echo range foo --total="$TOTAL" --consistency=l ;;
	range-serializable) echo range foo --total="$TOTAL" --consistency=s ;;
	txn-put) echo txn-put --total="$TOTAL" --txn-ops="$TXN_OPS" --key-size="$KEY_SIZE" --val-size="$VAL_SIZE" \
		--key-space-size="$TXN_OPS" ;;
	lease-keepalive) echo lease-keepalive --total="$TOTAL" ;;
	# Latency from put to every watcher's event.
	watch-latency) echo watch-latency --streams="$WATCH_STREAMS" --watchers-per-stream="$WATCHERS_PER_STREAM" \
		--put-total="$WATCH_MANY_PUTS" --put-rate="$WATCH_PUT_RATE" --val-size="$VAL_SIZE" ;;
	watch-latency-100) echo watch-latency --streams=10 --watchers-per-stream=10 \
		--put-total="$WATCH_PUTS" --put-rate="$WATCH_PUT_RATE" --val-size="$VAL_SIZE" ;;
	# Watch creation, then event delivery under concurrent puts. Sequential
	# keys make the watched keys distinct (by default they are one key).
	watch) echo watch --streams="$WATCH_BENCH_STREAMS" --watch-per-stream="$WATCH_BENCH_WATCHERS_PER_STREAM" \
		--watched-key-total="$WATCH_BENCH_KEYS" --key-space-size="$WATCH_BENCH_KEYS" --sequential-keys \
		--key-size="$KEY_SIZE" --put-total="$WATCH_BENCH_PUTS" --put-rate="$WATCH_BENCH_PUT_RATE" ;;
	*) die "unknown workload '$1'" ;;
	esac
}

# requests WORKLOAD: what its server CPU is divided by.
requests() {
	case "$1" in
	put-1client) echo "$TOTAL_ONE_CLIENT" ;;
	watch-latency) echo $((WATCH_MANY_PUTS * WATCH_STREAMS * WATCHERS_PER_STREAM)) ;;
	watch-latency-100) echo $((WATCH_PUTS * 100)) ;;
	watch) echo $((WATCH_BENCH_PUTS * WATCH_BENCH_STREAMS * WATCH_BENCH_WATCHERS_PER_STREAM / WATCH_BENCH_KEYS)) ;;
	*) echo "$TOTAL" ;;
	esac
}

# run_workload ROUND TARGET WORKLOAD: runs the benchmark, records its
# figures and the server's CPU and peak RSS.
run_workload() {
	local round=$1 target=$2 workload=$3 out="$work/$2.$3.$1.txt" args cpu_before cpu_after
	local global=(--endpoints="$(endpoints "$target")" "${client_tls_flags[@]}" "${user_flags[@]}")
	if [[ "$workload" == put-1client ]]; then
		global+=(--conns=1 --clients=1)
		((${size[$target]} > 1)) && global+=(--target-leader)
	else
		global+=(--conns="$CONNS" --clients="$CLIENTS")
	fi
	read -r -a args <<<"$(workload_args "$workload")"
	reset_peak_rss "$target"
	cpu_before="$(cpu_ticks "$target")"
	run_benchmark "$target" "$workload" "$out" "${global[@]}" "${args[@]}"
	cpu_after="$(cpu_ticks "$target")"
	local id=("$round" "$target")
	case "$workload" in
	# watch-latency prints a put summary, then the one that matters: the
	# watch events summary (events/s delivered, put-to-event latency).
	watch-latency*)
		sed -n '/^Watch events summary/,$p' "$out" >"$out.events"
		record "${id[@]}" "$workload" "$out.events"
		;;
	# watch prints a creation summary (each create's round trip), then the
	# events received summary, whose latencies are the tool's own hand-off
	# of an event already received: only its rate is kept.
	watch)
		record "${id[@]}" watch-create "$out"
		sed -n '/^Watch events received summary/,$p' "$out" >"$out.events"
		record_rate "${id[@]}" watch-events "$out.events"
		workload=watch-events
		;;
	*) record "${id[@]}" "$workload" "$out" ;;
	esac
	record_usage "${id[@]}" "$workload" "$((cpu_after - cpu_before))" "$(requests "${3}")" "$(peak_rss_kib "$target")"
}

for target in $TARGETS; do
	start_server "$target"
done
for target in $TARGETS; do
	wait_ready "$target"
	[[ -n "$AUTH_USER" ]] && enable_auth "$target"
	# The range workloads read "foo"; give it a value of the put size.
	"$etcdctl" --endpoints="$(endpoints "$target")" "${client_tls_flags[@]}" "${user_flags[@]}" \
		put foo "$(head -c "$VAL_SIZE" /dev/zero | tr '\0' v)" >/dev/null
done

read -r -a order <<<"$TARGETS"
for ((round = 1; round <= ROUNDS; round++)); do
	for workload in "${workloads[@]}"; do
		for target in "${order[@]}"; do
			run_workload "$round" "$target" "$workload"
		done
	done
	# Alternate: whoever went second goes first in the next round.
	reversed=()
	for target in "${order[@]}"; do reversed=("$target" "${reversed[@]}"); done
	order=("${reversed[@]}")
done

# The sizes, for bench/table's row names and notes.
for param in rounds=$ROUNDS members=$MEMBERS conns=$CONNS clients=$CLIENTS total=$TOTAL \
	one_client_total=$TOTAL_ONE_CLIENT txn_ops=$TXN_OPS val_size=$VAL_SIZE \
	watchers=$((WATCH_STREAMS * WATCHERS_PER_STREAM)) watch_puts=$WATCH_PUTS watch_many_puts=$WATCH_MANY_PUTS; do
	add_value 0 - param "${param%%=*}" "${param#*=}"
done

echo
echo "$CONFIG: rounds=$ROUNDS conns=$CONNS clients=$CLIENTS total=$TOTAL one-client total=$TOTAL_ONE_CLIENT" \
	"key-size=$KEY_SIZE val-size=$VAL_SIZE txn-ops=$TXN_OPS${TLS:+ tls=$TLS}${AUTH_USER:+ auth=on}"
if [[ -z "$BASELINE" ]]; then
	"$table" compare "$raw"
else
	awk -F'\t' '$2 != "baseline"' "$raw" >"$raw.main"
	"$table" compare "$raw.main"
	echo
	echo "baseline ($BASELINE) in the place of MetaStore, same run:"
	awk -F'\t' -v OFS='\t' '$2 != "metastore" { if ($2 == "baseline") $2 = "metastore"; print }' "$raw" >"$raw.baseline"
	"$table" compare "$raw.baseline"
fi
[[ -z "$RESULTS" ]] || awk -v c="$CONFIG" '{ print c "\t" $0 }' "$raw" >>"$RESULTS"
