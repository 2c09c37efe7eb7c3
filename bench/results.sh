# shellcheck shell=bash disable=SC2154
# Running etcd's benchmark tool and tabulating its results, shared by
# compare.sh (single members) and cluster.sh (3-member clusters); sourced,
# not run. The sourcing script sets benchmark (the tool), TARGETS and the
# associative arrays rps and p99, and defines log and die.

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

# record ROW TARGET SUMMARY: req/s and p99 (ms) of one of the tool's
# summaries (a file holding that summary first) into rps and p99.
record() {
	rps[$2.$1]="$(awk '/Requests\/sec:/ { printf "%.0f", $2; exit }' "$3")"
	p99[$2.$1]="$(awk '$1 == "99%" && $2 == "in" { printf "%.2f", $3 * 1000; exit }' "$3")"
}

# print_table ROW...: req/s and p99 of every target for each row; with
# both targets, the last column is MetaStore's throughput relative to
# etcd's.
print_table() {
	local both="" row target
	[[ " $TARGETS " == *" metastore "* && " $TARGETS " == *" etcd "* ]] && both=1
	printf '%-20s' workload
	for target in $TARGETS; do
		printf '  %14s  %12s' "$target req/s" "p99 ms"
	done
	[[ -n "$both" ]] && printf '  %16s' "metastore/etcd"
	echo
	for row in "$@"; do
		printf '%-20s' "$row"
		for target in $TARGETS; do
			printf '  %14s  %12s' "${rps[$target.$row]:-?}" "${p99[$target.$row]:-?}"
		done
		if [[ -n "$both" ]]; then
			printf '  %16s' "$(awk -v m="${rps[metastore.$row]:-0}" -v e="${rps[etcd.$row]:-0}" \
				'BEGIN { if (e > 0) printf "%.2fx", m / e; else print "?" }')"
		fi
		echo
	done
}
