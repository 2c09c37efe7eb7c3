// Package memlimit divides the memory a member may use among the parts
// that hold data on behalf of clients, so that a flood of large requests
// or one huge read is refused with an error instead of growing the
// process until the kernel kills it.
//
// # The limit
//
// The limit is the Go runtime's soft memory limit: GOMEMLIMIT (or
// debug.SetMemoryLimit), which the operator sets to what the member may
// take, typically a little below its container's memory limit. Without
// one there is no limit (math.MaxInt64) and the parts below fall back to
// the bounds etcd has (gRPC's 2 GiB message limit for a response).
//
// # The shares
//
// Of the limit L, a single read's response (Range, read-only Txn) may
// hold at most L/4 while it is built (Budget.Response): building it,
// gRPC's encoding of it and its copy in the transport's buffers come to
// about three times its size at the peak, so even that fits inside L
// together with the store. The raft log entries a member keeps in memory
// get L/8 (Budget.RaftLog; 256 MiB without a limit): a snapshot is taken
// once the entries since the last one hold half of it (and, for the memory
// engine, a quarter of its last image), at most half of it stays behind a
// snapshot for followers that lag (one further behind is sent the
// snapshot), and while snapshots cannot keep up the member refuses new
// writes with etcd's "too many requests" (see raftnode's logbudget.go).
//
// What is left is the store itself (the key index, the memory engine's
// values or RocksDB's caches), the watchers' queues (bounded by their own
// counts) and the garbage collector's headroom, which the runtime keeps
// below L on its own once GOMEMLIMIT is set.
package memlimit
