// Package kvstoretest is the MVCC suite every storage engine runs under
// kvstore.Store: etcd's semantics for Range (every option), Put,
// DeleteRange, Txn (compares, nested txns, limits, duplicate keys),
// compaction and the revision rules, as tables of requests with the
// answers etcd 3.6 gives (Scenarios); plus the store's own contracts:
// apply-side visibility before Commit, the events Commit returns, Events, PrevKV,
// HashKV and Hash, the aux buckets, the consistent index, physical
// removal of compacted revisions, lease attachment, TxnWrite, reads
// racing writes and compactions, reopen and Restore equivalence, and
// behaviour after a failed commit or Close.
//
// The tables are written once and checked twice: Run checks them against
// the store on a given engine, and test/etcddiff checks them
// against a real etcd, so an expectation that is not etcd's fails there.
//
//	func TestMVCC(t *testing.T) {
//		kvstoretest.Run(t, func(t *testing.T) kvstore.Backend { ... })
//	}
package kvstoretest
