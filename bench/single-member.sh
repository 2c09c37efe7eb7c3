# shellcheck shell=bash disable=SC2154,SC2004
# Shared by compare.sh, coordination.sh, watchmem.sh and leaseexpiry.sh
# (sourced, not run): pick ports for, start and wait for one
# single-member server per target. The sourcing script sets, before
# calling these:
#   work, KEEP, METASTORE_FLAGS, etcdctl, ready_timeout, name_prefix,
#   and the associative arrays binary, client_port, peer_port, pid;
# and defines log and die.

# shellcheck source=bench/ports.sh
source "$(dirname "${BASH_SOURCE[0]}")/ports.sh"

# TLS=1 (compare.sh) serves the client URL over https with client
# certificate authentication, as kubeadm does; setup_tls fills these.
scheme=http
server_tls_flags=()
client_tls_flags=() # for etcdctl and the benchmark tool

# setup_tls: certificates in $work/pki (bench/tlscerts), and the flags
# that make both servers, etcdctl and the benchmark tool use them.
setup_tls() {
	local pki="$work/pki"
	(cd "$(dirname "${BASH_SOURCE[0]}")/.." && go run ./bench/tlscerts "$pki") || die "generate TLS certificates"
	scheme=https
	server_tls_flags=(--cert-file="$pki/member.crt" --key-file="$pki/member.key"
		--trusted-ca-file="$pki/e2e-ca.crt" --client-cert-auth)
	client_tls_flags=(--cacert="$pki/e2e-ca.crt" --cert="$pki/client.crt" --key="$pki/client.key")
}

cleanup() {
	for target in "${!pid[@]}"; do
		kill "${pid[$target]}" 2>/dev/null || true
		wait "${pid[$target]}" 2>/dev/null || true
	done
	if [[ -n "$KEEP" ]]; then
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
		[[ -n "${binary[$target]:-}" ]] || die "unknown target '$target' (want metastore and/or etcd)"
		[[ -x "${binary[$target]}" ]] || die "${binary[$target]} missing: run make build tools"
	done
	[[ -x "$etcdctl" ]] || die "reference etcdctl missing: run make tools"
}

endpoint() { echo "127.0.0.1:${client_port[$1]}"; }

# pick_ports TARGET: free client and peer ports for its server.
pick_ports() {
	local p
	p="$(free_ports 2)" || die "no free loopback ports"
	client_port[$1]=$p
	peer_port[$1]=$((p + 1))
}

# start_server TARGET: picks its ports and starts it in the background.
start_server() {
	pick_ports "$1"
	launch_server "$1"
}

# launch_server TARGET: starts it in the background on the ports already
# picked (a restored data dir must be started with the peer URL it was
# restored for).
launch_server() {
	local target=$1 name="$name_prefix-$1" client peer
	client="$scheme://$(endpoint "$target")"
	peer="http://127.0.0.1:${peer_port[$target]}"
	local extra=()
	if [[ "$target" == metastore && -n "$METASTORE_FLAGS" ]]; then
		read -r -a extra <<<"$METASTORE_FLAGS"
	fi
	"${binary[$target]}" --name="$name" --data-dir="$work/$target.data" \
		--listen-client-urls="$client" --advertise-client-urls="$client" \
		--listen-peer-urls="$peer" --initial-advertise-peer-urls="$peer" \
		--initial-cluster="$name=$peer" --initial-cluster-state=new \
		"${server_tls_flags[@]}" "${extra[@]}" >"$work/$target.log" 2>&1 &
	pid[$target]=$!
}

# wait_ready TARGET: until it is healthy, then checks that the member
# answering on its port is the one we started (a port taken by another
# process between pick_ports and the start would otherwise send the whole
# run to someone else's server).
wait_ready() {
	local target=$1 deadline=$((SECONDS + ready_timeout))
	until "$etcdctl" --endpoints="$(endpoint "$target")" "${client_tls_flags[@]}" --command-timeout=2s \
		endpoint health >/dev/null 2>&1; do
		kill -0 "${pid[$target]}" 2>/dev/null || die "$target exited during start-up; log: $work/$target.log"
		((SECONDS < deadline)) || die "$target not healthy after ${ready_timeout}s; log: $work/$target.log"
		sleep 0.2
	done
	kill -0 "${pid[$target]}" 2>/dev/null || die "$target exited during start-up; log: $work/$target.log"
	"$etcdctl" --endpoints="$(endpoint "$target")" "${client_tls_flags[@]}" --command-timeout=5s member list 2>/dev/null |
		grep -q ", $name_prefix-$target, " || die "$(endpoint "$target") is not our $target; log: $work/$target.log"
}
