// Command watchmem is the client side of bench/watchmem.sh, which compares
// what idle watchers cost a MetaStore member and an etcd member in memory.
// The script starts and stops the servers and reads their RSS from /proc;
// this program only talks to them.
//
// Subcommands:
//
//	watch   open -watchers watchers over -streams gRPC Watch streams (spread
//	        over -conns connections), wait until the server has acknowledged
//	        every create, print the results as name=value lines and then a
//	        line "ready", and hold every stream open, idle, until SIGINT or
//	        SIGTERM. It exits non-zero if a stream fails or a watcher is
//	        canceled by the server while it holds.
//	stats   print the server's Go heap in use and goroutine count, read from
//	        its /metrics (heap_inuse_bytes=, goroutines=); with -gc, first
//	        force a garbage collection through the heap profile endpoint
//	        (/debug/pprof/heap?gc=1, which needs --enable-pprof) and, with
//	        -heap-profile=FILE, keep that profile for `go tool pprof`.
//
// It speaks the raw etcdserverpb Watch protocol rather than clientv3: a
// clientv3 watcher costs a goroutine and channels per watch on the client
// and creates one watch at a time per stream, neither of which matters to
// the server's memory but both of which make 100,000 watchers slow to set
// up. Here each stream has one sender and one receiver goroutine, and up
// to -window creates are in flight per stream.
//
// Watched keys are distinct per watcher and never written, so the watchers
// stay idle. With -mode=keys watcher i watches the single key
// -prefix + "%08d"; with -mode=prefixes it watches every key under
// -prefix + "%08d/". For example, with the default prefix "watchmem/",
// watcher 7 watches
//
//	keys:      "watchmem/00000007"
//	prefixes:  ["watchmem/00000007/", "watchmem/000000070")
//
// (the range end is the prefix with its last byte incremented, as
// clientv3.WithPrefix computes it).
package main
