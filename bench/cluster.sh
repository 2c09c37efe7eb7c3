#!/usr/bin/env bash
# Three-member benchmark of MetaStore and the reference etcd 3.6: the
# workloads of bench/compare.sh, with the tool's connections spread over
# every member of each cluster. Writes sent to followers are forwarded to
# the leader and linearizable reads on followers take a ReadIndex round,
# so this measures the replicated path that a single member does not.
# Every knob of bench/compare.sh applies (MEMBERS excepted).
set -euo pipefail
MEMBERS=3 exec "$(dirname "${BASH_SOURCE[0]}")/compare.sh" "$@"
