// Command engines is the client side of bench/engines.sh: it loads a data
// set of fixed-size keys into one etcd-compatible server, measures put and
// range throughput, and times how long a restarted server takes to answer
// its first linearizable read. The script starts and stops the servers
// and reads RSS and data-dir sizes; this program only talks gRPC.
//
// Keys are the decimal index zero-padded to the key size ("%064d" for
// 64-byte keys), so key i of every run is the same and any of them can be
// read back by index. Values are random bytes (seeded by the key index),
// so that no engine's compression shrinks them to nothing. For example
// with -keys=3 -key-size=8 the keys are 00000000, 00000001 and 00000002.
//
// Subcommands, each printing one line of "name=value" results:
//
//	load        put keys [0, -keys) with -clients concurrent writers;
//	            prints put_rps and keys_loaded (the puts that succeeded,
//	            also printed when one fails, e.g. past etcd's quota)
//	range       -total linearizable Gets of random existing keys;
//	            prints range_rps
//	first-read  poll until a linearizable Get of the last loaded key
//	            succeeds (-expect-key=false: any answer, for a server that
//	            was just created); prints first_read_ms, counted from
//	            -since (Unix nanoseconds, the moment the script started
//	            the server)
//	compact     -clients writers overwrite random loaded keys; after
//	            -baseline, compact every older revision (physical: the
//	            call returns when the compaction is done) while they keep
//	            writing; prints compact_s, base_put_p99_ms (before it),
//	            compact_put_p99_ms, compact_put_max_ms and compact_put_rps
//	            (puts in flight while it ran)
package main
