// Package lockservice is MetaStore's HTTP lock service for clients that
// speak plain HTTP (the lock-server design; docs/coordination.md in the
// repository says what it asked for and where this differs): one FIFO queue
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
// (pkg/concurrency/queue): the key with the smallest create revision holds the
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
// is told in the same moment. Bounds, with the default flags (the
// figures measured against them are in docs/coordination-safety.md,
// "Measured"):
//
//   - A client whose host vanishes without a FIN or RST stops
//     acknowledging the heartbeats; the connection has TCP_USER_TIMEOUT =
//     WriteTimeout (10 s), counted by the kernel from the first heartbeat
//     left unacknowledged (up to Heartbeat, 1 s, after the host went), so
//     the lock is released within WriteTimeout + Heartbeat + 1 s = 12 s.
//   - A client that stops reading with its socket open is dropped once its
//     buffers are full: each heartbeat of a held lock is padded to
//     HeartbeatPadding (16 KiB) of spaces and the connection's send buffer
//     is cut to 4 KiB (the kernel doubles it), so the about 190 KB of a
//     Linux client's default 128 KiB receive buffer and the member's side
//     fill in some 12 s, and the write that then blocks fails after
//     WriteTimeout: released within 30 s. A client with
//     a larger receive buffer R takes R/16 KiB seconds more. The cost is
//     16 KiB/s per held lock on the wire (16 MB/s for 1,000 held locks);
//     the bound is for HTTP/1.1, whose connection carries the stream alone
//     and is closed after it (over HTTP/2 the stream's flow-control window,
//     4 MiB for Go's client, must fill instead).
//   - If the member serving the connection dies or is frozen, nobody
//     revokes the lease and the key goes when it expires on the leader.
//     After the death of a follower that is at most LeaseTTL: the leader
//     keeps the lease's clock. After the death of the
//     leader it is at most LeaseTTL plus the election, 5 s + 3 election
//     timeouts = 8 s with the defaults: the survivors take up to two
//     election timeouts to elect a new leader, and the new leader, as
//     etcd's does, starts every lease's clock again at a whole TTL plus one
//     election timeout, since it cannot know when the old one last renewed.
//
// # Without quorum
//
// Each call the service makes to the member is bounded by the member's
// request timeout (Config.RequestTimeout) and a second: without quorum the
// member fails a call within its request timeout, and the request is
// answered 503 with etcd's message for it instead of hanging.
//
// # Holding under partial failures
//
// The model is docs/coordination-safety.md's. The member records the send
// time s of each renewal; once the leader confirms it (TTL > 0) the
// holder's deadline becomes s + L·(1−2ρ) − D, with ρ = 1% the clock-rate
// drift allowed and D = LockDelay (1 s): 3.9 s after the send for a 5 s
// lease. A timer fires at the deadline itself: the stream is told "lost"
// and the lease is not revoked but left to expire, which it does no sooner
// than s + L·(1−ρ) on the leader, so no other grant comes within D + ρL of
// the holder's deadline. A clean close before the deadline still revokes
// at once.
//
// Renewals go every tenth of the TTL (0.5 s); one unanswered or failed is
// followed by another every 300 ms, each with its own 1 s deadline, so a
// leader change (a new leader in 1 to 2.5 s, which gives every lease a
// whole TTL again) is ridden through: the first renewal the new leader
// answers moves the deadline before it passes. A lock delay of up to about
// 1.5 s keeps that margin; New refuses one at or above L·(1−2ρ) less a
// renewal period, which would leave no validity between renewals.
//
// A client that asks for it (lockapi.LockRequest.ReportValidity) gets the
// deadline as valid_ms on the acquired event and on a "held" event in
// place of each blank keep-alive; pkg/lockclient opts in and takes the lock
// as lost at the receipt of the last line plus valid_ms, which is what
// tells a holder whose member froze (and so writes nothing) that it lost
// the lock, D + ρL (1.05 s) before the next grant can come.
//
// # Answers
//
// The /lock answer is a stream of JSON lines: "queued" with the number of
// contenders ahead, then "acquired" with the fencing token (the create
// revision of the key, strictly increasing across holders), then a
// heartbeat line every Heartbeat while held (blank, or a "held" event
// with valid_ms for a request that asked for ReportValidity). /unlock deletes the key only
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
