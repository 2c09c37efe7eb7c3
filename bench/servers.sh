# shellcheck shell=bash disable=SC2154,SC2004
# Servers for the bench scripts (sourced, not run): pick loopback ports
# for, start, wait for, measure and stop one MetaStore or etcd per
# target, a single member or a cluster.
#
# The sourcing script sets work (its temporary directory) and defines log
# and die before sourcing; optionally it sets
#   KEEP                 keep $work at exit
#   METASTORE_FLAGS      extra flags for every server run from bin/metastore
#   name_prefix          member names are PREFIX-TARGET[-i] (default bench)
#   ready_timeout        seconds a start may take (default 30)
#   stop_timeout         seconds a stop may take (default 300)
#   members              size of the clusters start_server starts (default 1)
#   binary[T], server_flags[T]   the binary and extra flags of target T;
#                        metastore and etcd are known without them
# Then per target T: start_server T, wait_ready T, endpoint T, endpoints T,
# stop_server T. cleanup (for trap ... EXIT) stops whatever is left.
#
# A target of one member keeps its data in $work/T.data and logs to
# $work/T.log; member i of a cluster uses $work/T-i.data and $work/T-i.log.
# Member i listens on base+2i (clients) and base+2i+1 (peers), base picked
# free before the start (other benchmarks and test suites on the machine
# take loopback ports too, so fixed ports would collide).

bench_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
etcdctl="${etcdctl:-$bench_dir/../bin/ref/etcdctl}"
benchmark="${benchmark:-$bench_dir/../bin/ref/benchmark}"
name_prefix="${name_prefix:-bench}"
ready_timeout="${ready_timeout:-30}"
stop_timeout="${stop_timeout:-300}"
members="${members:-1}"

declare -A binary server_flags client_port peer_port pid size launched_at
: "${binary[metastore]:=$bench_dir/../bin/metastore}"
: "${binary[etcd]:=$bench_dir/../bin/ref/etcd}"

# shellcheck source=bench/ports.sh
source "$bench_dir/ports.sh"

# TLS=1 (compare.sh) serves the client URL over https with client
# certificate authentication, as kubeadm does; setup_tls fills these.
scheme=http
server_tls_flags=()
client_tls_flags=() # for etcdctl and the benchmark tool

# setup_tls: certificates in $work/pki (test/tlscerts), and the flags
# that make the servers, etcdctl and the benchmark tool use them.
setup_tls() {
	local pki="$work/pki"
	(cd "$bench_dir/.." && go run ./bench/tlscerts "$pki") || die "generate TLS certificates"
	scheme=https
	server_tls_flags=(--cert-file="$pki/member.crt" --key-file="$pki/member.key"
		--trusted-ca-file="$pki/e2e-ca.crt" --client-cert-auth)
	client_tls_flags=(--cacert="$pki/e2e-ca.crt" --cert="$pki/client.crt" --key="$pki/client.key")
}

cleanup() {
	local target p
	for target in "${!pid[@]}"; do
		for p in ${pid[$target]}; do kill "$p" 2>/dev/null || true; done
	done
	for target in "${!pid[@]}"; do
		for p in ${pid[$target]}; do wait "$p" 2>/dev/null || true; done
	done
	if [[ -n "${KEEP:-}" ]]; then
		log "logs and data kept in $work"
	else
		rm -rf "$work"
	fi
}

# check_targets: every target in TARGETS has a binary, and etcdctl is
# there.
check_targets() {
	local target
	for target in $TARGETS; do
		[[ -n "${binary[$target]:-}" ]] || die "unknown target '$target'"
		[[ -x "${binary[$target]}" ]] || die "${binary[$target]} missing: run make build tools"
	done
	[[ -x "$etcdctl" ]] || die "reference etcdctl missing: run make tools"
}

# member_file TARGET I SUFFIX: $work/T.SUFFIX for one member,
# $work/T-I.SUFFIX for member I of a cluster.
member_file() {
	if ((${size[$1]} == 1)); then echo "$work/$1.$3"; else echo "$work/$1-$2.$3"; fi
}
member_name() {
	if ((${size[$1]} == 1)); then echo "$name_prefix-$1"; else echo "$name_prefix-$1-$2"; fi
}

# endpoint TARGET [I]: host:port of member I's client URL (default 0).
endpoint() { echo "127.0.0.1:$((client_port[$1] + 2 * ${2:-0}))"; }

# endpoints TARGET: every member's host:port, comma-separated.
endpoints() {
	local list=() i
	for ((i = 0; i < ${size[$1]}; i++)); do list+=("$(endpoint "$1" "$i")"); done
	local IFS=,
	echo "${list[*]}"
}

# pick_ports TARGET: free ports for a cluster of $members members.
pick_ports() {
	local p
	p="$(free_ports $((2 * members)))" || die "no free loopback ports"
	size[$1]=$members
	client_port[$1]=$p
	peer_port[$1]=$((p + 1))
}

# start_server TARGET: picks its ports and starts its members in the
# background.
start_server() {
	pick_ports "$1"
	launch_server "$1"
}

