// Package backup is the snapshot file of `etcdctl snapshot save`: the
// bytes Maintenance.Snapshot streams, `metastore snapshot status` reports
// on and `metastore snapshot restore` builds a new data dir from. (Raft's
// own snapshots, exchanged between members, are package raftsnap.)
//
// # Layout
//
//	image    every key and value of the store's backend, in key order, in
//	         internal/format/kvimage's framing with the format "MSBACKUP" v1
//	padding  zero bytes, fewer than 512
//	footer   image length u64 (big endian) | "MSBACKUP"
//	digest   sha256 of everything before it (32 bytes)
//
// The image, padding and footer (the body) are a whole number of 512-byte
// blocks. That is not for us: etcdctl keeps a saved file only if its size
// says a digest follows whole blocks (size % 512 == 32, true of bbolt's
// pages), and etcdutl uses the same test. The footer lets a reader find
// the image's end without decoding it; the digest, computed by the sender
// as etcd's is, covers the transfer and the disk.
//
// Worked example: a backend holding only "k" = "v" gives a 28-byte image
//
//	4d 53 42 41 43 4b 55 50 00 01   "MSBACKUP", version 1
//	01 01 6b 01 76                  record: key "k", value "v"
//	02 00 00 00 00 00 00 00 01      end, 1 record
//	xx xx xx xx                     CRC32C of the image
//
// then 468 zero bytes, the footer 00 00 00 00 00 00 00 1c "MSBACKUP"
// (body: 28 + 468 + 16 = 512 bytes) and the 32-byte digest: 544 bytes.
//
// The records are the backend's raw keys (the MVCC revisions, the meta
// keys, and the lease and membership buckets; see internal/kvstore), not
// an engine's own image, so a snapshot of a member on one storage engine
// restores onto either.
//
// # Invariants
//
// Verify (and so Open) checks, before anyone trusts a file: a size of
// whole blocks plus a digest, the digest, the footer, an image length
// that leaves less than a block of padding, and zero padding. Every
// failure wraps ErrCorrupt and Open's errors name the file; a file that
// is not a MetaStore snapshot at all (an etcd bbolt file, say) is named
// as such rather than reported as a digest mismatch. The image's own
// order, count and CRC are checked as it is decoded (Records, LoadInto),
// so a reader must not keep what it decoded unless decoding returned nil.
//
// Write streams from a read view and keeps nothing; Size encodes the same
// view once without writing to announce the length up front.
package backup
