#!/usr/bin/env bash
# Memory cost of idle watchers: a single MetaStore member (memory engine)
# against a single etcd 3.6 member, 100,000 watchers by default.
#
# For each mode and target, one server at a time (so that they do not
# compete for the machine), on a fresh data dir:
#   1. start it (with --enable-pprof, through ETCD_ENABLE_PPROF, which both
#      read) and wait until it is healthy;
#   2. settle: force a garbage collection (GET /debug/pprof/heap?gc=1),
#      wait SETTLE seconds, read RSS (VmRSS of /proc/PID/status) and the Go
#      heap in use and goroutine count (from /metrics): "before";
#   3. run bench/watchmem, which opens WATCHERS watchers over STREAMS gRPC
#      streams and reports once the server has acknowledged every create;
#      read RSS at once: "all created" (includes the garbage of the creates);
#   4. settle again while the watchers stay open, idle: "settled";
#   5. stop the watchers and the server.
# Then print, per mode, one table: RSS before, all created, settled, the
# settled delta and bytes per watcher; the same for the Go heap in use.
# The settled figures are the comparison: both servers are Go programs, so
# forcing a collection and giving the runtime SETTLE seconds to return
# freed pages treats them alike. The runtime returns freed pages to the
# OS gradually, so RSS still carries some slack; heap in use counts only
# spans holding objects. Each server gets fresh random loopback ports.
#
# Modes: keys (each watcher on its own key), prefixes (each on its own
# prefix, i.e. a range). See bench/watchmem/doc.go for the keys.
#
# Environment knobs:
#   BENCH_SCALE=small          quick run: WATCHERS=5000 STREAMS=10 SETTLE=2
#   TARGETS="metastore etcd"   which servers to run, in this order
#   MODES="keys prefixes"      what the watchers watch
#   WATCHERS=100000 STREAMS=100 CONNS=1   watchers, gRPC streams, connections
#   SETTLE=5                   seconds to wait after each forced GC
#   STEP_TIMEOUT=300           seconds the creates may take
#   METASTORE_FLAGS=""         extra flags for bin/metastore (the memory
#                              engine is asked for before them)
#   PROFILE=1                  keep each server's settled heap profile
#                              (implies KEEP; go tool pprof -sample_index=inuse_space)
#   KEEP=1                     keep the work directory (logs, data, profiles)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ "${BENCH_SCALE:-}" == small ]]; then
	: "${WATCHERS:=5000}" "${STREAMS:=10}" "${SETTLE:=2}"
fi
TARGETS="${TARGETS:-metastore etcd}"
MODES="${MODES:-keys prefixes}"
WATCHERS="${WATCHERS:-100000}"
STREAMS="${STREAMS:-100}"
CONNS="${CONNS:-1}"
SETTLE="${SETTLE:-5}"
STEP_TIMEOUT="${STEP_TIMEOUT:-300}"
METASTORE_FLAGS="--storage-engine=memory ${METASTORE_FLAGS:-}"
PROFILE="${PROFILE:-}"
KEEP="${KEEP:-$PROFILE}"
GO="${GO:-go}"

declare -A result=()

log() { echo "watchmem: $*" >&2; }
die() { log "$*"; exit 1; }

for mode in $MODES; do
	[[ "$mode" == keys || "$mode" == prefixes ]] || die "unknown mode '$mode' (want keys and/or prefixes)"
done

work="$(mktemp -d "${TMPDIR:-/tmp}/metastore-watchmem.XXXXXX")"
name_prefix=watchmem
# shellcheck source=bench/servers.sh
source "$root/bench/servers.sh"
trap cleanup EXIT
check_targets
# Both servers take their flags from ETCD_* variables too.
export ETCD_ENABLE_PPROF=true

# Build first so compilation does not count against a server.
prog="$work/watchmem"
(cd "$root" && "$GO" build -o "$prog" ./bench/watchmem) || die "cannot build bench/watchmem"

# value NAME TEXT: the value of NAME=... in watchmem's output.
value() { sed -n "s/^$1=//p" <<<"$2"; }

# settle KEY TARGET [PROFILE]: force a GC, wait SETTLE seconds, and record
# RSS, heap in use and goroutines as result[KEY.rss|heap|goroutines].
settle() {
	local key=$1 target=$2 profile=() out
	[[ -n "${3:-}" ]] && profile=(-heap-profile="$3")
	"$prog" stats -endpoint="$(endpoint "$target")" -gc "${profile[@]}" >/dev/null ||
		die "$target: cannot force a GC; log: $work/$target.log"
	sleep "$SETTLE"
	result[$key.rss]="$(rss_kib "$target")"
	out="$("$prog" stats -endpoint="$(endpoint "$target")")" || die "$target: cannot read /metrics"
	result[$key.heap]="$(value heap_inuse_bytes "$out")"
	result[$key.goroutines]="$(value goroutines "$out")"
}

