#!/usr/bin/env bash
# Large data, beyond etcd's reach: bench/engines.sh at 10,000,000 keys (64 B
# keys, 256 B values) into MetaStore's RocksDB engine and a single etcd 3.6
# member in turn. Reports the load rate, RSS, the data-dir size, the
# restart-to-first-read time, and the put p99 and slowest put of a
# concurrent put load while a compaction of all old revisions runs (every
# key is rewritten once first, so that there are KEYS old revisions to
# compact), with MetaStore's ratio to etcd.
#
# etcd recommends at most 8 GB of data: both servers run with
# --quota-backend-bytes raised to ETCD_QUOTA_BYTES (64 GiB by default;
# MetaStore enforces etcd's 2 GiB default quota too, and its RocksDB
# engine stopped a first run at 7.5 million keys with "database space
# exceeded"); if a server still cannot hold the data set, the table says
# after how many keys it stopped.
#
# Environment knobs: those of bench/engines.sh, with these defaults:
#   BENCH_SCALE=small        quick run: 50,000 keys
#   KEYS=10000000 TARGETS="rocksdb etcd" REWRITE=1 COMPACT=1 CONFIG=scale
#   STEP_TIMEOUT=7200        seconds any one step may take
#   ETCD_QUOTA_BYTES=68719476736
set -euo pipefail
if [[ "${BENCH_SCALE:-}" == small ]]; then
	: "${KEYS:=50000}"
fi
export KEYS="${KEYS:-10000000}"
export TARGETS="${TARGETS:-rocksdb etcd}"
export REWRITE="${REWRITE:-1}" COMPACT="${COMPACT:-1}" CONFIG="${CONFIG:-scale}"
export STEP_TIMEOUT="${STEP_TIMEOUT:-7200}"
quota="--quota-backend-bytes=${ETCD_QUOTA_BYTES:-68719476736}"
export ETCD_FLAGS="$quota ${ETCD_FLAGS:-}" METASTORE_FLAGS="$quota ${METASTORE_FLAGS:-}"
exec "$(dirname "${BASH_SOURCE[0]}")/engines.sh" "$@"
