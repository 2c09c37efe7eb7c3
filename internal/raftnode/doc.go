// Package raftnode runs one member of a Raft group (go.etcd.io/raft/v3): it
// persists what raft decides, applies committed entries to a StateMachine,
// takes snapshots, and serves linearizable reads. It is the only package
// that talks to raft; the state machine sees a narrow seam (Apply,
// Snapshot, Restore, AppliedIndex) in the style of hashicorp/raft's FSM,
// and peers are reached through a Transport, nil for a single member.
//
// # Data directory
//
//	DataDir/wal/   the Raft log (package wal)
//	DataDir/snap/  state machine snapshot files (package snapfile)
//
// # Goroutines
//
// Three loops run per member, plus a short-lived snapshot writer:
//
//   - the raft loop ticks raft and processes each Ready in raft's
//     documented order: a leader sends its messages first (it writes its
//     log in parallel with the followers, raft thesis 10.2.1); the Ready's
//     snapshot marker, entries and hard state go to the WAL with ONE fsync
//     (group commit: every proposal raft batched into the Ready shares it)
//     and then into raft.MemoryStorage; committed entries are handed to the
//     apply loop; a follower sends its messages (after waiting for a conf
//     change to be applied); Advance.
//   - the apply loop applies one batch while the raft loop persists the
//     next (pipelining). Batches arrive in log order through one channel,
//     so a snapshot received from the leader is restored exactly between
//     the entries before and after it. After each batch it publishes the
//     applied index and releases linearizable reads waiting for it.
//   - the read loop runs ReadIndex rounds for LinearizableRead (below).
//   - every SnapshotCount applied entries the apply loop takes an Image of
//     the state machine and a background goroutine writes the snapshot
//     file, records a marker in the WAL, then creates the raft snapshot,
//     compacts the in-memory log to index-SnapshotCatchUpEntries and
//     releases WAL segments before the snapshot. One at a time.
//
// # Snapshots carry no data inside raft
//
// Snapshots in raft.MemoryStorage have nil Data: the image lives only in the
// snapshot file named by (term, index). When raft sends a snapshot to a
// lagging follower, the Transport streams that file next to the MsgSnap;
// the receiving Transport stores it with snapfile.Store.Save (see
// Node.Snapshots) before stepping the message. The follower's raft loop
// checks the file is there and valid, writes a snapshot-install record to
// its WAL, and the apply loop restores the state machine from the file.
//
// # Restart
//
// On restart the member uses the newest snapshot that has a marker in the
// WAL (a file without one was cut short by a crash and is removed; a marked
// file that is corrupt stops Start with an error naming it: falling back to
// an older one would silently roll the member back). If the state
// machine's AppliedIndex is below the snapshot, it is restored from the
// file. The WAL entries after the snapshot and the hard state are loaded
// into MemoryStorage, and raft is restarted with Applied = snapshot index:
// raft redelivers every committed entry after the snapshot, the apply loop
// passes to Apply only those above the state machine's AppliedIndex, and
// feeds every conf change among them back to raft (ApplyConfChange), which
// rebuilds its configuration that way. (Starting raft at the state
// machine's AppliedIndex instead would skip those conf changes.)
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
// election timeout or at once when a new leader is known, and is abandoned
// when all its callers gave up. A confirmed round waits for the apply loop
// to reach its index without holding up the next round.
//
// # Failures
//
// A failed WAL write or fsync, a snapshot file that cannot be written, or a
// state machine that cannot restore stops the node (Done closes, Err says
// why): going on without durability would break raft's guarantees.
package raftnode
