package kvstore

import (
	"bytes"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Events returns the history of the keys in [key, rangeEnd) from the last
// committed image, for watchers catching up: the events of revisions
// startRev <= rev < endRev (endRev 0: up to the current revision), in
// revision order, and the revision to continue from. key and rangeEnd
// follow Range (rangeEnd nil: key alone; "\x00": every key >= key, so an
// empty key with "\x00" selects everything).
//
// With limit > 0 it stops once it has at least limit events, at the end
// of a revision: the events of one revision are never split across calls.
// A DELETE event carries the key and, as ModRevision, the revision of the
// deletion (as etcd's watch does).
//
// It fails with ErrCompacted if startRev is below the compacted revision
// (history there may be gone). startRev equal to the compacted revision is
// served, as etcd's watch serves it: every change made at that revision
// survives the compaction, except a put that the same txn's delete of
// the key followed.
func (s *Store) Events(startRev, endRev int64, key, rangeEnd []byte, limit int) ([]mvccpb.Event, int64, error) {
	snap, err := s.acquire()
	if err != nil {
		return nil, 0, err
	}
	defer snap.release()
	if startRev < snap.compactRev {
		return nil, 0, ErrCompacted
	}
	startRev = max(startRev, 1)
	if endRev <= 0 || endRev > snap.rev+1 {
		endRev = snap.rev + 1
	}
	if startRev >= endRev {
		return nil, startRev, nil
	}
	end := gteRangeEnd(rangeEnd)
	var (
		events  []mvccpb.Event
		next    = endRev
		scanErr error
		// How many events follow is unknown: always carve full chunks.
		mem = arena{expect: 1 << 20}
	)
	err = snap.view.Ascend(revKeyStart(startRev), revKeyStart(endRev), func(k, v []byte) bool {
		rev, tombstone, err := parseRevKey(k)
		if err != nil {
			scanErr = err
			return false
		}
		if limit > 0 && len(events) >= limit && rev.main != events[len(events)-1].Kv.ModRevision {
			next = rev.main
			return false
		}
		evKey, ok := keyOfKeyValue(v)
		if !ok {
			scanErr = fmt.Errorf("revision %d.%d: malformed stored KeyValue", rev.main, rev.sub)
			return false
		}
		if !keyInRange(evKey, key, end) {
			return true
		}
		if snap.compacting() && rev.main <= snap.compactRev && !snap.keys.survives(evKey, rev, snap.compactRev) {
			// A record at the compacted revision itself that the
			// compaction in progress has still to delete (compact.go).
			return true
		}
		kv := &mvccpb.KeyValue{}
		if err := decodeKeyValue(mem.copy(v), kv); err != nil {
			scanErr = fmt.Errorf("revision %d.%d: %w", rev.main, rev.sub, err)
			return false
		}
		ev := mvccpb.Event{Type: mvccpb.PUT, Kv: kv}
		if tombstone {
			ev.Type = mvccpb.DELETE
			kv.ModRevision = rev.main
		}
		events = append(events, ev)
		return true
	})
	if err == nil {
		err = scanErr
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read events from %d: %w", startRev, err)
	}
	return events, next, nil
}

// keyInRange reports whether k is in [key, end) with Range's conventions
// for end (nil: key alone, empty: no upper bound).
func keyInRange(k, key, end []byte) bool {
	if end == nil {
		return bytes.Equal(k, key)
	}
	if bytes.Compare(k, key) < 0 {
		return false
	}
	return len(end) == 0 || bytes.Compare(k, end) < 0
}
