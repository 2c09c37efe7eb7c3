package rafthttp

// The paths of etcd's peer API that carry raft traffic (ProbingPath is
// with its handler).
const (
	// PipelinePath takes one POSTed message (its protobuf bytes), answered
	// 204 once raft has it.
	PipelinePath = "/raft"
	// StreamMessagePath and StreamMsgAppPath, followed by "/<reader's
	// id>", open a stream: a GET whose response carries messages from the
	// answering member to the reader, in the "message" or msgapp (v2)
	// encoding.
	StreamMessagePath = "/raft/stream/message"
	StreamMsgAppPath  = "/raft/stream/msgapp"
	// SnapshotPath takes a POSTed MsgSnap in the "message" encoding
	// followed by the snapshot's state, answered 204 once the state is
	// stored and raft has the message.
	SnapshotPath = "/raft/snapshot"
)
