// Package transport carries raft traffic between the members of one
// cluster: message streams, snapshots, and small request/response calls
// that followers forward to the leader. It implements raftnode.Transport
// with etcd's peer protocol (etcd's rafthttp; its wire layer is package
// internal/cluster/rafthttp), so that the peers of a MetaStore member may
// be MetaStore or etcd members alike.
//
// # Why etcd's protocol between MetaStore members too
//
// The transport used to speak a protocol of its own over cleartext
// HTTP/2 (one multiplexed connection per peer, many messages per DATA
// frame). It now speaks only etcd's, over HTTP/1.1: an etcd peer needs it
// anyway, one protocol is one set of failure modes, and, measured side by
// side (docs/performance.md, "Peer transport"), the HTTP/1.1 streams move
// raft messages at least as fast: each message is a length and its
// protobuf bytes on a connection of its own, read by one goroutine that
// steps it, where HTTP/2 adds a frame reader, a serve loop and flow
// control between the socket and raft. Nothing on the peer port speaks
// HTTP/2, so a process's HTTP/2 debugging shows only its clients.
//
// # Paths and who dials whom
//
// Served by Handler, on the peer listener:
//
//	GET  /raft/stream/message/<id>   stream: any message but MsgSnap, to member <id>
//	GET  /raft/stream/msgapp/<id>    stream: MsgApp only, msgapp v2 encoding
//	POST /raft                       one message (etcd's pipeline)
//	POST /raft/snapshot              one MsgSnap with its state
//	GET  /raft/probing               etcd's prober, answered to anyone
//	POST /raft/forward/{method}      one forwarded call (MetaStore only)
//
// A stream is opened by its reader: to hear from peer P, a member keeps a
// GET of each kind open to P, and P writes its messages for that member
// to the response. So a member's messages to P leave on connections P
// dialled, and what it receives arrives on connections it dialled. Its
// readers wait until the local raft node is attached: nothing received
// before could be stepped.
//
// A member's connections to its peers come from LocalAddr when set
// (etcd's SetMemberLocalAddr), else from where the kernel routes them.
//
// Every request carries etcd's headers (rafthttp.Local.SetRequestHeaders:
// sender ID, server and minimum cluster version, cluster ID, peer URLs)
// and X-Raft-To. A receiver refuses, as etcd does and with etcd's answer
// bodies: incompatible versions or another cluster with 412 (logged on
// both sides, naming the clusters: "member 1 belongs to cluster aa,
// expected bb"); then, for a stream, a malformed or unknown sender with
// 404 ("error sender not found"), a removed one with 410 ("removed
// member"), one meant for another member with 412 ("to field mismatch");
// for a POST, a removed sender with 403. Raft traffic is answered 503
// until the node is attached, and peers retry.
//
// # Message streams
//
// The writer of a stream (serveStream) attaches itself as the peer's
// outgoing stream of its kind, replacing an older one, answers 200 at once
// and then writes. Send never blocks the raft loop: it copies each message
// (the Entries slice, not the entry data, which raft never modifies) into
// the queue of the peer's msgapp stream if it is a MsgApp and that stream
// is open, else of its message stream, and returns. With neither open it
// goes to the pipeline (pipeline.go, etcd's): four workers POST queued
// messages one by one to the peer's /raft, so a peer that cannot open
// streams to this member (it refuses the peer's certificate, say) still
// hears from it; only peers known to be MetaStore members get them. When
// no queue can take the message, it is dropped and raft told the peer is
// unreachable (once per Send per peer), which makes the leader probe it
// instead of sending appends optimistically; so is a failed POST. The writer encodes what is queued, up to 64 KiB,
// then flushes, so a burst of appends leaves in one write while a lone
// heartbeat is not delayed; an idle stream carries a link heartbeat every
// ConnTimeout/3. Messages still queued when a stream ends are dropped.
//
// A reader (runStream, one per kind per peer) decodes and steps each
// message in order, dropping link heartbeats and anything not from the
// peer to this member. Messages or entries over MaxFrameSize end the
// stream; so does a damaged one.
//
// # Snapshots
//
// raft snapshots carry no data: the image is the member's snapshot file.
// For a MsgSnap the sender opens the file named by the snapshot's term and
// index (raftsnap.Store.OpenImage, which verifies it) and POSTs
//
//	MsgSnap ("message" encoding) | image length u64 | image bytes | crc32c(image) u32
//
// marked X-Metastore-Snapshot-Image: 1, one snapshot per peer at a time.
// (An etcd member sends its bbolt database after the message instead; this
// member refuses that with 415 until it can take etcd's state.) The
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
// cancelled caller closes the connection, which cancels the handler's
// context. A handler error goes back as its gRPC status code
// (X-Metastore-Error-Code) and message, so etcd's rpctypes errors survive
// the hop.
//
// # Reconnection and liveness
//
// Each reader reconnects after a failure with exponential backoff from
// BackoffMin to BackoffMax, each pause drawn from the upper half of the
// current step with a source seeded by the two member IDs, the message
// reader trying the peer's URLs in turn. A stream connection on which a
// read or a write makes no progress for ConnTimeout (etcd's 5 s
// ConnReadTimeout and ConnWriteTimeout) is closed, which ends the stream:
// that is how a frozen peer or a cut link is noticed. Connect and
// disconnect events are logged at most once per 10s per peer and kind,
// with the count of those skipped.
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
