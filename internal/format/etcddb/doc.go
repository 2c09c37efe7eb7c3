// Package etcddb reads and writes etcd's own database file: the bbolt
// file etcd keeps as <data-dir>/member/snap/db and streams, followed by
// a sha256 digest, as the snapshot `etcdctl snapshot save` receives.
//
// MetaStore needs the format in three places:
//
//   - Maintenance.Snapshot answers with it (Build, DB.WriteTo), so that
//     stock etcdctl and etcdutl check, report on and restore a snapshot
//     taken from MetaStore as one taken from etcd;
//   - `metastore snapshot restore` and `snapshot status` take a file etcd
//     saved (Open, File.LoadInto, ReadStatus);
//   - a member started on an etcd data dir loads etcd's db and its raft
//     position (ReadRaftState) before package etcddir converts the dir.
//
// # Layout
//
// The file is a bbolt database in etcd 3.6's schema (schema.go names
// every bucket and meta key). The key bucket holds one record per
// revision, keyed by the revision and valued by the mvccpb.KeyValue:
//
//	key bucket key    main rev u64 BE | '_' | sub rev u64 BE [| 't']
//	key bucket value  mvccpb.KeyValue (the 't' mark: a deletion)
//
// Worked example: put "k"="v1" at revision 2, put "k"="v2" at 3, delete
// "k" at 4 gives three records
//
//	00..02 5f 00..00     KeyValue{k, create 2, mod 2, version 1, v1}
//	00..03 5f 00..00     KeyValue{k, create 2, mod 3, version 2, v2}
//	00..04 5f 00..00 74  KeyValue{k, mod 4} (tombstone)
//
// while meta records the consistent index, term, conf state, compaction
// revisions and storage version, and the lease, alarm, cluster, members
// and auth buckets hold what their names say, each as etcd encodes it.
//
// (MetaStore's own formats are elsewhere in internal/format: backup is
// the file a MetaStore member writes for `metastore snapshot save`,
// raftsnap the Raft snapshots beside the WAL, kvimage the engine image
// both carry.)
package etcddb
