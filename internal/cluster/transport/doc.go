// Package transport carries raft traffic between the members of one
// cluster: message streams, snapshots, and small request/response calls
// that followers forward to the leader. It implements raftnode.Transport,
// in the spirit of etcd's rafthttp but with its own wire format.
//
// # Why HTTP/2 cleartext and not gRPC
//
// The peer API is plain HTTP/2 over TCP with prior knowledge (h2c), from
// net/http alone (Go >= 1.24 speaks unencrypted HTTP/2 natively). gRPC
// would need generated service code (no protoc here) and frames every
// message on its own (5-byte header, codec, per-message flow-control
// accounting); with a raw HTTP/2 request body the transport decides the
// batching itself, many raft messages per DATA frame and per write, and a
// snapshot image is copied from its file into the request body without a
// message layer in between. HTTP/2 still gives what raw TCP would not:
// multiplexing (stream, probes and forwarded calls share one connection
// per peer), flow control, liveness pings, and one listener that can
// serve HTTP/1 endpoints too.
//
// # Connections and paths
//
// Each member dials each peer on two HTTP/2 connections: one carries its
// outgoing message stream, the probes and forwarded calls; the other only
// snapshots, so that a heartbeat never waits in a TCP buffer behind an
// image. The peer API, served by Handler under /raft/:
//
//	POST /raft/stream            outgoing message stream (one per direction per peer)
//	POST /raft/snapshot          one MsgSnap with its image
//	POST /raft/forward/{method}  one forwarded call
//	GET  /raft/probe             round-trip measurement
//
// Every request carries X-Metastore-Peer-Protocol (1), X-Metastore-From
// (sender ID), X-Metastore-To (the member it is meant for) and
// X-Metastore-Cluster (sender's cluster ID), all IDs in hex as etcd prints
// them. A request of another cluster is refused with 412 and the error
// "member X belongs to cluster Y, expected Z" is logged on both sides (the
// answer names the receiver's cluster so the sender can say which); a
// request meant for another member gets 409 (a URL now used by someone
// else), one from a removed member 410, from an unknown member 403.
//
// # Message stream
//
// A stream is a POST whose body never ends. The receiver answers 200 at
// once (the handshake) and then only reads; the sender treats the end of
// that empty response as the end of the stream. The body is a sequence of
// frames, a big-endian uint32 length then a protobuf raftpb.Message. A
// heartbeat from member 1 to member 2 at term 5, commit 10:
//
//	00 00 00 14                                     length 20
//	08 08  10 02  18 01  20 05                      type 8 (MsgHeartbeat), to 2, from 1, term 5
//	28 00  30 00  40 0a                             logTerm 0, index 0, commit 10
//	50 00  58 00  68 00                             reject false, rejectHint 0, vote 0 (gogo writes zero scalars)
//
// Send never blocks the raft loop: it copies each message (the Entries
// slice, not the entry data, which raft never modifies) into the peer's
// bounded queue and returns. When the peer's stream is down or its queue
// is full, the message is dropped and raft told the peer is unreachable
// (once per Send per peer), which makes the leader probe it instead of
// pipelining. A stream's body Read blocks for the first queued message,
// then encodes every further queued one that fits; the HTTP/2 client
// writes and flushes each Read as one DATA frame, so a burst of appends
// leaves in one write while a lone heartbeat is not delayed. Frames over
// MaxFrameSize are refused on both sides. Messages still queued when a
// stream breaks are dropped.
//
// # Snapshots
//
// raft snapshots carry no data: the image is the member's snapshot file.
// For a MsgSnap the sender opens the file named by the snapshot's term and
// index (raftsnap.Store.OpenImage, which verifies it) and POSTs
//
//	frame(MsgSnap) | image length u64 | image bytes | crc32c(image) u32
//
// on the snapshot connection, one snapshot per peer at a time. The
// receiver writes the image through raftsnap.Store.Save (fsynced and
// renamed into place; a wrong length, checksum or trailing byte fails the
// Save and leaves no file), steps the MsgSnap only after that, and answers
// 204. The sender reports SnapshotFinish on 204 and SnapshotFailure on any
// error, a refusal, or a second snapshot queued while one is in flight,
// so raft never waits for a report that does not come.
//
// # Forwarded calls
//
// Forward POSTs protobuf bytes to a handler registered on the peer with
// RegisterForwardHandler and returns its answer; both are bounded by
// MaxForwardSize. The caller's remaining time travels as
// X-Metastore-Timeout-Us and becomes the handler's context deadline; a
// cancelled caller resets the HTTP/2 stream, which cancels the handler's
// context. A handler error goes back as its gRPC status code
// (X-Metastore-Error-Code) and message, so etcd's rpctypes errors survive
// the hop.
//
// # Reconnection and liveness
//
// Each peer's stream loop reconnects after a failure with exponential
// backoff from BackoffMin to BackoffMax, each pause drawn from the upper
// half of the current step with a source seeded by the two member IDs,
// trying the peer's URLs in turn. A connection that makes no write
// progress for ConnTimeout, or does not answer a ping within ConnTimeout,
// is closed, which ends its streams. Connect and disconnect events are
// logged at most once per 10s per peer, with the count of those skipped.
// A new stream from a peer replaces its previous one.
//
// # Lifecycle
//
// The member needs its transport before it exists, so New takes Raft and
// Snapshots optionally and raftnode.Start attaches the node (Attach)
// before raft runs; until then raft traffic is answered 503 and peers
// retry. Stop (called by whoever created the transport, after the raft
// node stopped) ends every stream, reports queued snapshots failed, closes
// every connection it dialled (an HTTP client closes only idle ones, and a
// connection blocked on a stalled peer is not idle), and waits for the
// transport's goroutines, incoming streams and snapshot receptions.
//
// # Peers from the member list
//
// A PeerSet (peerset.go) keeps the transport's peers in line with the
// replicated member list: seeded from the flags or the running cluster's
// list, then synced after every membership change. PeerHTTPClient is for
// what members ask each other outside the transport (etcd's /members and
// /members/hashkv), with the member's peer TLS.
package transport
