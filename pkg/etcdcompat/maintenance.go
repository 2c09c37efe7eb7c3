package etcdcompat

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// maintenanceService is etcd's Maintenance service.
type maintenanceService struct {
	pb.UnimplementedMaintenanceServer
	srv Member
	hdr headerFiller
}

func (m *maintenanceService) Status(ctx context.Context, _ *pb.StatusRequest) (*pb.StatusResponse, error) {
	st := m.srv.Status()
	resp := &pb.StatusResponse{
		Header:           m.hdr.header(),
		Version:          EtcdServerVersion,
		Leader:           st.Leader,
		RaftIndex:        st.CommitIndex,
		RaftAppliedIndex: st.AppliedIndex,
		RaftTerm:         st.Term,
		DbSize:           st.DBSize,
		DbSizeInUse:      st.DBSizeInUse,
		IsLearner:        st.IsLearner,
		DbSizeQuota:      st.QuotaBytes,
		StorageVersion:   storageVersionOf(m.srv),
		DowngradeInfo:    &pb.DowngradeInfo{},
	}
	if dm, ok := m.srv.(DowngradeMember); ok {
		resp.DowngradeInfo.Enabled, resp.DowngradeInfo.TargetVersion = dm.DowngradeInfo()
	}
	if st.Leader == 0 {
		resp.Errors = append(resp.Errors, "etcdserver: no leader")
	}
	// Each active alarm as etcd writes it: the AlarmMember's text form,
	// "memberID:1234 alarm:NOSPACE ".
	for _, a := range m.srv.Alarms() {
		resp.Errors = append(resp.Errors, a.String())
	}
	return resp, nil
}

// Alarm lists, raises or clears alarms through Raft (NOSPACE when the
// backend quota is exceeded, CORRUPT when the corruption checks find a
// diverged member); the response carries a header as etcd's does.
func (m *maintenanceService) Alarm(ctx context.Context, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	resp, err := m.srv.Alarm(ctx, r)
	if err != nil {
		return nil, ToGRPCError(err)
	}
	if resp.Header == nil {
		resp.Header = &pb.ResponseHeader{}
	}
	m.hdr.fill(resp.Header)
	return resp, nil
}

func (m *maintenanceService) Hash(ctx context.Context, _ *pb.HashRequest) (*pb.HashResponse, error) {
	rev := m.srv.Rev()
	h, err := m.srv.Hash()
	if err != nil {
		return nil, ToGRPCError(err)
	}
	resp := &pb.HashResponse{Header: &pb.ResponseHeader{Revision: rev}, Hash: h}
	m.hdr.fill(resp.Header)
	return resp, nil
}

func (m *maintenanceService) HashKV(ctx context.Context, r *pb.HashKVRequest) (*pb.HashKVResponse, error) {
	h, err := m.srv.HashKV(r.Revision)
	if err != nil {
		return nil, ToGRPCError(err)
	}
	resp := &pb.HashKVResponse{
		Header:          &pb.ResponseHeader{Revision: h.Revision},
		Hash:            h.Hash,
		CompactRevision: h.CompactRevision,
		HashRevision:    h.HashRevision,
	}
	m.hdr.fill(resp.Header)
	return resp, nil
}

// Downgrade validates, enables or cancels a downgrade of the cluster
// version (etcdctl downgrade validate|enable|cancel); the response
// carries a header as etcd's does. Only root may ask when auth is on
// (authguard.go).
func (m *maintenanceService) Downgrade(ctx context.Context, r *pb.DowngradeRequest) (*pb.DowngradeResponse, error) {
	dm, ok := m.srv.(DowngradeMember)
	if !ok {
		return m.UnimplementedMaintenanceServer.Downgrade(ctx, r)
	}
	resp, err := dm.Downgrade(ctx, r)
	if err != nil {
		return nil, ToGRPCError(err)
	}
	resp.Header = &pb.ResponseHeader{}
	m.hdr.fill(resp.Header)
	return resp, nil
}

// MoveLeader hands leadership to another voter; only the leader accepts
// it, as in etcd (etcdctl move-leader asks the leader's endpoint).
func (m *maintenanceService) MoveLeader(ctx context.Context, r *pb.MoveLeaderRequest) (*pb.MoveLeaderResponse, error) {
	if err := m.srv.MoveLeader(ctx, r.TargetID); err != nil {
		return nil, toClusterGRPCError(err)
	}
	return &pb.MoveLeaderResponse{}, nil // no header, as etcd
}

// Defragment asks the storage engine to reclaim the space of deleted and
// compacted data (RocksDB: a full manual compaction; the in-memory engine
// has nothing to reclaim) and answers as etcd does: an empty response
// without a header.
func (m *maintenanceService) Defragment(ctx context.Context, _ *pb.DefragmentRequest) (*pb.DefragmentResponse, error) {
	if err := m.srv.Defragment(ctx); err != nil {
		return nil, ToGRPCError(err)
	}
	return &pb.DefragmentResponse{}, nil
}
