#!/usr/bin/env bash
# The migration walk-through of the README, timed: etcd -> MetaStore ->
# etcd with snapshot files, for a store of KEYS keys (1,000,000 by
# default).
#
#   1. load KEYS keys into a single-member etcd 3.6 (etcd's benchmark put;
#      not timed as part of the migration)
#   2. etcdctl snapshot save from etcd
#   3. metastore snapshot restore (ENGINE, rocksdb by default)
#   4. start MetaStore on it, until healthy
#   5. etcdctl snapshot save from MetaStore
#   6. etcdutl snapshot restore
#   7. start etcd on it, until healthy
# and checks that each server holds KEYS keys at the source's revision.
# Prints one line per step with its wall time, and the snapshot sizes.
#
# Environment knobs:
#   BENCH_SCALE=small                       quick run: KEYS=20000
#   KEYS=1000000 KEY_SIZE=32 VAL_SIZE=256   the data set
#   ENGINE=rocksdb                          MetaStore's storage engine
#   READY_TIMEOUT=600                       seconds a start may take
#   KEEP=1                                  keep the work directory
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ "${BENCH_SCALE:-}" == small ]]; then
	: "${KEYS:=20000}"
fi
KEYS="${KEYS:-1000000}"
KEY_SIZE="${KEY_SIZE:-32}"
VAL_SIZE="${VAL_SIZE:-256}"
ENGINE="${ENGINE:-rocksdb}"
KEEP="${KEEP:-}"
ready_timeout="${READY_TIMEOUT:-600}"
METASTORE_FLAGS="--storage-engine=$ENGINE"
TARGETS="metastore etcd"
name_prefix=migrate

log() { echo "migrate: $*" >&2; }
die() { log "$*"; exit 1; }

etcdutl="$root/bin/ref/etcdutl"
work="$(mktemp -d "${TMPDIR:-/tmp}/metastore-migrate.XXXXXX")"

# shellcheck source=bench/servers.sh
source "$root/bench/servers.sh"
trap cleanup EXIT
check_targets
[[ -x "$etcdutl" && -x "$benchmark" ]] || die "etcdutl or benchmark missing: run make tools"

# step NAME CMD...: runs CMD and prints its wall time.
step() {
	local name=$1 start ms
	shift
	start=${EPOCHREALTIME/./}
	"$@"
	ms=$(((${EPOCHREALTIME/./} - start) / 1000))
	printf '%-44s %6d.%01d s\n' "$name" $((ms / 1000)) $((ms % 1000 / 100))
}

# count TARGET: "keys revision" as the server reports them.
count() {
	local out
	out="$("$etcdctl" --endpoints="$(endpoint "$1")" --command-timeout=120s get "" --from-key --count-only -w fields)"
	[[ "$out" =~ \"Revision\"\ :\ ([0-9]+) ]] || die "no revision in $out"
	local rev=${BASH_REMATCH[1]}
	[[ "$out" =~ \"Count\"\ :\ ([0-9]+) ]] || die "no count in $out"
	echo "${BASH_REMATCH[1]} $rev"
}

# restore_for TARGET TOOL FILE: restores FILE into TARGET's data dir for
# the member launch_server starts.
restore_for() {
	local target=$1 tool=$2 file=$3 peer extra=()
	peer="http://127.0.0.1:${peer_port[$target]}"
	[[ "$target" == metastore ]] && extra=(--storage-engine="$ENGINE")
	"$tool" snapshot restore "$file" --data-dir="$work/$target.data" --name="$name_prefix-$target" \
		--initial-cluster="$name_prefix-$target=$peer" --initial-advertise-peer-urls="$peer" \
		"${extra[@]}" >"$work/restore-$target.log" 2>&1
}

save() { "$etcdctl" --endpoints="$(endpoint "$1")" snapshot save "$2" >"$work/save-$1.log" 2>&1; }
up() { launch_server "$1"; wait_ready "$1"; }

log "loading $KEYS keys into etcd (work dir $work)"
start_server etcd
wait_ready etcd
"$benchmark" --endpoints="$(endpoint etcd)" --clients=64 --conns=8 put \
	--total="$KEYS" --key-space-size="$KEYS" --sequential-keys --key-size="$KEY_SIZE" --val-size="$VAL_SIZE" \
	>"$work/load.log" 2>&1 || die "load failed; see $work/load.log"
read -r src_keys src_rev < <(count etcd)
log "etcd holds $src_keys keys at revision $src_rev"

echo "migration of $src_keys keys ($KEY_SIZE-byte keys, $VAL_SIZE-byte values), MetaStore on $ENGINE"
step "etcdctl snapshot save (etcd)" save etcd "$work/etcd.db"
stop_server etcd
rm -rf "$work/etcd.data"
pick_ports metastore
step "metastore snapshot restore" restore_for metastore "${binary[metastore]}" "$work/etcd.db"
step "metastore start until healthy" up metastore
read -r keys rev < <(count metastore)
[[ "$keys $rev" == "$src_keys $src_rev" ]] || die "MetaStore holds $keys keys at $rev, want $src_keys at $src_rev"
step "etcdctl snapshot save (MetaStore)" save metastore "$work/metastore.db"
stop_server metastore
pick_ports etcd
step "etcdutl snapshot restore" restore_for etcd "$etcdutl" "$work/metastore.db"
step "etcd start until healthy" up etcd
read -r keys rev < <(count etcd)
[[ "$keys $rev" == "$src_keys $src_rev" ]] || die "etcd holds $keys keys at $rev, want $src_keys at $src_rev"
printf '%-44s %8s\n' "snapshot from etcd" "$(du -h "$work/etcd.db" | cut -f1)"
printf '%-44s %8s\n' "snapshot from MetaStore" "$(du -h "$work/metastore.db" | cut -f1)"
echo "both servers hold $keys keys at revision $rev"
