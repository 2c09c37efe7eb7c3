package rocksdb

import (
	"sync/atomic"
	"time"
)

// sizeMaxAge bounds how long a size read stays in use while nothing is
// written: what changes the size without a write of ours (a background
// flush turning memtables into smaller SST files, an automatic
// compaction dropping overwritten entries) shows within this time.
const sizeMaxAge = 100 * time.Millisecond

// sizeCache keeps the generation's last size read (two RocksDB properties,
// each a cgo call and a C string) for the callers that ask on every
// request: the quota check runs on the request path and in apply for
// every put. A read is reused until the next change of ours (a committed
// batch, a compaction: bump) or for sizeMaxAge, so the quota sees every
// byte committed before it asks, exactly as a fresh read would, and a
// put load reads the properties once per committed batch instead of
// twice per put.
type sizeCache struct {
	changes atomic.Uint64 // bumped after each change of ours
	last    atomic.Pointer[sizeRead]
}

type sizeRead struct {
	changes uint64 // changes when the read began
	at      time.Time
	bytes   int64
}

// bump records a change of ours: the next get reads the properties again.
func (c *sizeCache) bump() { c.changes.Add(1) }

// get returns the size, read by read only when the last read is older
// than the last change or than sizeMaxAge.
func (c *sizeCache) get(read func() int64) int64 {
	changes, now := c.changes.Load(), time.Now()
	if last := c.last.Load(); last != nil && last.changes == changes && now.Sub(last.at) < sizeMaxAge {
		return last.bytes
	}
	// A change that lands while the properties are read bumps changes
	// past this read's, so the next get reads again.
	r := &sizeRead{changes: changes, at: now, bytes: read()}
	c.last.Store(r)
	return r.bytes
}
