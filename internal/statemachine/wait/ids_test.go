package wait

import (
	"sync"
	"testing"
	"time"
)

func TestRequestIDsUniqueUnderConcurrency(t *testing.T) {
	g := NewIDs(0xabcd, time.Unix(1700000000, 0))
	const workers, per = 8, 2000
	var mu sync.Mutex
	seen := make(map[uint64]bool, workers*per)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]uint64, per)
			for i := range local {
				local[i] = g.Next()
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range local {
				if seen[id] {
					t.Errorf("duplicate id %x", id)
				}
				seen[id] = true
				if id>>48 != 0xabcd {
					t.Errorf("id %x lost the member prefix", id)
				}
			}
		}()
	}
	wg.Wait()
}
