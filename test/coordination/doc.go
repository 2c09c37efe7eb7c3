// Package coordination is the fault suite of MetaStore's locks: it runs
// contended locking on a 3-member cluster while members freeze, die and
// lose their peer links, and judges what every holder believed against
// the safety model of docs/coordination-safety.md.
//
// # Workload
//
// Three resources per lock API, four contenders per resource, contender j
// of resource r bound to member (r + j) mod 3, so every lock has waiters
// on every member. Each contender locks, holds for a random time
// (20-300 ms; one hold in eight 8-11 s, longer than a lease outlives a
// frozen member, so that a holder nobody tells it lost the lock is still
// at work when the next holder is granted), and unlocks, over and over:
//
//   - through the HTTP lock service (pkg/lockclient against one member's
//     client URL, one attempt per call, the default 5 s first-answer
//     timeout; Type "coord", ResourceID r0..r2, the contender's NodeID);
//   - through the SDK's fenced lock (pkg/concurrency/lock, a Locker on a
//     clientv3 client bound to one member, lease TTL 5 s, the same TTL as
//     the HTTP service's).
//
// The two APIs keep their queues under different prefixes, so http/r0
// and sdk/r0 are two locks. A lock call may wait 60 s, an SDK
// contender's unlock 30 s (retried after errors, as the SDK asks: the
// handle holds the lock until Unlock succeeds or finds it lost): those
// contexts only keep a run finite; the checker, not them, decides what
// took too long.
//
// # What is recorded
//
// Everything is timed on the test process's clock (History). Every call
// (lock, unlock) with its send and return times; an HTTP /lock call also
// with every read of its stream (the queued event and the service's
// heartbeat line every second), which a wrapped http.Transport sees while
// lockclient reads. Every key of the SDK's queues, as an observer
// watching them through all members sees it come and go (its value names
// the contender). Every belief: a holder holds from the moment its lock
// call returned the lock to the first of its unlock being sent and Lost()
// firing, with its fencing token (Token, FencingToken).
//
// The checker plays the protected resource: a fenced store per lock that
// remembers the highest token written and refuses a smaller one, as a
// real fenced store would. Each holder writes to it when granted and, if
// it still believes, once more just before it unlocks: the write that a
// stale holder gets wrong. Refusals are counted.
//
// # Rules (Check)
//
//   - fencing: in grant order, tokens only increase across successive
//     holders of a lock (a holder given its own place back keeps its
//     token), and a stale holder's late write is refused by the fenced
//     store.
//   - overlap: no two holders believe at the same instant. Each grant must
//     come after every earlier belief of the lock ended (one violation per
//     stale belief, however many grants it overlaps), with no margin:
//     both ends are read on the one clock, each on the holder's own side,
//     so any overlap is real. The run reports the smallest gap seen
//     between one belief's end and the next grant.
//   - fifo: an HTTP waiter the service said was queued before another
//     contender asked is granted first. A contender asks with the first
//     lock call since its last clean unlock (the service gives a node
//     its own surviving place back). SDK waiters say nothing while they
//     wait; their queue order is their claim tokens, which fencing checks.
//   - hang: no call goes unanswered for longer than the members' request
//     timeout (7 s) plus a 2 s margin. An HTTP lock call legitimately
//     queued behind a holder hears the heartbeats; one on a dead or
//     frozen stream hears nothing, so silence is the test, queued or not.
//     An SDK lock call says nothing while it waits: it is hung when it
//     went the bound neither answered nor with a key in the queue (a key
//     waiting in line is queued, however long, even behind a dead
//     holder's key that waits for its lease).
//   - lease: a plain lease (TTL 5 s) kept alive with clientv3 KeepAlive
//     through a follower still exists after each leader freeze and cut,
//     when a leader is agreed again.
//   - release: a lock its holder's client abandoned without a word (its
//     host vanished, or it stopped reading: the faults on the clients'
//     side) goes to the next waiter within the bound internal/lockservice
//     documents for that case, plus a margin for a loaded machine: 12 s +
//     1 s for a vanished host, 30 s + 5 s for a holder that stops
//     reading (VanishBound, StopReadingBound), counted from the cut or
//     the last read.
//
// checker_test.go feeds the checker hand-written histories that break
// each rule: a checker that cannot fail is a defect.
//
// # Faults
//
// A Fault hurts, holds, heals and returns; the runner then waits until
// every member is ready and lets the workload run a 3 s calm. The faults
// of this package, each held 12 s (freezes and cuts), 4 s (kills) or
// until the abandoned lock went to the next waiter (the clients' side);
// the freezes and cuts strike just after a long hold was granted through the
// member they hurt (waiting up to 30 s for one), so that every run has a
// holder at work past its lease (an HTTP one for the freezes, an SDK one
// for the cut):
//
//	member-freeze   SIGSTOP a follower
//	leader-freeze   SIGSTOP the leader (with a lease probe)
//	peer-cut        cut the leader's peer links (framework.PeerNetwork:
//	                isolate, then stall on the next injection; with a
//	                lease probe)
//	follower-kill   SIGKILL a follower, restart it on its data
//	leader-kill     SIGKILL the leader, restart it
//	quorum-loss     SIGKILL the leader and a follower, restart both
//	vanished-host   a holder in a client host (framework.ClientHost, a
//	                network namespace) loses its link: no FIN, no RST
//	stops-reading   a raw holder stops reading its stream, its socket
//	                open
//
// The last two are faults on the clients' side: each runs a holder of
// its own on one of the workload's HTTP locks, queued with the
// workload's contenders and recorded in Env.Hist beside them, and strikes
// as soon as it holds the lock. The vanished host's holder is this test
// binary run again inside the namespace (child.go), with lockclient,
// through a client URL the first member also listens on, on the
// namespace's link (the member is restarted with it before the workload
// starts); it reports its calls, its grant and its Lost() on its stdout
// with its own time stamps. Its own deadline must end its belief before
// the next grant (overlap). The raw holder cannot be told anything, so
// its belief ends when it stopped reading; once the lock went to the
// next holder it makes one late write with its token, which the fenced
// store must refuse (fencing). Both need root (the namespace) or plain
// HTTP (a raw client, a link whose address no certificate names) and
// are left out, with the reason logged, otherwise.
//
// Each fault has a window, from its injection to the end of its calm; a
// violation belongs to the window it happened in, and each fault is a
// subtest (TestCoordination/member-freeze, ...) that fails with the
// violations of its windows ("calm" takes the others).
//
// # Scales
//
// make test runs every fault once, in the order above, on each engine
// (test-e2e-rocksdb runs the package again with
// E2E_EXTRA_FLAGS=--storage-engine=rocksdb): about 170 s. make
// test-coordination-long DURATION=10m ENGINE=memory|rocksdb cycles the
// faults in a random order each round for -coord.duration (-coord.seed
// replays a run's choices; -coord.history=FILE writes its history as
// JSON, to look into a verdict). Every run ends
// with a summary line: operations, grants, fenced writes and refusals,
// faults injected, the smallest gap between beliefs, the longest silence
// of a call, the longest lock wait, how long each abandoned lock took to
// go to the next waiter, and the verdict.
//
// The suite skips against etcd, which has no HTTP lock service.
package coordination
