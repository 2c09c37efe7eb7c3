// Package format groups the file and wire formats a member reads and
// writes outside its storage engine; it holds no code of its own. Which
// is which:
//
//	kvimage   an engine's whole content in key order: what the two
//	          formats below carry
//	raftsnap  Raft's snapshot files beside the WAL, sent between members
//	backup    the file `metastore snapshot save` writes and restores
//	etcddb    etcd's bbolt database: what Maintenance.Snapshot sends to
//	          etcdctl, and what an etcd data dir or etcd's snapshot holds
//	etcddir   the in-place conversion of an etcd data dir
//
// (The WAL, a log more than a format, is internal/raftnode/wal.)
package format
