#!/usr/bin/env bash
# CPU and allocation profiles of one MetaStore member under etcd's
# benchmark tool, one pair per workload (docs/performance.md, "How to
# profile"). The CPU per request next to etcd is bench/compare.sh's.
#
# Starts a single member with --enable-pprof and, for each workload, runs
# the tool while fetching a CPU profile of PROFILE_SECONDS from
# /debug/pprof/profile (OUT/WORKLOAD.cpu.pb.gz) and the allocations made
# meanwhile: the difference of two /debug/pprof/allocs snapshots taken
# before and after (OUT/WORKLOAD.allocs.pb.gz). Prints the top of each.
# Make the run outlast the profile (an idle tail adds no samples, a short
# run gives few). Read them with, e.g.:
#   go tool pprof -top -cum bin/metastore OUT/put.cpu.pb.gz
#   go tool pprof -sample_index=alloc_objects -top bin/metastore OUT/put.allocs.pb.gz
#
# Environment knobs:
#   OUT=bench/out/profiles     where the profiles go
#   WORKLOADS="put range-linearizable range-serializable txn-put"
#   CONNS=100 CLIENTS=1000     gRPC connections and concurrent clients
#   TOTAL=300000               requests per workload
#   KEY_SIZE=8 VAL_SIZE=256    put shape; the ranges read one such value
#   TXN_OPS=4                  puts per txn-put request
#   PROFILE_SECONDS=10         length of each CPU profile
#   METASTORE_FLAGS=""         extra flags (e.g. --storage-engine=rocksdb)
#   KEEP=1                     keep the work directory afterwards
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$root/bench/out/profiles}"
CONNS="${CONNS:-100}"
CLIENTS="${CLIENTS:-1000}"
TOTAL="${TOTAL:-300000}"
KEY_SIZE="${KEY_SIZE:-8}"
VAL_SIZE="${VAL_SIZE:-256}"
TXN_OPS="${TXN_OPS:-4}"
PROFILE_SECONDS="${PROFILE_SECONDS:-10}"
read -r -a workloads <<<"${WORKLOADS:-put range-linearizable range-serializable txn-put}"

log() { echo "profile: $*" >&2; }
die() {
	log "$*"
	exit 1
}

work="$(mktemp -d "${TMPDIR:-/tmp}/metastore-profile.XXXXXX")"
TARGETS=metastore
name_prefix=profile
# shellcheck source=bench/servers.sh
source "$root/bench/servers.sh"
trap cleanup EXIT
check_targets
[[ -x "$benchmark" ]] || die "reference benchmark tool missing: run make tools"
server_flags[metastore]=--enable-pprof
mkdir -p "$OUT"

# workload_args WORKLOAD: the tool's arguments after the global ones.
workload_args() {
	case "$1" in
	put) echo put --total="$TOTAL" --key-size="$KEY_SIZE" --val-size="$VAL_SIZE" ;;
	range-linearizable) echo range foo --total="$TOTAL" --consistency=l ;;
	range-serializable) echo range foo --total="$TOTAL" --consistency=s ;;
	txn-put) echo txn-put --total="$TOTAL" --txn-ops="$TXN_OPS" --key-size="$KEY_SIZE" --val-size="$VAL_SIZE" \
		--key-space-size="$TXN_OPS" ;;
	*) die "unknown workload '$1'" ;;
	esac
}

# profile WORKLOAD: one run of the tool with both profiles taken.
profile() {
	local workload=$1 url args out="$work/$1.txt"
	url="http://$(endpoint metastore)/debug/pprof"
	read -r -a args <<<"$(workload_args "$workload")"
	curl -fsS -o "$work/allocs.before" "$url/allocs" || die "allocs profile"
	curl -fsS -o "$OUT/$workload.cpu.pb.gz" "$url/profile?seconds=$PROFILE_SECONDS" &
	local curl_pid=$!
	log "$workload"
	"$benchmark" --endpoints="$(endpoint metastore)" --conns="$CONNS" --clients="$CLIENTS" "${args[@]}" \
		>"$out" 2>"$out.stderr" || die "benchmark $workload failed; see $out"
	wait "$curl_pid" || die "cpu profile"
	curl -fsS -o "$work/allocs.after" "$url/allocs" || die "allocs profile"
	go tool pprof -proto -output "$OUT/$workload.allocs.pb.gz" \
		-base "$work/allocs.before" "$work/allocs.after" 2>/dev/null || die "allocs difference"
	echo "== $workload: $(awk '/Requests\/sec:/ { printf "%.0f req/s", $2 }' "$out")"
	go tool pprof -top -cum -nodecount=25 "${binary[metastore]}" "$OUT/$workload.cpu.pb.gz" 2>/dev/null | sed -n '4,32p'
}

start_server metastore
wait_ready metastore
"$etcdctl" --endpoints="$(endpoint metastore)" put foo "$(head -c "$VAL_SIZE" /dev/zero | tr '\0' v)" >/dev/null
for workload in "${workloads[@]}"; do
	profile "$workload"
done
log "profiles in $OUT"
