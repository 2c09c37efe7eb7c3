package wal

import (
	"errors"
	"fmt"

	"go.etcd.io/raft/v3/raftpb"
)

// Recovered is what Open read back from the log.
type Recovered struct {
	// Metadata is the member and cluster the log belongs to.
	Metadata Metadata
	// HardState is the last hard state written (zero if none was).
	HardState raftpb.HardState
	// Snapshots lists the snapshot markers found, without duplicates, in
	// log order. The newest one whose snapshot file exists is where a
	// restart resumes.
	Snapshots []Snapshot
	// Entries is the log as raft last left it: contiguous indexes, tail
	// overwrites and snapshot installs already resolved. It may begin
	// before the newest snapshot (segments are released lazily).
	Entries []raftpb.Entry

	// installedBase is set when the log was last reset by a snapshot
	// install: Entries then start right after it and nothing before it
	// survives.
	installedBase uint64
}

// LastIndex is the index of the last entry in the log, or of the newest
// snapshot marker when the log holds no entries after it.
func (r *Recovered) LastIndex() uint64 {
	last := r.installedBase
	for _, s := range r.Snapshots {
		last = max(last, s.Index)
	}
	if n := len(r.Entries); n > 0 {
		last = max(last, r.Entries[n-1].Index)
	}
	return last
}

// EntriesAfter returns the entries with an index above snapIndex. It fails
// when the log does not reach back to snapIndex+1 (entries between the
// snapshot and the log would be missing).
func (r *Recovered) EntriesAfter(snapIndex uint64) ([]raftpb.Entry, error) {
	if r.installedBase > snapIndex {
		return nil, fmt.Errorf("log restarts after installed snapshot %d, newer than snapshot %d", r.installedBase, snapIndex)
	}
	if len(r.Entries) == 0 {
		return nil, nil
	}
	first, last := r.Entries[0].Index, r.Entries[len(r.Entries)-1].Index
	if first > snapIndex+1 {
		return nil, fmt.Errorf("log starts at index %d: entries %d..%d after snapshot %d are missing", first, snapIndex+1, first-1, snapIndex)
	}
	if last <= snapIndex {
		return nil, nil
	}
	return r.Entries[snapIndex+1-first:], nil
}

// replay rebuilds the log from records in write order: it decides what each
// record type means for the log (overwrites, installs, gaps).
type replay struct {
	rec         Recovered
	hasMetadata bool
	// base is the index just before Entries[0] (or before the next entry
	// while Entries is empty); known once an entry or an install was seen.
	base      uint64
	baseKnown bool
}

// errLogBroken marks a record that decoded fine but cannot follow the ones
// before it (an index gap, a foreign metadata record). It is never repaired.
var errLogBroken = errors.New("log is inconsistent")

func (p *replay) apply(r *record) error {
	switch r.typ {
	case recordMetadata:
		if p.hasMetadata && r.metadata != p.rec.Metadata {
			return fmt.Errorf("%w: metadata %+v differs from %+v earlier in the log", errLogBroken, r.metadata, p.rec.Metadata)
		}
		p.rec.Metadata, p.hasMetadata = r.metadata, true
	case recordHardState:
		p.rec.HardState = r.hardState
	case recordSnapshot:
		p.addSnapshot(r.snapshot)
	case recordSnapshotInstall:
		p.addSnapshot(r.snapshot)
		p.rec.Entries = p.rec.Entries[:0]
		p.base, p.baseKnown = r.snapshot.Index, true
		p.rec.installedBase = r.snapshot.Index
	case recordEntry:
		return p.addEntry(r.entry)
	}
	return nil
}

func (p *replay) addSnapshot(s Snapshot) {
	for _, seen := range p.rec.Snapshots {
		if seen == s {
			return // repeated at the head of every segment
		}
	}
	p.rec.Snapshots = append(p.rec.Snapshots, s)
}

func (p *replay) addEntry(e raftpb.Entry) error {
	if e.Index == 0 {
		return fmt.Errorf("%w: entry with index 0", errLogBroken)
	}
	if !p.baseKnown {
		p.base, p.baseKnown = e.Index-1, true
	}
	next := p.base + uint64(len(p.rec.Entries)) + 1
	switch {
	case e.Index > next:
		return fmt.Errorf("%w: entry %d follows %d (gap)", errLogBroken, e.Index, next-1)
	case e.Index <= p.base:
		if p.rec.installedBase != 0 && e.Index <= p.rec.installedBase {
			return fmt.Errorf("%w: entry %d at or below installed snapshot %d", errLogBroken, e.Index, p.rec.installedBase)
		}
		// An overwrite reaching below the first entry still on disk: the
		// segments it supersedes were already released.
		p.rec.Entries = append(p.rec.Entries[:0], e)
		p.base = e.Index - 1
	default:
		// e.Index == next appends; anything lower overwrites the tail, as
		// raft does when a new leader truncates a follower's log.
		p.rec.Entries = append(p.rec.Entries[:e.Index-p.base-1], e)
	}
	return nil
}

// lastIndex is the index of the last entry in the log, and whether it is
// known yet (a log with no entry and no install learns it from its first
// entry).
func (p *replay) lastIndex() (uint64, bool) {
	return p.base + uint64(len(p.rec.Entries)), p.baseKnown
}
