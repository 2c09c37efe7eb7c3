// Package host groups what a member takes from the machine it runs on;
// it holds no code of its own.
//
//	fileutil    directory fsyncs and file helpers
//	gcheadroom  GC pacing from the memory left under the limit
//	memlimit    the memory budget shared by the parts that hold client data
//	logging     the logger, built as etcd builds its own (JSON lines, levels)
//	sdnotify    systemd's readiness notification
//	progress    progress reports of long operations
//	tlsutil     TLS for client and peer listeners, with etcd's rules
//	promreg     a part's Prometheus collectors registered as one set
package host
