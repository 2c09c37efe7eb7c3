package server

import (
	"sync/atomic"
	"time"
)

// requestIDs generates proposal IDs unique across the cluster and across
// restarts of this member, the way etcd's idutil does:
//
//	| member ID low 16 bits | unix ms at start, low 40 bits | counter 8 bits |
//
// The counter part overflows into the timestamp part, which is harmless:
// it only has to keep increasing.
type requestIDs struct {
	prefix uint64
	suffix atomic.Uint64
}

func newRequestIDs(memberID uint64, now time.Time) *requestIDs {
	g := &requestIDs{prefix: memberID << 48}
	ms := uint64(now.UnixNano() / int64(time.Millisecond))
	g.suffix.Store((ms & (1<<40 - 1)) << 8)
	return g
}

func (g *requestIDs) Next() uint64 {
	return g.prefix | (g.suffix.Add(1) & (1<<48 - 1))
}