# launch_server TARGET: starts its members in the background on the ports
# already picked (a restored or restarted data dir must be started with
# the peer URL it was created for); launched_at[TARGET] is the Unix time
# in nanoseconds just before the first exec.
launch_server() {
	local target=$1 i initial=() extra=() pids=()
	for ((i = 0; i < ${size[$target]}; i++)); do
		initial+=("$(member_name "$target" "$i")=http://127.0.0.1:$((peer_port[$target] + 2 * i))")
	done
	local IFS=,
	local initial_cluster="${initial[*]}"
	unset IFS
	[[ "${binary[$target]}" == "${binary[metastore]}" && -n "${METASTORE_FLAGS:-}" ]] &&
		read -r -a extra <<<"$METASTORE_FLAGS"
	local own=()
	[[ -n "${server_flags[$target]:-}" ]] && read -r -a own <<<"${server_flags[$target]}"
	# A cluster's token keeps its members from answering another's.
	local token=()
	((${size[$target]} > 1)) && token=(--initial-cluster-token="$name_prefix-$target")
	launched_at[$target]="$(date +%s%N)"
	for ((i = 0; i < ${size[$target]}; i++)); do
		local client peer
		client="$scheme://$(endpoint "$target" "$i")"
		peer="http://127.0.0.1:$((peer_port[$target] + 2 * i))"
		"${binary[$target]}" --name="$(member_name "$target" "$i")" \
			--data-dir="$(member_file "$target" "$i" data)" \
			--listen-client-urls="$client" --advertise-client-urls="$client" \
			--listen-peer-urls="$peer" --initial-advertise-peer-urls="$peer" \
			--initial-cluster="$initial_cluster" --initial-cluster-state=new \
			"${token[@]}" "${server_tls_flags[@]}" "${extra[@]}" "${own[@]}" >>"$(member_file "$target" "$i" log)" 2>&1 &
		pids+=($!)
	done
	pid[$target]="${pids[*]}"
}

# alive TARGET: every member is still running; dies naming the logs if not.
alive() {
	local p
	for p in ${pid[$1]}; do
		kill -0 "$p" 2>/dev/null || die "a $1 member exited; logs: $work/$1*.log"
	done
}

# poll_ready TARGET DEADLINE FAILURE CMD...: runs CMD until it succeeds,
# dying with FAILURE once DEADLINE (in $SECONDS) has passed or if a member
# of TARGET exited.
poll_ready() {
	local target=$1 deadline=$2 failure=$3
	shift 3
	until "$@"; do
		alive "$target"
		((SECONDS < deadline)) || die "$failure; logs: $work/$target*.log"
		sleep 0.2
	done
	alive "$target"
}

healthy() {
	"$etcdctl" --endpoints="$(endpoints "$1")" "${client_tls_flags[@]}" --command-timeout=2s \
		endpoint health >/dev/null 2>&1
}

# ours TARGET: member 0 of the cluster answering on TARGET's port has the
# name we gave it.
ours() {
	"$etcdctl" --endpoints="$(endpoint "$1")" "${client_tls_flags[@]}" --command-timeout=5s \
		member list 2>/dev/null | grep -q ", $(member_name "$1" 0), "
}

# wait_ready TARGET: until every member is healthy, then checks that the
# cluster answering on its ports is the one we started (a port taken by
# another process between pick_ports and the start would otherwise send
# the whole run to someone else's server). The second check is also
# asked again until the deadline: once, right after a 3-member etcd
# passed its health check, a single try failed and ended a whole `make
# bench-table` run (a timeout or an election right after the start; the
# work directory, and so the cause, was gone).
wait_ready() {
	local target=$1 deadline=$((SECONDS + ready_timeout))
	poll_ready "$target" "$deadline" "$target not healthy after ${ready_timeout}s" healthy "$target"
	poll_ready "$target" "$deadline" "$(endpoint "$target") is not our $target" ours "$target"
}

# stop_server TARGET: SIGTERM to every member, and wait until all exited.
stop_server() {
	local target=$1 p deadline=$((SECONDS + stop_timeout))
	for p in ${pid[$target]}; do kill -TERM "$p" 2>/dev/null || true; done
	for p in ${pid[$target]}; do
		while kill -0 "$p" 2>/dev/null; do
			((SECONDS < deadline)) || die "$target did not stop within ${stop_timeout}s"
			sleep 0.1
		done
		wait "$p" 2>/dev/null || true
	done
	unset "pid[$target]"
}

# proc_sum TARGET FIELD: the sum over the members of FIELD (kB) of
# /proc/PID/status; dies if a member is gone (which also catches a
# server that lost its port to another one).
proc_sum() {
	local p total=0 v
	for p in ${pid[$1]}; do
		v="$(awk -v f="$2:" '$1 == f { print $2 }' "/proc/$p/status" 2>/dev/null)" ||
			die "$1 exited; logs: $work/$1*.log"
		[[ -n "$v" ]] || die "$1 exited; logs: $work/$1*.log"
		total=$((total + v))
	done
	echo "$total"
}

# rss_kib TARGET: resident memory now (VmRSS), summed over the members.
rss_kib() { proc_sum "$1" VmRSS; }

# peak_rss_kib TARGET: peak resident memory (VmHWM) since the start or the
# last reset_peak_rss, summed over the members.
peak_rss_kib() { proc_sum "$1" VmHWM; }

# reset_peak_rss TARGET: VmHWM starts again from the current RSS
# (Linux: writing 5 to /proc/PID/clear_refs).
reset_peak_rss() {
	local p
	for p in ${pid[$1]}; do echo 5 >"/proc/$p/clear_refs" || die "cannot reset the peak RSS of $1"; done
}

# cpu_ticks TARGET: user plus system CPU time used so far, in clock ticks
# (getconf CLK_TCK per second), summed over the members.
cpu_ticks() {
	local p total=0 v
	for p in ${pid[$1]}; do
		# Fields after "pid (comm) ": state is the 1st, utime the 12th, stime the 13th.
		v="$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null | awk '{ print $12 + $13 }')"
		[[ -n "$v" ]] || die "$1 exited; logs: $work/$1*.log"
		total=$((total + v))
	done
	echo "$total"
}
