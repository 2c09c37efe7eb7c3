#!/usr/bin/env bash
# Storage engines side by side (the footprint run): MetaStore on its
# memory engine, MetaStore on its RocksDB engine, and the reference etcd
# 3.6, each loaded with the same data set (by default 1,000,000 keys of 64
# bytes with 256-byte values).
#
# For each target, one at a time (so that they do not compete for the
# machine): start a single-member server on a fresh data dir; load the keys
# (put req/s); read RSS; run random linearizable Gets (range req/s) and
# read RSS again (caches filled by reads); with REWRITE=1 put every key
# once more (so that each has an old revision); with COMPACT=1 compact
# every old revision while concurrent writers measure their put latency;
# read the peak RSS (VmHWM); stop it with SIGTERM and measure the data
# dir; start it again and time how long it takes to answer a linearizable
# read of the last key loaded (restart-to-first-read, counted from the
# exec); read RSS again. Then print one table with each MetaStore
# engine's ratio to etcd. A target whose load fails (etcd past its quota,
# say) is reported with the keys it took before it stopped. The client
# side is bench/engines (a small Go program); this script only starts,
# stops and measures processes. bench/scale.sh runs it at 10,000,000 keys.
#
# Environment knobs:
#   BENCH_SCALE=small              quick run: 20,000 keys, 5,000 gets
#   TARGETS="memory rocksdb etcd"  which servers to run, in this order
#   KEYS=1000000 KEY_SIZE=64 VAL_SIZE=256   the data set
#   CLIENTS=256 CONNS=16           concurrent requests and gRPC connections
#   RANGE_TOTAL=100000             Gets in the range measurement
#   REWRITE=""                     1: put every key a second time
#   COMPACT=""                     1: compact all old revisions under a put
#                                  load of COMPACT_CLIENTS writers (16),
#                                  measured for COMPACT_BASELINE seconds (5)
#                                  before the compaction starts
#   STEP_TIMEOUT=300               seconds any one step may take
#   METASTORE_FLAGS=""             extra flags for both MetaStore targets
#                                  (e.g. --rocksdb-block-cache-bytes=67108864)
#   ETCD_FLAGS=""                  extra flags for etcd (e.g. --quota-backend-bytes)
#   RESULTS=FILE CONFIG=footprint  also append the figures to FILE (bench/table's
#                                  lines, with CONFIG as their config)
#   KEEP=1                         keep the work directory (logs, data)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ "${BENCH_SCALE:-}" == small ]]; then
	: "${KEYS:=20000}" "${RANGE_TOTAL:=5000}"
fi
TARGETS="${TARGETS:-memory rocksdb etcd}"
KEYS="${KEYS:-1000000}"
KEY_SIZE="${KEY_SIZE:-64}"
VAL_SIZE="${VAL_SIZE:-256}"
CLIENTS="${CLIENTS:-256}"
CONNS="${CONNS:-16}"
RANGE_TOTAL="${RANGE_TOTAL:-100000}"
REWRITE="${REWRITE:-}"
COMPACT="${COMPACT:-}"
COMPACT_CLIENTS="${COMPACT_CLIENTS:-16}"
COMPACT_BASELINE="${COMPACT_BASELINE:-5}"
STEP_TIMEOUT="${STEP_TIMEOUT:-300}"
METASTORE_FLAGS="${METASTORE_FLAGS:-}"
ETCD_FLAGS="${ETCD_FLAGS:-}"
RESULTS="${RESULTS:-}"
CONFIG="${CONFIG:-footprint}"
KEEP="${KEEP:-}"
GO="${GO:-go}"

