package watch

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// errTestCompacted plays kvstore.ErrCompacted.
var errTestCompacted = errors.New("mvcc: required revision has been compacted")

// memHistory is an in-memory store history with kvstore's Events
// semantics, for the hub's tests. It also writes: commit applies one
// revision's operations and returns their events, for the test to Publish.
type memHistory struct {
	mu      sync.Mutex
	events  []mvccpb.Event // every event, in revision order
	rev     int64
	compact int64
	live    map[string]*mvccpb.KeyValue
	// failReads makes the next Events calls fail with errHistoryDown.
	failReads int
	reads     int
}

var errHistoryDown = errors.New("history unavailable")

func newMemHistory() *memHistory {
	return &memHistory{rev: 1, live: make(map[string]*mvccpb.KeyValue)}
}

// op is one write of a commit: a put of value, or a delete.
type op struct {
	key   string
	value string
	del   bool
}

func put(key, value string) op { return op{key: key, value: value} }
func del(key string) op        { return op{key: key, del: true} }

// commit applies ops as one revision (a transaction) and returns the new
// revision and its events. Deleting a missing key is a no-op; a commit
// with no effect does not bump the revision and returns no events.
func (m *memHistory) commit(ops ...op) (int64, []mvccpb.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rev := m.rev + 1
	var evs []mvccpb.Event
	for _, o := range ops {
		prev := m.live[o.key]
		if o.del {
			if prev == nil {
				continue
			}
			delete(m.live, o.key)
			evs = append(evs, mvccpb.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(o.key), ModRevision: rev}})
			continue
		}
		kv := &mvccpb.KeyValue{Key: []byte(o.key), Value: []byte(o.value), CreateRevision: rev, ModRevision: rev, Version: 1}
		if prev != nil {
			kv.CreateRevision, kv.Version = prev.CreateRevision, prev.Version+1
		}
		m.live[o.key] = kv
		evs = append(evs, mvccpb.Event{Type: mvccpb.PUT, Kv: kv})
	}
	if len(evs) == 0 {
		return m.rev, nil
	}
	m.rev = rev
	m.events = append(m.events, evs...)
	return rev, evs
}

func (m *memHistory) compactAt(rev int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.compact = rev
}

func (m *memHistory) Rev() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rev
}

func (m *memHistory) CompactRev() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.compact
}

func (m *memHistory) Events(startRev, endRev int64, key, rangeEnd []byte, limit int) ([]mvccpb.Event, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	if m.failReads > 0 {
		m.failReads--
		return nil, 0, errHistoryDown
	}
	if startRev < m.compact {
		return nil, 0, fmt.Errorf("read from %d: %w", startRev, errTestCompacted)
	}
	startRev = max(startRev, 1)
	if endRev <= 0 || endRev > m.rev+1 {
		endRev = m.rev + 1
	}
	if startRev >= endRev {
		return nil, startRev, nil
	}
	i := sort.Search(len(m.events), func(i int) bool { return m.events[i].Kv.ModRevision >= startRev })
	var out []mvccpb.Event
	for ; i < len(m.events); i++ {
		ev := m.events[i]
		r := ev.Kv.ModRevision
		if r >= endRev {
			break
		}
		if limit > 0 && len(out) >= limit && r != out[len(out)-1].Kv.ModRevision {
			return out, r, nil
		}
		if inRange(ev.Kv.Key, key, rangeEnd) {
			out = append(out, ev)
		}
	}
	return out, endRev, nil
}

func (m *memHistory) PrevKV(key []byte, rev int64) (*mvccpb.KeyValue, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rev-1 < m.compact {
		return nil, errTestCompacted
	}
	i := sort.Search(len(m.events), func(i int) bool { return m.events[i].Kv.ModRevision >= rev })
	for i--; i >= 0; i-- {
		ev := m.events[i]
		if bytes.Equal(ev.Kv.Key, key) {
			if ev.Type == mvccpb.DELETE {
				return nil, nil
			}
			return ev.Kv, nil
		}
	}
	return nil, nil
}

// inRange applies etcd's range conventions: rangeEnd nil is the key
// alone, "\x00" every key from key on.
func inRange(k, key, rangeEnd []byte) bool {
	switch {
	case rangeEnd == nil:
		return bytes.Equal(k, key)
	case len(rangeEnd) == 1 && rangeEnd[0] == 0:
		return bytes.Compare(k, key) >= 0
	}
	return bytes.Compare(k, key) >= 0 && bytes.Compare(k, rangeEnd) < 0
}
