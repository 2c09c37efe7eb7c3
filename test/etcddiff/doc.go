// Package etcddiff checks kvstore against the reference etcd 3.6 binary
// (bin/ref/etcd, built by `make tools`), request by request.
//
// Run does two things, each against a fresh single-member etcd started on
// free 127.0.0.1 ports with a temporary data directory:
//
//   - It sends every kvstoretest scenario to etcd and checks etcd's
//     answers against the scenario's tables, so that the tables the MVCC
//     suite holds the store to are etcd's own behaviour. Scenarios marked
//     as a deliberate deviation are skipped.
//   - It sends the same random request stream to etcd (over gRPC) and to
//     a kvstore.Store on the engine under test (decoded from the same
//     bytes and validated as the gRPC layer does, see kvstoretest.Exec),
//     and compares the wire encoding of every response with the member
//     fields of the top-level header (cluster id, member id, raft term)
//     zeroed, or the gRPC status of every error after mapping kvstore's
//     errors as kvstore's doc prescribes. Requests: puts with every
//     option and leases (granted with the same IDs on both sides),
//     deletes of keys, ranges, prefixes and "to the end", ranges with
//     every option (limit, revision, sort, filters, keys/count only),
//     txns with random compares and nested txns, compactions and HashKV.
//     The store deletes one key's compacted revisions per Commit
//     (CompactionStep 1), so most answers are compared while a
//     compaction is still deleting, where etcd has finished.
//     Every few hundred requests, and at the end, it compares the whole
//     key space at every readable revision, HashKV at each of them, and
//     the event history (kvstore's Events against an etcd watch).
//
// Differences with an explanation are avoided rather than compared: the
// txns that make etcd crash are not generated (see avoidEtcdCrashes; the
// stream found the second of those two etcd bugs), and HashKV is not asked at
// a compaction revision (etcd answers those from a cache of hashes taken
// during compaction). Without the binary the test is skipped; the path
// used is logged. Environment: METASTORE_REF_ETCD (binary path),
// METASTORE_DIFF_SEED (one seed), METASTORE_DIFF_OPS (requests per seed).
package etcddiff
