// Package rafthttp holds etcd's peer protocol (etcd's
// etcdserver/api/rafthttp), so that MetaStore members and etcd 3.5 and 3.6
// members can exchange raft traffic in one cluster. It is the protocol's
// wire layer: the two stream encodings and their limits (codec.go), the
// paths (paths.go), the headers every request carries with the checks a
// receiver makes of them (headers.go), and the answer to etcd's prober
// (probing.go). internal/cluster/transport speaks it: the streams, the
// pipeline, snapshots and the peers' lifecycle.
//
// # Headers
//
// Every request names its sender (X-Server-From, hex member ID), the
// sender's etcd version and the lowest cluster version it joins
// (X-Server-Version, X-Min-Cluster-Version), its cluster (X-Etcd-Cluster-ID)
// and its peer URLs (X-PeerURLs). A receiver refuses a sender whose
// major.minor version is below its own minimum cluster version, or whose
// minimum is above its own version, with 412 and the body "incompatible
// version"; then one of another cluster, with 412 and "cluster ID
// mismatch". A removed sender gets 403. Between etcd 3.5, etcd 3.6 and
// MetaStore (which says it is etcd 3.6) every pair passes the version
// check.
//
// # Streams
//
// A member that wants to hear from a peer opens a long-lived GET to the
// peer's /raft/stream/message/<local id> or /raft/stream/msgapp/<local id>
// and reads messages from the response body until either side goes. The
// body is one of two encodings.
//
// The "message" encoding carries any raft message as an 8-byte big-endian
// length and the message's protobuf encoding. An idle stream carries a
// link heartbeat, a MsgHeartbeat with From and To zero, that the reader
// drops. For a MsgHeartbeat from 2 to 1 in term 5:
//
//	00 00 00 00 00 00 00 14              length 20
//	08 08 10 01 18 02 20 05              Type=MsgHeartbeat(8) To=1 From=2 Term=5
//	28 00 30 00 40 00 50 00 58 00 68 00  LogTerm Index Commit Reject RejectHint Vote: 0
//
// (raftpb's Marshal writes every scalar field, zero or not).
//
// The "msgapp" (v2) encoding carries only MsgApp, in three frame kinds
// told apart by their first byte. A full frame (2) resets both sides'
// expectation of the next append; an entries frame (1) leaves out every
// field the reader can predict: while a leader replicates to a follower in
// one term, each MsgApp's Index and LogTerm are the last entry sent before
// and the term. Both sides keep (term, index) after every frame.
//
//	00                                            link heartbeat
//	01  count u64  (len u64, entry)×count  commit u64   entries frame
//	02  len u64  Message                          full frame
//
// Worked example: a full MsgApp with Term 3, LogTerm 3, Index 10 and
// entries 11 and 12 leaves both sides at (3, 12). The next MsgApp, Term 3,
// LogTerm 3, Index 12, one entry (13) and Commit 12, goes as 01, count 1,
// the entry's length and bytes, and 12; the reader rebuilds From=peer,
// To=local, Term=LogTerm=3, Index=12, and both sides move to (3, 13). A
// MsgApp whose Index or LogTerm differs (after a rejection, a new term)
// goes as a full frame again.
//
// # Limits
//
// etcd's readers trust the peer: a length of 2^60 makes them allocate it,
// and bytes that are not a message panic. The decoders here refuse a
// message or entry longer than their limit (512 MiB by default, etcd's
// readBytesLimit), grow entry slices as entries arrive rather than by the
// announced count, and return an error for anything that does not decode,
// so a damaged or hostile stream ends the stream and nothing else.
package rafthttp
