package statemachine

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/lease"
)

// writeRev is the revision the apply side is at (committed or not), which
// etcd reports in the headers of lease entries.
func writeRev(kv *kvstore.Store) int64 {
	tw := kv.Write()
	defer tw.End()
	return tw.Rev()
}

// ApplyLeaseGrant applies a LeaseGrant entry: the ID and the TTL were
// chosen by the proposer (lease.Lessor.NormalizeTTL), so every member
// grants the same lease.
func ApplyLeaseGrant(lessor *lease.Lessor, kv *kvstore.Store, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	ttl, err := lessor.ApplyGrant(kv, r.ID, r.TTL)
	if err != nil {
		return nil, err
	}
	return &pb.LeaseGrantResponse{Header: &pb.ResponseHeader{Revision: writeRev(kv)}, ID: r.ID, TTL: ttl}, nil
}

// revokeDeleter deletes a revoked lease's keys in one write transaction
// (one revision) and remembers the revision the store is at afterwards.
type revokeDeleter struct {
	*kvstore.Store
	rev int64
}

func (d *revokeDeleter) DeleteKeys(keys [][]byte) error {
	tw := d.Write()
	for _, k := range keys {
		tw.DeleteRange(k, nil)
	}
	d.rev = tw.Rev()
	if tw.Changed() {
		d.rev++
	}
	tw.End()
	return nil
}

// ApplyLeaseRevoke applies a LeaseRevoke entry: the lease goes, and its
// keys with it, in one revision.
func ApplyLeaseRevoke(lessor *lease.Lessor, kv *kvstore.Store, r *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error) {
	d := &revokeDeleter{Store: kv, rev: -1}
	if err := lessor.ApplyRevoke(d, r.ID); err != nil {
		return nil, err
	}
	return &pb.LeaseRevokeResponse{Header: &pb.ResponseHeader{Revision: d.rev}}, nil
}

// ApplyLeaseCheckpoint applies a LeaseCheckpoint entry: the remaining
// TTLs the leader recorded, so that a new leader does not restart them.
func ApplyLeaseCheckpoint(lessor *lease.Lessor, kv *kvstore.Store, r *pb.LeaseCheckpointRequest) (*pb.LeaseCheckpointResponse, error) {
	lessor.ApplyCheckpoint(kv, r.Checkpoints)
	return &pb.LeaseCheckpointResponse{Header: &pb.ResponseHeader{Revision: writeRev(kv)}}, nil
}
