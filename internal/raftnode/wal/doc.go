// Package wal is the durable Raft log of one member: the hard state (term,
// vote, commit) and the log entries raft hands out in each Ready, written
// before raft is told they are stable.
//
// # Files
//
// The log lives in one directory as numbered segment files
//
//	<seq 16hex>-<firstIndex 16hex>.wal
//
// seq orders the files and must have no holes; firstIndex is the log's last
// index + 1 at the moment the file was cut, which lets ReleaseTo find files
// holding only obsolete entries from their names. A new segment is cut once
// the current one passes Options.SegmentSizeBytes (64 MiB by default). New
// files are written under a .tmp name, fsynced, renamed and the directory
// fsynced, so a visible segment always has its head records.
//
// # Records
//
// A segment is a sequence of records, each framed as
//
//	length u32 | crc32c u32 | type u8 | payload (length bytes)
//
// little-endian, the CRC-32C covering type and payload. Types:
//
//	1 metadata          member ID u64 | cluster ID u64
//	2 entry             raftpb.Entry
//	3 hard state        raftpb.HardState
//	4 snapshot          raftpb.Snapshot with Metadata.Index/Term only:
//	                    a snapshot file at that position is durable
//	5 snapshot install  same payload: raft replaced its log with a snapshot
//	                    received from the leader; earlier entries are void
//
// Type 0 is invalid so that zero-filled space never reads as a record.
//
// Worked example: a member bootstraps, appends two entries in one Ready,
// snapshots at index 2 and later cuts a new segment at index 9:
//
//	0000000000000000-0000000000000000.wal
//	  metadata{member 1, cluster 7}
//	  entry{1} entry{2} hardstate{term 2, vote 1, commit 2}   <- one Save, one fsync
//	  snapshot{index 2, term 2}                               <- SaveSnapshot
//	  ... entries 3..9, hard states ...
//	0000000000000001-000000000000000a.wal
//	  metadata{member 1, cluster 7}                           <- head copy
//	  hardstate{term 2, vote 1, commit 9}                     <- head copy
//	  snapshot{index 2, term 2}                               <- head copy
//	  entry{10} ...
//
// Every segment starts with the metadata, the current hard state and the
// newest snapshot marker, so it is still self-describing after ReleaseTo
// deleted the segments before it.
//
// # Replay rules
//
// Open replays records in order: an entry whose index is at or below the
// last one overwrites the tail from that index on (a new leader truncating a
// follower's uncommitted entries); an entry whose index is above the last
// one + 1 is a gap and refuses to open; a snapshot install empties the log,
// which resumes right after the snapshot. The result is a contiguous run of
// entries, the last hard state and the snapshot markers seen.
//
// # Durability and group commit
//
// Save writes all records of one Ready with a single pwritev(2) (one per
// 1,024 pieces) and at most one fdatasync. The records are encoded into
// one buffer, except the Data of entries of 32 KiB or more, which is
// written from the entry itself: a flood of 1.5 MiB puts would otherwise
// copy every value once more and grow the buffer to a whole Ready's size. It skips the fsync when only the commit index changed (as
// etcd does: raft re-learns a commit index, never a vote or an entry). After
// a failed write or fsync the WAL refuses further writes: the kernel may have
// dropped the dirty pages, and a retried fsync would lie.
//
// # Preallocation
//
// With Options.Preallocate (the member's setting) each segment is given its
// full size on disk when it is cut (fallocate, as etcd does) and records are
// written at positions after the last one. A record written into space the
// file already has does not change the file's size, which the fdatasync of
// an append has to journal: on ext4 here a small write and its fdatasync
// took about a fifth less (docs/performance.md, "One writer"). Open reads a
// segment up to
// where zeros begin at a record boundary and run to the end of the file:
// that is the reserve, not a torn record, and it is kept. Only the last
// segment may have one: cutting the next segment first cuts the current one
// back to its records, so zeros after the records of an earlier segment are
// lost records and Open refuses them.
//
// # Recovery
//
// A record that does not decode (short header, length past the end of the
// file, CRC mismatch, zeroed bytes followed by anything but zeros, unknown
// type) in the LAST segment is a torn write from a crash: Open logs a
// warning with the file and offset,
// truncates the file there and continues with the intact prefix. The same in
// any earlier segment, a missing segment or an index gap is not something a
// crash produces, so Open refuses with an error naming the file and offset.
// Open never panics on any input.
package wal
