// Package raftnode runs one member of a Raft group (go.etcd.io/raft/v3): it
// persists what raft decides, applies committed entries to a StateMachine,
// takes snapshots, and serves linearizable reads. It is the only package
// that talks to raft; the state machine sees a narrow seam (Apply,
// Snapshot, Restore, AppliedIndex, and optionally ValidateConfChange) in
// the style of hashicorp/raft's FSM, and peers are reached through a
// Transport, nil for a single member.
//
// # Data directory
//
//	DataDir/wal/   the Raft log (package wal)
//	DataDir/snap/  state machine snapshot files (package raftsnap)
//
// No other package spells these names (files.go): ReadIdentity tells
// whether a directory holds a log and whose it is, and Seed creates the
// files of a member that starts from a restored snapshot.
//
// # Goroutines
//
// Three loops run per member, plus a short-lived snapshot writer. Raft
// itself is a raft.RawNode behind a mutex (driver.go), not a raft.Node
// with its own goroutine: a caller proposing, stepping a peer's message or
// asking for a read index runs raft's step itself and wakes the raft
// loop, which saves a lone write four goroutine hand-offs.
//
//   - the raft loop ticks raft and processes each Ready in raft's
//     documented order: a leader sends its messages first (it writes its
//     log in parallel with the followers, raft thesis 10.2.1); the Ready's
//     snapshot marker, entries and hard state go to the WAL with ONE fsync
//     (group commit: every proposal raft batched into the Ready shares it)
//     and then into raft.MemoryStorage; Advance (on a single member this
//     commits the entries just made durable, and the loop takes the next
//     Ready with them at once); committed entries are handed to the apply
//     loop; a follower sends its messages (after waiting for a conf change
//     to be applied).
//   - the apply loop applies one batch while the raft loop persists the
//     next (pipelining). Batches arrive in log order through one channel,
//     so a snapshot received from the leader is restored exactly between
//     the entries before and after it. After each batch it publishes the
//     applied index and releases linearizable reads waiting for it.
//   - the read loop runs ReadIndex rounds for LinearizableRead (below).
//   - every SnapshotCount applied entries the apply loop takes an Image of
//     the state machine and a background goroutine writes the snapshot
//     file (or persists the state in place, below), records a marker in
//     the WAL, then creates the raft snapshot, compacts the in-memory log
//     to index-SnapshotCatchUpEntries and releases WAL segments before the
//     snapshot. One at a time. A full image also waits until the entries
//     applied since the last one hold a quarter of that image's size, so
//     a large in-memory store is not rewritten every few seconds under
//     load (maybeSnapshot). The log is bounded in bytes too
//     (Config.MaxLogBytes, logbudget.go): entries holding half the budget
//     are due a snapshot whatever their count, at most half of it stays
//     behind a snapshot for followers, and Overloaded tells the server to
//     refuse proposals while snapshots cannot keep up.
//
// # Conf changes
//
// A committed conf change reaches raft's configuration only through the
// apply loop, in log order: the entries before it are applied first; a
// state machine implementing ConfChangeValidator then accepts or vetoes
// it, deciding from replicated state alone; raft applies the change, or
// in place of a vetoed one a change of node raft.None that leaves its
// configuration as it is (etcd's way); last the entry itself is applied,
// alone in its batch, with the resulting configuration. Invariant: raft's
// configuration is the one the state machine's accepted changes describe
// (for the server: its member list), on every member, also when two
// conflicting changes were proposed on two members and both committed.
// On restart the state machine repeats for entries it already holds the
// decisions it recorded when applying them.
//
// # Snapshots carry no data inside raft
//
// Snapshots in raft.MemoryStorage have nil Data: the image lives only in the
// snapshot file named by (term, index). When raft sends a snapshot to a
// lagging follower, the Transport streams that file next to the MsgSnap;
// the receiving Transport stores it with raftsnap.Store.Save (see
// Node.Snapshots) before stepping the message. The follower's raft loop
// checks the file is there and valid, writes a snapshot-install record to
// its WAL, and the apply loop restores the state machine from the file.
//
// # Snapshots persisted in place
//
// A state machine whose engine keeps its state on disk (RocksDB) holds
// every applied entry already; it only lacks an fsync, since it commits
// without one (the WAL is the durable record). Writing a full image of it
// every SnapshotCount entries (some 300 MB for a million keys) would buy
// nothing. Its Image implements PersistentImage, and a routine snapshot
// at index X then goes:
//
//  1. Persist: the engine fsyncs its own log, so it holds at least X
//     durably (it may hold more);
//  2. the snapshot file for X is written with the in-place marker
//     (inPlaceMarker, a few bytes) as its image;
//  3. WAL marker, raft snapshot, log compaction and WAL release as for a
//     full image. Entries up to X may go: the engine no longer needs them
//     for replay.
//
// Full images are still made, but only when a follower needs one. raft
// asks its Storage for the snapshot to send (and for nothing else);
// raftStorage answers only with the newest snapshot if its file holds a
// full image (fullSnapshotIndex) and it was taken under the applied
// configuration. Otherwise it answers raft.ErrSnapshotTemporarilyUnavailable,
// which raft retries on the next heartbeat response, and asks the apply
// loop for a full snapshot: the next snapshot, taken at once, is written
// out with Image.WriteTo (which the engine streams from a consistent read
// view). When it is in MemoryStorage, raft sends it. (The configuration
// rule holds for every engine: a member added after the newest snapshot
// is not in that snapshot's ConfState, and raft on the new member ignores
// such a snapshot, so sending it would never let the member catch up.) So the transport only ever opens files
// with a full image for a MsgSnap (raftsnap.Store.OpenImage, unchanged),
// and a member never receives a marker (persist refuses one anyway).
//
// Example, SnapshotCount 10000, a RocksDB member and a follower that fell
// behind: snapshots at 10001 and 20002 are markers (files of 60 bytes);
// at 25000 raft wants to send the follower a snapshot, gets
// "temporarily unavailable", the apply loop writes a full image at 25000
// (applied index then), and raft sends that one on the next heartbeat.
// The snapshot at 35001 is a marker again. The memory engine's Image does
// not persist in place, so all of its snapshots are full images.
//
// # Restart
//
// On restart the member uses the newest snapshot that has a marker in the
// WAL (a file without one was cut short by a crash and is removed; a marked
// file that is corrupt stops Start with an error naming it: falling back to
// an older one would silently roll the member back). If the state
// machine's AppliedIndex is below the snapshot, it is restored from the
// file; a persisted-in-place snapshot has no image to restore from, so an
// engine behind it has lost data it had made durable, and Start refuses.
// A RocksDB member therefore restarts without reading any image: its
// engine reports what it holds, and only the WAL entries after that are
// applied again. The WAL entries after the snapshot and the hard state
// are loaded into MemoryStorage, and raft is restarted with Applied =
// snapshot index: raft redelivers every committed entry after the
// snapshot, the apply loop passes to Apply only those above the state
// machine's AppliedIndex, and feeds every conf change among them back to
// raft (ApplyConfChange, vetoed ones as the no-op again), which rebuilds
// its configuration that way. (Starting raft at the state machine's
// AppliedIndex instead would skip those conf changes.) A member
// that is its configuration's only voter campaigns at once on restart
// (skipElectionWaitIfAlone) rather than after an election timeout, so
// that it serves reads sooner.
// Invariants checked on restart: the WAL's member and cluster IDs match
// Config (else Start refuses); the WAL continues the snapshot without a
// gap; the state machine is not ahead of the log.
//
// # Linearizable reads
//
// LinearizableRead joins the next ReadIndex round. The read loop starts a
// round as soon as the previous one is confirmed, so every read that
// arrives while a round is in flight shares the following one (batching,
// like etcd's linearizableReadLoop). A round asks raft for the leader's
// commit index confirmed by a heartbeat quorum, re-asks after half an
// election timeout or at once when a new leader is known, is abandoned
// when all its callers gave up, and ends with ErrReadTimeout for all of
// them once Config.ReadTimeout has passed since it started (one timer per
// round, none per read). A confirmed round waits for the apply loop
// to reach its index without holding up the next round. A request's
// context (member ID, sequence number) is unique across members and
// incarnations: the leader's raft silently drops a request whose context
// is already pending, so with a bare per-member counter the members
// would lose requests to each other (see readRequestCtxLen).
//
// # Failures
//
// A failed WAL write or fsync, a snapshot file that cannot be written, or a
// state machine that cannot restore stops the node (Done closes, Err says
// why): going on without durability would break raft's guarantees.
package raftnode
