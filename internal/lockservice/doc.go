// Package lockservice is MetaStore's HTTP lock service for clients that
// speak plain HTTP (the lock-server design in shared/design): one FIFO queue
// per Type:ResourceID, /lock answering acquired, queued or an error, /unlock
// carrying the outcome of the critical section, 403 for a caller that does
// not hold the lock, and a lock released, or a waiter dropped, when its
// client's connection breaks. The wire protocol is pkg/lockapi; the Go
// client is pkg/lockclient.
//
// # Safety from MetaStore's own machinery
//
// The service keeps no lock state in memory. A queue is a key prefix and
// every contender owns one key under it, exactly the layout of etcd's mutex
// (internal/queue): the key with the smallest create revision holds the
// lock. For Type "build", ResourceID "libc" and three nodes:
//
//	/metastore/lockservice/build:libc/node-1   create revision 41   holder, token 41
//	/metastore/lockservice/build:libc/node-7   create revision 44   queued, position 1
//	/metastore/lockservice/build:libc/node-3   create revision 52   queued, position 2
//
// The queue's element is the two parts, each path-escaped with ':'
// escaped too ("%3A"), joined by the one ':' left: a "/" in a name cannot
// reach another queue, and ("a:b", "c") and ("a", "b:c") are two locks.
// NodeID is path-escaped alone, as the last element.
//
// Members of earlier versions escaped neither ':' and so put both of
// those names in the queue "a:b:c/". For a name without ':' nothing
// changed; a name with ':' keeps its queue inside that older range, one
// level down, so that older members, which read the whole range, see and
// respect its keys during a rolling upgrade. Type "pull", ResourceID
// "sha256:ab":
//
//	/metastore/lockservice/pull:sha256:ab/pull:sha256%3Aab/node-1   revision 41   holder, token 41
//	/metastore/lockservice/pull:sha256:ab/node-9                     revision 43   an older member's: position 1
//	/metastore/lockservice/pull:sha256:ab/pull:sha256%3Aab/node-7   revision 44   position 2
//	/metastore/lockservice/pull:sha256:ab/pull%3Asha256:ab/node-2   revision 45   ("pull:sha256", "ab"): position 1
//
// A member counts, for a name, its queue and the keys directly in the
// older range (an older member's, for either name), not the other name's
// queue: node-2 waits for node-9 only, while node-9, on an older member,
// waits for node-1 as well. Newer members keep the two names apart, older
// ones make them wait for each other as they always did, and no member
// grants a lock while another contender holds it. The one difference a
// mixed cluster shows: a node that asked on an older member and asks
// again on a newer one queues behind its own older key instead of taking
// it over. An older member's keys go with their requests (at most a lease
// TTL after), so once every member is upgraded the older range holds only
// the nested queues.
//
// The keys go through Raft like any write, so a lock and its queue survive
// a leader change and every member serves the same queue: a client may
// lock on one member and unlock on another.
//
// # Tied to the connection
//
// Each /lock request grants its own lease (LeaseTTL, 5 s by default),
// attaches its key to it and keeps it alive for exactly as long as the
// request lives. When the client's connection closes (the process exits
// or is killed, the socket is closed, a heartbeat write fails or blocks
// for WriteTimeout) the handler revokes the lease at once: the key goes
// with it, and the next waiter, which watches only its predecessor's key,
// is told in the same moment. A client whose host vanishes without a FIN
// or RST stops acknowledging the heartbeats; on Linux the connection is
// given TCP_USER_TIMEOUT = WriteTimeout (10 s), so the kernel fails it,
// and the lock is released, within that time. If the member serving the connection dies,
// nobody revokes the lease and the key goes when the lease expires: the
// lock is released at most LeaseTTL after the member's death.
//
// # Answers
//
// The /lock answer is a stream of JSON lines: "queued" with the number of
// contenders ahead, then "acquired" with the fencing token (the create
// revision of the key, strictly increasing across holders), then blank
// heartbeat lines every Heartbeat while held. /unlock deletes the key only
// if NodeID holds the lock (403 otherwise), records the outcome (Success,
// Err) and answers whether it released. The same NodeID asking /lock again
// for the same resource takes over its existing key (same place, same
// token) instead of queueing twice; the older request is told
// "superseded". A NoWait request answers at once: acquired, or 409 busy
// with the position it would wait at; it never takes a node's existing
// place over. When the node already has a place on another request, the
// answer is 409 busy with that place's position (0 when the node holds
// the lock) and token, and the place stays with the request that owns it,
// as etcd's TryLock from another session answers ErrLocked and leaves the
// holder's key alone: a probe must not move or end what it asks about.
//
// # Credentials
//
// The service sits on the client listener, behind its TLS. It makes its
// calls with the caller's Authorization header as their "authorization"
// metadata, as etcd's JSON gateway does, so with authentication enabled a
// request needs a token (401 without) whose user may read and write the
// service's prefix (403 otherwise); lease renewals carry it too.
//
// # Metrics
//
// metastore_lock_acquisitions_total, metastore_lock_wait_seconds,
// metastore_lock_waiting, metastore_lock_hold_seconds, metastore_lock_held,
// metastore_lock_releases_total{reason}, metastore_lock_waits_abandoned_total{reason},
// metastore_lock_outcomes_total{outcome} and
// metastore_lock_requests_failed_total{code}.
package lockservice
