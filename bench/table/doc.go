// Command table turns the measurements of the bench scripts into markdown
// tables: medians over rounds and MetaStore's ratio to etcd 3.6
// (MetaStore / etcd, so below 1 is better for latency, CPU and memory and
// above 1 is better for throughput). The scripts measure; this program
// only reads their lines and prints.
//
// Input: lines of tab-separated fields. bench/compare.sh writes, per run,
//
//	round  target  workload  metric  value
//
// and, with RESULTS set, appends them to a results file prefixed by a
// config column (for example "1 member, memory"). bench/engines.sh (the
// footprint run) and bench/scale.sh append lines whose config is
// "footprint" or "scale", workload "-" and round 1. For example:
//
//	1 member, memory	1	metastore	put	rps	41234
//	1 member, memory	1	etcd	put	p99_ms	31.2
//	footprint	1	rocksdb	-	disk_mib	180
//
// Metrics of compare.sh: rps, p99_ms, avg_ms, cpu_us (server CPU per
// request), peak_rss_mib. Metrics of engines.sh and scale.sh are listed in
// footprintRows.
//
// Subcommands:
//
//	compare FILE       one config's detail table (compare.sh's own output)
//	summary FILE       everything in a results file: the headline table (one
//	                   column per config, a row per workload with the ratios
//	                   of req/s, p99 and server CPU per request, and the
//	                   range of peak-RSS ratios), then the footprint and
//	                   scale tables, then each config's detail table
//	engines FILE       the footprint/scale table of engines.sh's lines
//
// The flags -clients, -txn-ops and -watchers only label the rows of the
// headline table with the sizes the run used.
package main
