// Package raftsnap stores state machine snapshots of one member as files,
// one per snapshot, next to the WAL.
//
// # Files
//
// A snapshot of the state as of log position (term, index) is the file
//
//	<term 16hex>-<index 16hex>.snap
//
// laid out as
//
//	magic "MSSNAP\x00\x01" (8 bytes)
//	header length u32
//	header: raftpb.SnapshotMetadata (index, term, ConfState)
//	image: the state machine's bytes, in its own format
//	image length u64
//	crc32c u32 over every byte before it
//
// all integers little-endian. For example a snapshot at term 2, index 10000
// of a one-member cluster is 0000000000000002-0000000000002710.snap
// (term then index, so that names sort by term first; List sorts by index),
// starting with the 8 magic bytes, a header of a few bytes (index 10000,
// term 2, voters [1]), then the image, and ending with the image length and
// the checksum.
//
// # Invariants
//
// A file is visible under its final name only once complete and durable:
// Save writes <name>.tmp, fsyncs it, renames it and fsyncs the directory.
// Open deletes leftover .tmp files. Save keeps the newest five files
// (Options.Keep) and deletes older ones.
//
// Load validates a whole file (magic, header length, image length, checksum,
// and that the header matches the file name) before anyone trusts it; any
// damage is an error wrapping ErrCorrupt that names the file. The header is
// unmarshalled only after the checksum matched. OpenImage validates the same
// way, then streams the image and checks the checksum again as it reaches
// the end, so a file that changed since validation yields an error instead
// of a silently different state.
//
// The package knows nothing about which file is the right one to restart
// from: that depends on the WAL (see package raftnode).
package raftsnap