# measure TARGET MODE: one fresh server, one set of watchers.
measure() {
	local target=$1 mode=$2 key="$1.$2" line out=""
	log "$target, $mode: start"
	start_server "$target"
	wait_ready "$target"
	settle "$key.before" "$target"

	log "$target, $mode: $WATCHERS watchers over $STREAMS streams"
	coproc watchers {
		exec "$prog" watch -endpoint="$(endpoint "$target")" -watchers="$WATCHERS" -streams="$STREAMS" \
			-conns="$CONNS" -mode="$mode" -create-timeout="${STEP_TIMEOUT}s" 2>"$work/$key.watchmem.stderr"
	}
	# shellcheck disable=SC2154 # set by coproc
	# The client is stopped (stop_server) and cleaned up like a server.
	pid[client]=$watchers_PID
	# The client prints its results, then "ready" once every create is
	# acknowledged; EOF means it failed.
	while read -r -t "$STEP_TIMEOUT" line <&"${watchers[0]}" && [[ "$line" != ready ]]; do
		out+="$line"$'\n'
	done
	[[ "$line" == ready ]] || die "$target, $mode: watchers not created: $(cat "$work/$key.watchmem.stderr")"
	result[$key.created.rss]="$(rss_kib "$target")"
	result[$key.create_s]="$(value create_seconds "$out")"
	kill -0 "${pid[client]}" 2>/dev/null || die "$target, $mode: watchmem exited while holding the watchers"

	local heap_profile=""
	[[ -n "$PROFILE" ]] && heap_profile="$work/$key.heap.pb.gz"
	settle "$key.settled" "$target" "$heap_profile"
	# A client that lost a stream while holding has exited by now.
	kill -0 "${pid[client]}" 2>/dev/null || die "$target, $mode: $(cat "$work/$key.watchmem.stderr")"
	stop_server client
	stop_server "$target"
	rm -rf "$work/$target.data"
}

for mode in $MODES; do
	for target in $TARGETS; do
		measure "$target" "$mode"
	done
done

mib() { awk -v k="$1" -v d="$2" 'BEGIN { printf "%.1f", k / d }'; }
echo
echo "watchers=$WATCHERS streams=$STREAMS conns=$CONNS settle=${SETTLE}s (after a forced GC)"
for mode in $MODES; do
	printf '\n%-32s' "mode=$mode"
	for target in $TARGETS; do
		case "$target" in
		etcd) printf '  %14s' "etcd-3.6" ;;
		*) printf '  %14s' "$target" ;;
		esac
	done
	echo
	rows=(
		"RSS before (MiB)" "RSS all created (MiB)" "RSS settled (MiB)" "RSS delta, settled (MiB)"
		"RSS bytes per watcher" "heap in use before (MiB)" "heap in use settled (MiB)"
		"heap bytes per watcher" "goroutines before/settled" "create time (s)"
	)
	for row in "${rows[@]}"; do
		printf '%-32s' "$row"
		for target in $TARGETS; do
			k="$target.$mode"
			before_rss=${result[$k.before.rss]} settled_rss=${result[$k.settled.rss]}
			before_heap=${result[$k.before.heap]} settled_heap=${result[$k.settled.heap]}
			case "$row" in
			"RSS before (MiB)") v="$(mib "$before_rss" 1024)" ;;
			"RSS all created (MiB)") v="$(mib "${result[$k.created.rss]}" 1024)" ;;
			"RSS settled (MiB)") v="$(mib "$settled_rss" 1024)" ;;
			"RSS delta, settled (MiB)") v="$(mib "$((settled_rss - before_rss))" 1024)" ;;
			"RSS bytes per watcher") v="$(mib "$(((settled_rss - before_rss) * 1024))" "$WATCHERS")" ;;
			"heap in use before (MiB)") v="$(mib "$before_heap" 1048576)" ;;
			"heap in use settled (MiB)") v="$(mib "$settled_heap" 1048576)" ;;
			"heap bytes per watcher") v="$(mib "$((settled_heap - before_heap))" "$WATCHERS")" ;;
			"goroutines before/settled") v="${result[$k.before.goroutines]}/${result[$k.settled.goroutines]}" ;;
			"create time (s)") v="${result[$k.create_s]}" ;;
			esac
			printf '  %14s' "$v"
		done
		echo
	done
done
