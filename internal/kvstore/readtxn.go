package kvstore

import (
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// The read side: requests served from the last committed image without
// going through the apply goroutine. Each call takes one reference to the
// current snapshot and works on it alone, so it sees one consistent
// state however many commits (or compactions) happen meanwhile, and it
// never blocks the writer.

// reader returns a kvReader over the snapshot's image.
func (snap *snapshot) reader() kvReader {
	return kvReader{index: snap.keys, values: snap.view, compactRev: snap.compactRev}
}

// responseReader returns a kvReader over the snapshot's image that holds
// the response it reads for to the store's bounds.
func (s *Store) responseReader(snap *snapshot) kvReader {
	r := snap.reader()
	r.budget = newResponseBudget(s.maxResponseBytes, s.maxResponseMemory)
	return r
}

// Range serves a RangeRequest from the last committed image (etcd's
// txn.Range). The header revision is the store revision of that image.
// The request must have passed CheckRange.
func (s *Store) Range(req *etcdserverpb.RangeRequest) (*etcdserverpb.RangeResponse, error) {
	snap, err := s.acquire()
	if err != nil {
		return nil, err
	}
	defer snap.release()
	r := s.responseReader(snap)
	s.m.ranges.Inc()
	return executeRange(&r, snap.rev, req)
}

// ReadTxn serves a read-only txn (IsTxnReadOnly) from the last committed
// image, atomically: compares and ranges all see the same state. The
// revision does not change and the response is the one etcd gives for
// the same txn, header revision included. A txn that can write fails with
// ErrNotReadOnly. The request must have passed CheckTxn.
func (s *Store) ReadTxn(req *etcdserverpb.TxnRequest) (*etcdserverpb.TxnResponse, error) {
	if !IsTxnReadOnly(req) {
		return nil, ErrNotReadOnly
	}
	snap, err := s.acquire()
	if err != nil {
		return nil, err
	}
	defer snap.release()
	x := readOnlyTxn{r: s.responseReader(snap), rev: snap.rev}
	path := compareToPath(&x.r, x.rev, req)
	chk := txnChecker{r: &x.r, rev: x.rev, s: s}
	if _, err := chk.check(req, path); err != nil {
		return nil, err
	}
	resp, _ := newTxnResp(req, path)
	if _, err := executeTxn(&x, req, path, resp); err != nil {
		return nil, err
	}
	resp.Header.Revision = x.rev
	s.m.countTxn(req, path, resp)
	return resp, nil
}

// readOnlyTxn executes the ranges of a read-only txn on one image.
type readOnlyTxn struct {
	r   kvReader
	rev int64
}

func (x *readOnlyTxn) rangeOp(req *etcdserverpb.RangeRequest) (*etcdserverpb.RangeResponse, error) {
	return executeRange(&x.r, x.rev, req)
}

func (x *readOnlyTxn) putOp(*etcdserverpb.PutRequest) (*etcdserverpb.PutResponse, error) {
	return nil, ErrNotReadOnly
}

func (x *readOnlyTxn) deleteRangeOp(*etcdserverpb.DeleteRangeRequest) (*etcdserverpb.DeleteRangeResponse, error) {
	return nil, ErrNotReadOnly
}

// IsTxnReadOnly reports whether r can never write: every op of both
// branches is a range or a nested txn that is itself read-only. Such a
// txn needs no consensus and does not bump the revision; ReadTxn serves
// it. etcd's own test stops at nested txns (it sends any txn holding one
// through Raft); looking inside them gives the same responses and spares
// the round through the log. A txn with no ops at all is read-only.
func IsTxnReadOnly(r *etcdserverpb.TxnRequest) bool {
	return opsReadOnly(r.GetSuccess()) && opsReadOnly(r.GetFailure())
}

func opsReadOnly(ops []*etcdserverpb.RequestOp) bool {
	for _, op := range ops {
		switch tv := op.GetRequest().(type) {
		case *etcdserverpb.RequestOp_RequestRange:
			if tv.RequestRange == nil {
				return false
			}
		case *etcdserverpb.RequestOp_RequestTxn:
			if tv.RequestTxn == nil || !IsTxnReadOnly(tv.RequestTxn) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// IsTxnSerializable reports whether every range of r, in both branches
// and in nested txns, asks for a serializable read, so that a read-only
// txn may be served from local state without a linearizable read first.
// Like IsTxnReadOnly it looks inside nested txns, where etcd stops.
func IsTxnSerializable(r *etcdserverpb.TxnRequest) bool {
	return opsSerializable(r.GetSuccess()) && opsSerializable(r.GetFailure())
}

func opsSerializable(ops []*etcdserverpb.RequestOp) bool {
	for _, op := range ops {
		switch tv := op.GetRequest().(type) {
		case *etcdserverpb.RequestOp_RequestRange:
			if !tv.RequestRange.GetSerializable() {
				return false
			}
		case *etcdserverpb.RequestOp_RequestTxn:
			if tv.RequestTxn == nil || !IsTxnSerializable(tv.RequestTxn) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// PrevKV returns the value key had just before revision rev (at rev-1)
// in the last committed image, or nil if it did not exist then or that
// revision is compacted. The watch hub uses it for prev_kv.
func (s *Store) PrevKV(key []byte, rev int64) (*mvccpb.KeyValue, error) {
	snap, err := s.acquire()
	if err != nil {
		return nil, err
	}
	defer snap.release()
	at := rev - 1
	if at < 1 || at < snap.compactRev || at > snap.rev {
		return nil, nil
	}
	r := snap.reader()
	rr, err := r.rangeKeys(key, nil, snap.rev, rangeOptions{rev: at})
	if err != nil || len(rr.kvs) == 0 {
		return nil, err
	}
	return &rr.kvs[0], nil
}
