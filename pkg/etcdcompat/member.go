package etcdcompat

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"

	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/server"
	"github.com/metastore-io/metastore/internal/watch"
)

// Member is what the services need from the local member; *server.Server
// implements it. Keeping it an interface keeps this package a thin
// translation layer that can be tested without Raft.
type Member interface {
	Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error)
	Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error)
	DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error)
	Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error)
	Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error)
	// LinearizableRead waits until this member has applied everything
	// committed when it was called.
	LinearizableRead(ctx context.Context) error

	HashKV(rev int64) (kvstore.HashKVResult, error)
	Hash() (uint32, error)
	// Defragment reclaims the storage engine's free space.
	Defragment(ctx context.Context) error
	// Snapshot opens a point-in-time image of the member's whole state,
	// the file `etcdctl snapshot save` writes.
	Snapshot(ctx context.Context) (server.SnapshotImage, error)
	Status() server.Status
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

	// WatchHub serves the Watch service's streams.
	WatchHub() *watch.Hub
	ClusterMember
}

var _ Member = (*server.Server)(nil)
