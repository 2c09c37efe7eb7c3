package etcdcompat

import (
	"context"
	"io"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Member is what the services need from the local member. MetaStore's
// member implements it; so can a program outside this
// module that serves etcd's API over its own state (see
// member_external_test.go). Keeping it an interface keeps this package a
// thin translation layer that can be tested without Raft.
//
// Errors: a member returns etcd's gRPC statuses (rpctypes.ErrGRPC*),
// which reach the client unchanged, or context errors; anything else
// becomes codes.Unknown with its text. (MetaStore's own member returns
// its own errors, which this package maps to etcd's statuses.)
type Member interface {
	Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error)
	Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error)
	DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error)
	Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error)
	Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error)
	// LinearizableRead waits until this member has applied everything
	// committed when it was called.
	LinearizableRead(ctx context.Context) error

	HashKV(rev int64) (HashKVResult, error)
	Hash() (uint32, error)
	// Defragment reclaims the storage engine's free space.
	Defragment(ctx context.Context) error
	// Snapshot opens a point-in-time image of the member's whole state,
	// the file `etcdctl snapshot save` writes.
	Snapshot(ctx context.Context) (SnapshotImage, error)
	Status() MemberStatus
	// Alarm serves Maintenance.Alarm through Raft; Alarms lists the
	// active alarms as this member applied them.
	Alarm(ctx context.Context, r *pb.AlarmRequest) (*pb.AlarmResponse, error)
	Alarms() []*pb.AlarmMember
	Members() []*membershippb.Member

	ID() uint64
	ClusterID() uint64
	Term() uint64
	Rev() int64

	LeaseMember

	// NewWatchStream opens the watch stream behind one client's Watch
	// RPC.
	NewWatchStream() WatchStream
	ClusterMember
}

// HashKVResult is the answer to Member.HashKV: etcd's HashKV figures.
type HashKVResult struct {
	// Hash covers the MVCC history up to HashRevision.
	Hash uint32
	// Revision is the store revision when the hash was taken.
	Revision int64
	// CompactRevision is the compacted revision then (-1: none).
	CompactRevision int64
	// HashRevision is the revision the hash is of.
	HashRevision int64
}

// MemberStatus is the member's view of itself for Maintenance.Status.
type MemberStatus struct {
	Leader       uint64 // 0: none known
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64
	DBSize       int64
	DBSizeInUse  int64
	IsLearner    bool
	// QuotaBytes is the backend quota in force.
	QuotaBytes int64
}

// SnapshotImage is a point-in-time image of the member's whole state as
// the file `etcdctl snapshot save` writes: the image, then its sha256
// digest (sha256.Size bytes).
type SnapshotImage interface {
	// Size is the number of bytes WriteTo writes, digest included.
	Size() int64
	WriteTo(w io.Writer) (int64, error)
	// Release lets the image go; it is called once, after WriteTo.
	Release()
}

// WatchStream is one client's set of watches, with etcd's watch
// semantics; the Watch service relays a gRPC stream to it. Watch,
// Cancel and RequestProgress are called from one goroutine, Next from
// another, Close last.
type WatchStream interface {
	// Watch creates a watch as the request describes and queues etcd's
	// answer: a created response carrying the watch ID, or a
	// created-and-canceled one with watch ID -1 and the reason.
	Watch(req *pb.WatchCreateRequest) (int64, error)
	// Cancel ends a watch and queues etcd's canceled response; false if
	// the stream has no such watch.
	Cancel(id int64) bool
	// RequestProgress asks for etcd's stream-wide progress notification.
	RequestProgress()
	// Next waits until responses are queued and appends them to dst in
	// the order they must be sent. It fails with ctx's error, or (e.g.
	// rpctypes.ErrGRPCStopped) once the member stops.
	Next(ctx context.Context, dst []WatchResponse) ([]WatchResponse, error)
	// Close ends every watch of the stream.
	Close()
}

// WatchResponse is one message of a watch stream; the service adds the
// cluster and member IDs and the Raft term to its header.
type WatchResponse struct {
	WatchID int64
	// Revision is the header revision.
	Revision        int64
	Events          []*mvccpb.Event // read only: may be shared with other streams
	CompactRevision int64
	Created         bool
	Canceled        bool
	CancelReason    string
	// Fragment: the watcher asked for large responses to be split.
	Fragment bool
}

// RangeStreamMember is a Member that serves etcd 3.7's RangeStream
// (/etcdserverpb.KV/RangeStream); the service answers codes.Unimplemented
// for a member that does not. RangeStream serves a RangeRequest that has
// passed validation and has the natural sort order, with the same
// permission check and linearizable read as Range, calling send with
// each chunk in order (see package rangestream for the layout); the last
// chunk's header has its revision, the service fills in the rest.
// chunkBytes is the target encoded size of a chunk's key-values.
type RangeStreamMember interface {
	RangeStream(ctx context.Context, r *pb.RangeRequest, chunkBytes int, send func(*pb.RangeResponse) error) error
}
