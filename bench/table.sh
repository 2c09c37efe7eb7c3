#!/usr/bin/env bash
# The full performance table of MetaStore against etcd 3.6 (`make bench`):
#
#   1. bench/compare.sh once per config - 1 and 3 members, memory and
#      RocksDB engine: every workload against MetaStore and etcd in turn,
#      ROUNDS rounds with the order alternated; req/s, p99, average
#      latency, server CPU per request and peak RSS;
#   2. bench/engines.sh, the footprint run (1,000,000 keys of 64 B with
#      256 B values, one member: RSS, data dir, restart-to-first-read,
#      both engines and etcd);
#   3. bench/scale.sh, the scale run (10,000,000 keys into the RocksDB
#      engine and etcd with a raised quota; load rate, RSS, data dir,
#      restart-to-first-read, put p99 while all old revisions are
#      compacted).
# Every figure goes to OUT/results.tsv (bench/table's lines); at the end
# bench/table writes OUT/table.md - the headline table (MetaStore ÷ etcd,
# medians: req/s · p99 · server CPU per request per workload and config,
# and the range of peak-RSS ratios), the footprint and scale tables, and
# each config's medians - and prints it.
#
# Environment knobs (and those of the three scripts, passed through):
#   BENCH_SCALE=small   quick run of everything (minutes, not hours): fewer
#                       requests, watchers and keys; for checking the scripts
#   CONFIGS="1:memory 3:memory 1:rocksdb 3:rocksdb"   members:engine per column
#   PARTS="compare footprint scale"                   which runs to do
#   OUT=bench/out                                     where results go
#   METASTORE_FLAGS=""  extra flags for bin/metastore (after --storage-engine)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONFIGS="${CONFIGS:-1:memory 3:memory 1:rocksdb 3:rocksdb}"
PARTS="${PARTS:-compare footprint scale}"
OUT="${OUT:-$root/bench/out}"
METASTORE_FLAGS="${METASTORE_FLAGS:-}"
GO="${GO:-go}"

log() { echo "table: $*" >&2; }
die() { log "$*"; exit 1; }

mkdir -p "$OUT"
results="$OUT/results.tsv"
: >"$results"
tool="$OUT/table"
(cd "$root" && "$GO" build -o "$tool" ./bench/table) || die "cannot build bench/table"

for part in $PARTS; do
	case "$part" in
	compare)
		for config in $CONFIGS; do
			members=${config%%:*} engine=${config#*:}
			label="$members member$([[ $members == 1 ]] || echo s), $engine"
			log "$label"
			MEMBERS=$members CONFIG="$label" RESULTS="$results" \
				METASTORE_FLAGS="--storage-engine=$engine $METASTORE_FLAGS" "$root/bench/compare.sh"
		done
		;;
	footprint)
		log "footprint"
		RESULTS="$results" "$root/bench/engines.sh"
		;;
	scale)
		log "scale"
		RESULTS="$results" "$root/bench/scale.sh"
		;;
	*) die "unknown part '$part' (want compare, footprint and/or scale)" ;;
	esac
done

{
	echo "# MetaStore vs etcd 3.6 ($(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs${BENCH_SCALE:+, BENCH_SCALE=$BENCH_SCALE})"
	echo
	"$tool" summary "$results"
} >"$OUT/table.md"
echo
cat "$OUT/table.md"
log "written to $OUT/table.md (figures: $results)"
