package etcdcompat

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"
)

// clusterService is etcd's Cluster service.
type clusterService struct {
	pb.UnimplementedClusterServer
	srv Member
}

func (c *clusterService) MemberList(ctx context.Context, r *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	if r.Linearizable {
		// etcd answers a linearizable member list after a ReadIndex round.
		if err := c.srv.LinearizableRead(ctx); err != nil {
			return nil, toGRPCError(err)
		}
	}
	return &pb.MemberListResponse{Header: c.header(), Members: toProtoMembers(c.srv.Members())}, nil
}

// header is etcd's cluster-service header: IDs and term, no revision.
func (c *clusterService) header() *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: c.srv.ClusterID(), MemberId: c.srv.ID(), RaftTerm: c.srv.Term()}
}

func toProtoMembers(ms []*membershippb.Member) []*pb.Member {
	out := make([]*pb.Member, len(ms))
	for i, m := range ms {
		pm := &pb.Member{ID: m.ID}
		if m.RaftAttributes != nil {
			pm.PeerURLs = m.RaftAttributes.PeerUrls
			pm.IsLearner = m.RaftAttributes.IsLearner
		}
		if m.MemberAttributes != nil {
			pm.Name = m.MemberAttributes.Name
			pm.ClientURLs = m.MemberAttributes.ClientUrls
		}
		out[i] = pm
	}
	return out
}