log() { echo "engines: $*" >&2; }
die() { log "$*"; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/metastore-engines.XXXXXX")"
name_prefix=engines
stop_timeout=$STEP_TIMEOUT
# shellcheck source=bench/servers.sh
source "$root/bench/servers.sh"
trap cleanup EXIT
binary[memory]="${binary[metastore]}" server_flags[memory]="--storage-engine=memory"
binary[rocksdb]="${binary[metastore]}" server_flags[rocksdb]="--storage-engine=rocksdb"
server_flags[etcd]="$ETCD_FLAGS"
check_targets
# shellcheck source=bench/results.sh
source "$root/bench/results.sh"
build_table
raw="$work/raw.txt"
: >"$raw"

loader="$work/engines"
(cd "$root" && "$GO" build -o "$loader" ./bench/engines) || die "cannot build the loader (bench/engines)"
# client TARGET SUBCOMMAND ARGS...: the loader against TARGET.
client() {
	local target=$1
	shift
	timeout "$STEP_TIMEOUT" "$loader" "$@" -endpoint="$(endpoint "$target")" -keys="$KEYS" \
		-key-size="$KEY_SIZE" -value-size="$VAL_SIZE" -clients="$CLIENTS" -conns="$CONNS" \
		-timeout="${STEP_TIMEOUT}s"
}

# value KEY OUTPUT: the value of KEY=... in the loader's output.
value() { sed -n "s/^$1=//p" <<<"$2"; }
# note TARGET METRIC VALUE: one figure.
note() { add_value 1 "$1" - "$2" "$3"; }
# note_all TARGET OUTPUT METRIC...: the loader's figures of those names.
note_all() {
	local target=$1 out=$2 metric
	shift 2
	for metric in "$@"; do note "$target" "$metric" "$(value "$metric" "$out")"; done
}
mib() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }
disk_mib() { du -sm "$work/$1.data" | cut -f1; }

# stopped TARGET PUTS: the load failed after PUTS successful puts.
stopped() {
	log "$1: the load stopped after ${2:-0} puts; log: $work/$1.log"
	note "$1" stopped_at_keys "${2:-0}"
	note "$1" keys_loaded "${2:-0}"
}

# fill TARGET: load (and rewrite, compact); false if the load stopped
# early, with the keys it took noted.
fill() {
	local target=$1 out
	log "$target: load $KEYS keys"
	if ! out="$(client "$target" load)"; then
		stopped "$target" "$(value keys_loaded "$out")"
		return 1
	fi
	note_all "$target" "$out" put_rps keys_loaded
	note "$target" rss_load_mib "$(mib "$(rss_kib "$target")")"
	[[ -z "$COMPACT$REWRITE" ]] || note "$target" disk_load_mib "$(disk_mib "$target")"
	log "$target: $RANGE_TOTAL random linearizable gets"
	out="$(client "$target" range -total="$RANGE_TOTAL")" || die "$target: range failed; log: $work/$target.log"
	note_all "$target" "$out" range_rps
	note "$target" rss_range_mib "$(mib "$(rss_kib "$target")")"
	if [[ -n "$REWRITE" ]]; then
		log "$target: rewrite $KEYS keys"
		if ! out="$(client "$target" load)"; then
			stopped "$target" "$((KEYS + $(value keys_loaded "$out")))"
			return 1
		fi
		note "$target" rewrite_rps "$(value put_rps "$out")"
	fi
	if [[ -n "$COMPACT" ]]; then
		log "$target: compact all old revisions under $COMPACT_CLIENTS writers"
		out="$(CLIENTS=$COMPACT_CLIENTS client "$target" compact -baseline="${COMPACT_BASELINE}s")" ||
			die "$target: compaction under load failed; log: $work/$target.log"
		note_all "$target" "$out" compact_s base_put_p99_ms compact_put_p99_ms compact_put_max_ms compact_put_rps
	fi
}

for target in $TARGETS; do
	log "$target: start"
	start_server "$target"
	client "$target" first-read -since="${launched_at[$target]}" -expect-key=false >/dev/null ||
		die "$target did not start; log: $work/$target.log"
	filled=1
	fill "$target" || filled=""
	note "$target" peak_rss_mib "$(mib "$(peak_rss_kib "$target")")"
	log "$target: stop"
	stop_server "$target"
	note "$target" disk_mib "$(disk_mib "$target")"
	if [[ -n "$filled" ]]; then
		log "$target: restart"
		launch_server "$target"
		out="$(client "$target" first-read -since="${launched_at[$target]}")" ||
			die "$target: no read after restart; log: $work/$target.log"
		note_all "$target" "$out" first_read_ms
		note "$target" rss_restart_mib "$(mib "$(rss_kib "$target")")"
		stop_server "$target"
	fi
	rm -rf "$work/$target.data"
done

echo
echo "keys=$KEYS key-size=$KEY_SIZE val-size=$VAL_SIZE clients=$CLIENTS conns=$CONNS range-gets=$RANGE_TOTAL" \
	"${REWRITE:+rewrite }${COMPACT:+compact-clients=$COMPACT_CLIENTS}"
"$table" engines "$raw"
[[ -z "$RESULTS" ]] || awk -v c="$CONFIG" '{ print c "\t" $0 }' "$raw" >>"$RESULTS"
