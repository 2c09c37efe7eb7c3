package etcdcompat

import pb "go.etcd.io/etcd/api/v3/etcdserverpb"

// headerFiller completes response headers as etcd's v3rpc header.fill does:
// cluster and member IDs and the current Raft term always; the revision
// only where the response did not already carry one.
type headerFiller struct{ srv Member }

func (h headerFiller) fill(rh *pb.ResponseHeader) {
	if rh == nil {
		return
	}
	rh.ClusterId = h.srv.ClusterID()
	rh.MemberId = h.srv.ID()
	rh.RaftTerm = h.srv.Term()
	if rh.Revision == 0 {
		rh.Revision = h.srv.Rev()
	}
}

// header returns a filled header with the current revision.
func (h headerFiller) header() *pb.ResponseHeader {
	rh := &pb.ResponseHeader{}
	h.fill(rh)
	return rh
}
