#!/usr/bin/env bash
# Execution trace of the one-writer put path (benchmark put --conns 1
# --clients 1), MetaStore and etcd 3.6.16 side by side.
#
# For each target: start it (MEMBERS members, --enable-pprof), keep one
# client putting on the leader (--target-leader), and after a warm-up take
# a TRACE_SECONDS execution trace of the leader (/debug/pprof/trace) while
# counting the puts applied (the revision before and after) and the CPU
# the members used (/proc/PID/stat). Per target it prints:
#   puts/s             puts applied during the trace, per second
#   wakeups/put        goroutine wake-ups in the leader (trace transitions
#                      Waiting -> Runnable) per put
#   leader CPU/put     utime+stime of the leader per put (µs)
#   members CPU/put    the same summed over every member (µs)
# and keeps the trace in $OUT/TARGET-MEMBERS-rROUND.trace for `go tool
# trace` (e.g. `go tool trace -pprof=sched FILE > sched.pb`), with
# bench/tracehops's summary of it next to it (.hops.txt: wake-ups by
# waker and woken goroutine, running time, system calls, per put). For
# the time between two points of a put's path see bench/tracehops -marks.
# PROFILE_SECONDS=N also takes an N-second CPU profile of the leader
# afterwards, under the same load (.cpu.pb.gz).
#
# BASELINE=PATH adds a target "baseline" run from that binary (another
# build of MetaStore, with METASTORE_FLAGS too) to compare two builds in
# one run.
#
# Environment: TARGETS="metastore etcd" (with BASELINE: "metastore
# baseline etcd"), MEMBERS=1, ROUNDS=1 (rounds
# alternate the order), TRACE_SECONDS=2, WARMUP_SECONDS=2, OUT=bench/out/trace,
# METASTORE_FLAGS (e.g. --storage-engine=rocksdb), VAL_SIZE=256.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -n "${BASELINE:-}" ]]; then
	TARGETS="${TARGETS:-metastore baseline etcd}"
else
	TARGETS="${TARGETS:-metastore etcd}"
fi
MEMBERS="${MEMBERS:-1}"
ROUNDS="${ROUNDS:-1}"
TRACE_SECONDS="${TRACE_SECONDS:-2}"
WARMUP_SECONDS="${WARMUP_SECONDS:-2}"
OUT="${OUT:-$root/bench/out/trace}"
VAL_SIZE="${VAL_SIZE:-256}"
GO="${GO:-go}"

log() { echo "trace: $*" >&2; }
die() {
	log "$*"
	exit 1
}

work="$(mktemp -d "${TMPDIR:-/tmp}/metastore-trace.XXXXXX")"
members=$MEMBERS
# shellcheck source=bench/servers.sh
source "$root/bench/servers.sh"
trap cleanup EXIT
if [[ -n "${BASELINE:-}" ]]; then
	binary[baseline]="$BASELINE"
	server_flags[baseline]="${METASTORE_FLAGS:-}"
fi
check_targets
[[ -x "$benchmark" ]] || die "reference benchmark tool missing: run make tools"
mkdir -p "$OUT"
for t in $TARGETS; do server_flags[$t]="${server_flags[$t]:-} --enable-pprof"; done

# revision TARGET: the store's current revision, read from member 0.
revision() {
	"$etcdctl" --endpoints="$(endpoint "$1")" --command-timeout=5s get nothing -w json |
		sed -n 's/.*"revision":\([0-9]*\).*/\1/p'
}

# leader_index TARGET: the index of the member that leads.
leader_index() {
	local i st
	for ((i = 0; i < ${size[$1]}; i++)); do
		st="$("$etcdctl" --endpoints="$(endpoint "$1" "$i")" --command-timeout=5s endpoint status -w json)"
		[[ "$(grep -o '"member_id":[0-9]*' <<<"$st" | cut -d: -f2)" == "$(grep -o '"leader":[0-9]*' <<<"$st" | cut -d: -f2)" ]] &&
			{ echo "$i"; return; }
	done
	die "$1: no leader"
}

# ticks_of PID: utime+stime of one process, in clock ticks.
ticks_of() { sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }

hz="$(getconf CLK_TCK)"
tracehops="$work/tracehops"
(cd "$root" && "$GO" build -o "$tracehops" ./bench/tracehops) || die "build bench/tracehops"

# wakeups FILE: goroutine transitions to Runnable from Waiting in a trace.
wakeups() {
	"$GO" tool trace -d=parsed "$1" 2>/dev/null | grep -c 'Waiting->Runnable' || true
}

trace_one() {
	local target=$1 round=$2
	start_server "$target"
	wait_ready "$target"
	local li lp
	li="$(leader_index "$target")"
	read -r -a pids <<<"${pid[$target]}"
	lp="${pids[$li]}"
	"$benchmark" --endpoints="$(endpoints "$target")" --target-leader --conns=1 --clients=1 \
		put --total=100000000 --key-size=8 --val-size="$VAL_SIZE" >/dev/null 2>&1 &
	local bench_pid=$!
	sleep "$WARMUP_SECONDS"
	local r0 r1 c0 c1 l0 l1 p t0 t1
	r0="$(revision "$target")"
	c0=0
	for p in "${pids[@]}"; do c0=$((c0 + $(ticks_of "$p"))); done
	l0="$(ticks_of "$lp")"
	t0="$(date +%s%N)"
	local file="$OUT/$target-$MEMBERS-r$round.trace"
	curl -sf -o "$file" "http://$(endpoint "$target" "$li")/debug/pprof/trace?seconds=$TRACE_SECONDS" ||
		die "$target: trace failed"
	t1="$(date +%s%N)"
	l1="$(ticks_of "$lp")"
	c1=0
	for p in "${pids[@]}"; do c1=$((c1 + $(ticks_of "$p"))); done
	r1="$(revision "$target")"
	if [[ -n "${PROFILE_SECONDS:-}" ]]; then
		curl -sf -o "$OUT/$target-$MEMBERS-r$round.cpu.pb.gz" \
			"http://$(endpoint "$target" "$li")/debug/pprof/profile?seconds=$PROFILE_SECONDS" || die "$target: profile failed"
	fi
	kill "$bench_pid" 2>/dev/null || true
	wait "$bench_pid" 2>/dev/null || true
	stop_server "$target"
	local puts=$((r1 - r0)) w
	((puts > 0)) || die "$target: no puts during the trace"
	w="$(wakeups "$file")"
	"$GO" tool trace -d=parsed "$file" 2>/dev/null | "$tracehops" -requests="$puts" -top=15 >"${file%.trace}.hops.txt" ||
		die "$target: tracehops failed"
	awk -v t="$target" -v m="$MEMBERS" -v n="$puts" -v w="$w" -v ns=$((t1 - t0)) -v l=$((l1 - l0)) -v c=$((c1 - c0)) -v hz="$hz" \
		-v load="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
		printf "%-10s members=%d puts/s=%.0f wakeups/put=%.2f leaderCPU/put=%.0fus membersCPU/put=%.0fus load=%s\n",
			t, m, n / (ns / 1e9), w / n, l / hz / n * 1e6, c / hz / n * 1e6, load }'
}

for ((round = 1; round <= ROUNDS; round++)); do
	order=($TARGETS)
	if ((round % 2 == 0)); then
		order=()
		for t in $TARGETS; do order=("$t" "${order[@]}"); done
	fi
	for t in "${order[@]}"; do trace_one "$t" "$round"; done
done
