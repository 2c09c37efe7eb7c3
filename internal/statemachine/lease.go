package statemachine

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/kvstore"
)

// writeRev is the revision the apply side is at (committed or not), which
// etcd reports in the headers of lease entries.
func writeRev(kv *kvstore.Store) int64 {
	tw := kv.Write()
	defer tw.End()
	return tw.Rev()
}

// applyLeaseGrant applies a LeaseGrant entry: the ID and the TTL were
// chosen by the proposer (lease.Lessor.NormalizeTTL), so every member
// grants the same lease.
func (sm *StateMachine) applyLeaseGrant(r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	kv := sm.KV
	ttl, err := sm.Lessor.ApplyGrant(kv, r.ID, r.TTL)
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

// applyLeaseRevoke applies a LeaseRevoke entry: the lease goes, and its
// keys with it, in one revision.
func (sm *StateMachine) applyLeaseRevoke(r *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error) {
	d := &revokeDeleter{Store: sm.KV, rev: -1}
	if err := sm.Lessor.ApplyRevoke(d, r.ID); err != nil {
		return nil, err
	}
	return &pb.LeaseRevokeResponse{Header: &pb.ResponseHeader{Revision: d.rev}}, nil
}

// applyLeaseCheckpoint applies a LeaseCheckpoint entry: the remaining
// TTLs the leader recorded, so that a new leader does not restart them.
func (sm *StateMachine) applyLeaseCheckpoint(r *pb.LeaseCheckpointRequest) (*pb.LeaseCheckpointResponse, error) {
	sm.Lessor.ApplyCheckpoint(sm.KV, r.Checkpoints)
	return &pb.LeaseCheckpointResponse{Header: &pb.ResponseHeader{Revision: writeRev(sm.KV)}}, nil
}
