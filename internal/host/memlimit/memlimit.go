package memlimit

import (
	"math"
	"runtime/debug"
)

// Budget is a member's memory limit and the shares derived from it.
type Budget struct {
	// Limit is the process's memory limit in bytes; 0 or less: none.
	Limit int64
}

// FromRuntime returns the budget of the limit the Go runtime has now
// (GOMEMLIMIT, or what debug.SetMemoryLimit last set).
func FromRuntime() Budget {
	limit := debug.SetMemoryLimit(-1) // a negative input only reads it
	if limit == math.MaxInt64 {
		return Budget{}
	}
	return Budget{Limit: limit}
}

// Limited reports whether there is a limit.
func (b Budget) Limited() bool { return b.Limit > 0 }

// Response is what one read's response may hold while it is built: a
// quarter of the limit, 0 (no bound) without a limit.
func (b Budget) Response() int64 {
	if !b.Limited() {
		return 0
	}
	return b.Limit / 4
}

// DefaultRaftLog is the raft log's byte budget without a limit.
const DefaultRaftLog = 256 << 20

// RaftLog is the byte budget of the raft log entries kept in memory (see
// raftnode's MaxLogBytes): an eighth of the limit, DefaultRaftLog without
// a limit.
func (b Budget) RaftLog() int64 {
	if !b.Limited() {
		return DefaultRaftLog
	}
	return max(b.Limit/8, 1<<20)
}
