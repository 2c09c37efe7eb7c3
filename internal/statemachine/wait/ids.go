package wait

import (
	"sync/atomic"
	"time"
)

// IDs generates the request IDs proposals are registered and answered
// by, unique across the cluster and across restarts of the member, the way etcd's idutil does:
//
//	| member ID low 16 bits | unix ms at start, low 40 bits | counter 8 bits |
//
// The counter part overflows into the timestamp part, which is harmless:
// it only has to keep increasing.
type IDs struct {
	prefix uint64
	suffix atomic.Uint64
}

// NewIDs is the generator of member memberID, started at now.
func NewIDs(memberID uint64, now time.Time) *IDs {
	g := &IDs{prefix: memberID << 48}
	ms := uint64(now.UnixNano() / int64(time.Millisecond))
	g.suffix.Store((ms & (1<<40 - 1)) << 8)
	return g
}

// Next is a new ID.
func (g *IDs) Next() uint64 {
	return g.prefix | (g.suffix.Add(1) & (1<<48 - 1))
}
