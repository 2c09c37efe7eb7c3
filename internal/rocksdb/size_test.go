package rocksdb

import (
	"fmt"
	"testing"
)

// TestSizeCacheRereadsAfterEveryChange: a cached size is reused only while
// nothing was committed since it was read; after each commit Size is what
// a fresh read of the properties gives (the quota's check must see every
// byte committed before it asks). The memtable grows by arena blocks, so
// the values go in large enough to move it.
func TestSizeCacheRereadsAfterEveryChange(t *testing.T) {
	b, err := Open(t.TempDir(), DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	gen := b.current.Load()
	first := b.Size()
	for i := range 5 {
		bt := b.NewBatch()
		bt.Put(fmt.Appendf(nil, "key-%d", i), make([]byte, 1<<20))
		if err := bt.Commit(); err != nil {
			t.Fatal(err)
		}
		got, fresh := b.Size(), gen.size()
		if got != fresh {
			t.Fatalf("Size after commit %d = %d, a fresh read gives %d", i, got, fresh)
		}
	}
	if last := b.Size(); last < first+5<<20 {
		t.Fatalf("Size %d after writing 5 MiB, %d before", last, first)
	}
}

func TestSizeCacheReusesAReadUntilAChangeOrItsAge(t *testing.T) {
	var c sizeCache
	reads := 0
	read := func() int64 { reads++; return int64(100 * reads) }
	if got := c.get(read); got != 100 || reads != 1 {
		t.Fatalf("first get = %d after %d reads", got, reads)
	}
	if got := c.get(read); got != 100 || reads != 1 {
		t.Fatalf("get with no change = %d after %d reads; want the cached 100", got, reads)
	}
	c.bump()
	if got := c.get(read); got != 200 || reads != 2 {
		t.Fatalf("get after a change = %d after %d reads; want a fresh read", got, reads)
	}
	// Age the read: what changes the size behind our back shows.
	old := *c.last.Load()
	old.at = old.at.Add(-sizeMaxAge)
	c.last.Store(&old)
	if got := c.get(read); got != 300 || reads != 3 {
		t.Fatalf("get of an aged read = %d after %d reads; want a fresh read", got, reads)
	}
}
