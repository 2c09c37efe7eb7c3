// Package kvstore is MetaStore's MVCC key-value store: etcd 3.6's revision
// model (storage/mvcc plus the request semantics of etcdserver/txn),
// written once on top of any ordered byte store that implements Backend
// (internal/memory in RAM, internal/rocksdb on disk).
//
// # Revisions
//
// Every change is identified by a revision {main, sub}: main is the store
// revision of the request (Put, DeleteRange or write Txn) that made it,
// sub its position inside that request. A request that changes nothing
// (a DeleteRange that matches no key, a txn whose branch only reads)
// does not advance the store revision. An empty store is at revision 1.
// Every KeyValue carries create_revision (main revision of the put that
// created the current generation of the key), mod_revision (of its last
// put) and version (puts since creation).
//
// # Backend layout
//
// Every backend key starts with a bucket byte. The store owns two:
//
//	'r' + 8-byte big-endian main + 8-byte big-endian sub [+ 't']
//	    -> mvccpb.KeyValue in protobuf wire format (byte for byte what
//	       etcd stores); 't' marks a deletion, whose value holds only the key
//	'm' "applied" -> 8-byte BE raft index + 8-byte BE raft term of the last
//	                 entry whose effects are stored (the consistent index)
//	'm' "compact" -> 8-byte BE compacted main revision (reads below fail)
//	'm' "compactFinished" -> 8-byte BE revision of the last compaction
//	                 whose old records are all deleted (see Compaction)
//
// and hands out others to subsystems that must commit atomically with
// it, through PutAux / DeleteAux / AscendAux: BucketLease 'l',
// BucketMembership 'c', BucketAuth 'a', BucketConfChangeVeto 'v',
// BucketAlarm 'A'.
//
// Size (and SizeInUse) are the engine's: for internal/memory the bytes of
// every key and value it holds, in every bucket; for internal/rocksdb its
// SST files plus memtables. The server's backend quota
// (--quota-backend-bytes) is measured against Size.
//
// Worked example. Starting from an empty store,
//
//	rev 2: Put foo=bar
//	rev 3: Txn{Put foo=baz, Put zoo=1}
//	rev 4: DeleteRange foo
//
// leaves these keys in the backend ({main,sub} shown as numbers):
//
//	r {2,0}   -> {key:foo value:bar create:2 mod:2 version:1}
//	r {3,0}   -> {key:foo value:baz create:2 mod:3 version:2}
//	r {3,1}   -> {key:zoo value:1   create:3 mod:3 version:1}
//	r {4,0} t -> {key:foo}
//	m applied -> index, term of the raft entry holding the delete
//
// and this key index (kept in RAM, rebuilt from the 'r' bucket by Open;
// each key's revisions oldest first, t marking a tombstone, and the create
// revision and version of its live generation, see keyIndex):
//
//	foo: revisions [2.0 3.0 4.0t]  deleted
//	zoo: revisions [3.1]           created 3, version 1
//
// A Range of foo at revision 3 finds 3.0, foo's newest revision <= 3, and
// reads r {3,0}; at revision 4 the newest is the tombstone: foo is
// deleted. Compacting at 3 keeps, for each key, the newest revision <= 3
// (foo 3.0, zoo 3.1) and everything later, so it stores m compact = 3
// and deletes r {2,0} from the backend and 2.0 from the index (see
// Compaction for when).
//
// Invariants, checked where they are enforced: revisions in a key's
// history strictly increase (keyIndex.put panics otherwise); a key is
// live exactly when its newest revision is a put; every revision in the
// key index has its record in the backend (a read that misses one fails
// instead of answering wrongly); the consistent index and the compacted
// revision are written in the same batch as the changes they describe,
// so after a crash the backend is exactly the state after some applied
// entry, and raft replay resumes right after it.
//
// # Compaction
//
// Compact is logical at once: the new compacted revision is written in
// the pending batch and reads below it fail from the next Commit on. The
// physical half, deleting the records it made unreachable, goes in
// steps: every Commit compacts the key index from a cursor on, whole keys
// at a time, until about Options.CompactionStep revisions (1,000) are
// dropped, and deletes their records in its batch, so no Commit carries
// more than a step of it whatever the history size; the last step writes
// m compactFinished. The apply goroutine commits steps while it has no
// entries (raftnode.IdleWorker), so an idle member finishes too. Index
// and records go together, so "every revision in the key index has its
// record" holds at every step. Nothing observable depends on the
// progress (it differs between members): reads at or above the compacted
// revision find the same entries in compacted and uncompacted key
// histories, and HashKV and Hash leave out the records still to delete.
// A second compaction restarts the cursor with its own revision; Open
// resumes one cut short (m compactFinished below m compact) from the
// first key. compact.go has the details.
//
// # Concurrency
//
// One goroutine, the apply loop, calls the apply side (Put, DeleteRange,
// Txn, Compact, Write, SetConsistentIndex, PutAux, DeleteAux, Commit,
// Restore). Its effects are buffered: later apply-side calls see them, and
// Commit writes them in one atomic backend batch and then installs a new
// snapshot: a backend ReadView, an immutable copy-on-write clone of the
// key index, and the revisions. Readers (Range, ReadTxn, PrevKV, Events,
// HashKV, Hash, AscendAux, SnapshotView) take a reference to the current
// snapshot and use nothing else, so they see exactly one committed state,
// hold no lock while they read, and never block the writer. A read at a
// revision that a concurrent compaction removes sees the older snapshot
// (correct data) or the newer one (ErrCompacted), never a mix.
//
// # Bounded responses
//
// Range and ReadTxn load values only for the key-values their response
// carries (keys_only reads take key, revisions, version and lease from
// the key index at the current revision and read no value; filters and
// sorts other than by value work on that metadata and load the values
// of what is left), count the response's encoded bytes as they load, and
// stop at Options.MaxResponseBytes or MaxResponseMemory with a
// ResponseTooLargeError (rangesize.go): a range over gigabytes is refused
// without the member holding it. The ranges of a txn that writes run in
// apply and are not bounded.
//
// # Streamed ranges
//
// RangeStream (rangestream.go) serves etcd 3.7's streamed range: chunks
// whose merge is Range's response, each read from a snapshot of its own
// at the revision the first pinned, each stopped at an adaptive key limit
// or a byte target instead of counting the rest of the range, each held
// to the response bounds on its own.
//
// # Errors
//
// The sentinel errors carry etcd's own messages. The gRPC layer is
// expected to map them (errors.Is; they may be wrapped) to rpctypes:
//
//	ErrCompacted         -> rpctypes.ErrGRPCCompacted
//	ErrFutureRev         -> rpctypes.ErrGRPCFutureRev
//	ErrLeaseNotFound     -> rpctypes.ErrGRPCLeaseNotFound
//	ErrKeyNotFound       -> rpctypes.ErrGRPCKeyNotFound
//	ErrEmptyKey          -> rpctypes.ErrGRPCEmptyKey
//	ErrValueProvided     -> rpctypes.ErrGRPCValueProvided
//	ErrLeaseProvided     -> rpctypes.ErrGRPCLeaseProvided
//	ErrTooManyOps        -> rpctypes.ErrGRPCTooManyOps
//	ErrDuplicateKey      -> rpctypes.ErrGRPCDuplicateKey
//	ErrInvalidSortOption -> rpctypes.ErrGRPCInvalidSortOption
//
// ErrClosed and ErrNotReadOnly are programming or shutdown errors with no
// etcd counterpart. The differential test (test/etcddiff)
// checks this table against a real etcd.
//
// # Differences from etcd
//
// Deliberate, each documented where it is implemented: compaction
// deletes its records in steps on the apply goroutine, one per Commit
// (etcd deletes in a background goroutine, in batches of
// --compaction-batch-limit with --compaction-sleep-interval between
// them); HashKV does not cache the hashes computed during
// compactions, so HashKV at a past compaction revision returns the fresh
// hash; IsTxnReadOnly and IsTxnSerializable look inside nested txns. And
// two etcd 3.6.16 crashes are not reproduced, both needing a txn that
// deletes to the end of the key space (which etcd's duplicate-key check
// misses) and then puts a key it deleted: with ignore_value/ignore_lease
// the txn fails here with ErrKeyNotFound, writing nothing, where etcd
// panics; and a compaction at the revision of a txn that re-created a key
// keeps the new record here, where etcd deletes it from the backend but
// not from its index and dies on the next read of the key.
package kvstore
