# shellcheck shell=bash disable=SC2154
# Running etcd's benchmark tool and recording its results, shared by the
# bench scripts (sourced, not run). The sourcing script sets benchmark
# (the tool; bench/servers.sh sets it), work, raw (the file measurements
# are appended to) and GO, and defines log and die.
#
# Measurements are lines of "round target workload metric value",
# tab-separated; bench/table (built by build_table into $table) turns
# them into medians, ratios and markdown tables. Metrics: rps (requests
# per second), p99_ms and avg_ms (latency), cpu_us (server CPU per
# request, microseconds), peak_rss_mib (peak resident memory).

# build_table: builds bench/table into $work/table and sets table.
build_table() {
	table="$work/table"
	(cd "$(dirname "${BASH_SOURCE[0]}")/.." && "${GO:-go}" build -o "$table" ./bench/table) ||
		die "cannot build bench/table"
}

# run_benchmark TARGET WORKLOAD OUT ARGS...: runs the tool with ARGS,
# output in OUT (its progress bar, on stderr, in OUT.stderr); reports
# failed requests.
run_benchmark() {
	local target=$1 workload=$2 out=$3
	shift 3
	log "$target: $workload"
	"$benchmark" "$@" >"$out" 2>"$out.stderr" ||
		die "benchmark $workload against $target failed; see $out"
	if grep -q '^Error distribution' "$out"; then
		log "$target $workload: some requests failed:"
		sed -n '/^Error distribution/,$p' "$out" >&2
	fi
}

# add_value ROUND TARGET WORKLOAD METRIC VALUE: one line into $raw.
add_value() {
	[[ -n "$5" ]] || die "$2 $3: no $4 in the tool's output"
	printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$raw"
}

# record_rate ROUND TARGET ROW SUMMARY: the req/s of one of the tool's
# summaries (a file holding that summary first).
record_rate() {
	add_value "$1" "$2" "$3" rps "$(awk '/Requests\/sec:/ { print $2; exit }' "$4")"
}

# record ROUND TARGET ROW SUMMARY: req/s, p99 and average latency (ms) of
# one of the tool's summaries.
record() {
	record_rate "$@"
	add_value "$1" "$2" "$3" p99_ms "$(awk '$1 == "99%" && $2 == "in" { print $3 * 1000; exit }' "$4")"
	add_value "$1" "$2" "$3" avg_ms "$(awk '$1 == "Average:" { print $2 * 1000; exit }' "$4")"
}

# record_usage ROUND TARGET ROW CPU_TICKS REQUESTS PEAK_KIB: server CPU per
# request (µs) and peak RSS (MiB).
record_usage() {
	local hz
	hz="$(getconf CLK_TCK)"
	add_value "$1" "$2" "$3" cpu_us "$(awk -v t="$4" -v n="$5" -v hz="$hz" 'BEGIN { printf "%.2f", t * 1e6 / hz / n }')"
	add_value "$1" "$2" "$3" peak_rss_mib "$(awk -v k="$6" 'BEGIN { printf "%.1f", k / 1024 }')"
}
