package statemachine

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Op is the kind of an applied request, named (String) as etcd's
// apply_duration_seconds "op" label names it, for the member's
// metrics and slow-apply logs.
type Op int

const (
	OpPut Op = iota
	OpDeleteRange
	OpTxn
	OpCompaction
	OpLeaseGrant
	OpLeaseRevoke
	OpLeaseCheckpoint
	OpClusterMemberAttrSet
	OpClusterVersionSet
	OpDowngradeInfoSet
	OpUnknown
	// NumOps is the number of kinds.
	NumOps
)

// opNames are the label values, by Op.
var opNames = [NumOps]string{
	"Put", "DeleteRange", "Txn", "Compaction", "LeaseGrant", "LeaseRevoke", "LeaseCheckpoint",
	"ClusterMemberAttrSet", "ClusterVersionSet", "DowngradeInfoSet", "unknown",
}

// OpOf is the kind of req.
func OpOf(req *pb.InternalRaftRequest) Op {
	switch {
	case req.Put != nil:
		return OpPut
	case req.DeleteRange != nil:
		return OpDeleteRange
	case req.Txn != nil:
		return OpTxn
	case req.Compaction != nil:
		return OpCompaction
	case req.LeaseGrant != nil:
		return OpLeaseGrant
	case req.LeaseRevoke != nil:
		return OpLeaseRevoke
	case req.LeaseCheckpoint != nil:
		return OpLeaseCheckpoint
	case req.ClusterMemberAttrSet != nil:
		return OpClusterMemberAttrSet
	case req.ClusterVersionSet != nil:
		return OpClusterVersionSet
	case req.DowngradeInfoSet != nil:
		return OpDowngradeInfoSet
	}
	return OpUnknown
}

// String is op's name in etcd's "op" label.
func (op Op) String() string {
	if op < 0 || op >= NumOps {
		return opNames[OpUnknown]
	}
	return opNames[op]
}
