package server

import (
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/cluster/membererr"
)

// Errors of the alarm gates; the texts are etcd's (etcdserver/errors), and
// pkg/etcdcompat maps them to rpctypes.ErrGRPCNoSpace ("etcdserver: mvcc:
// database space exceeded", ResourceExhausted) and ErrGRPCCorrupt
// ("etcdserver: corrupt cluster", DataLoss).
var (
	ErrNoSpace = membererr.ErrNoSpace
	ErrCorrupt = membererr.ErrCorrupt
)

// Alarm serves Maintenance.Alarm. Every action goes through Raft, as in
// etcd: a GET answers with the set as of its place in the log.
func (s *Server) Alarm(ctx context.Context, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	res, err := s.propose(ctx, &pb.InternalRaftRequest{Alarm: r})
	if err != nil {
		return nil, err
	}
	return res.Resp.(*pb.AlarmResponse), nil
}

// Alarms lists the active alarms as this member last applied them (for
// Maintenance.Status and /health).
func (s *Server) Alarms() []*pb.AlarmMember { return s.alarms.Get(pb.AlarmType_NONE) }

// raiseAlarm proposes an alarm of this member, as etcd's servers do when
// they notice a full backend or a corrupt peer; failures are logged (the
// next request that notices will try again).
func (s *Server) raiseAlarm(ctx context.Context, member uint64, alarm pb.AlarmType) {
	_, err := s.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: member, Alarm: alarm})
	if err != nil {
		s.log.Warn("failed to raise alarm", "alarm", alarm.String(), "alarm-member-id", fmt.Sprintf("%x", member), "error", err)
	}
}
