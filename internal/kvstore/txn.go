package kvstore

import (
	"bytes"
	"fmt"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Txn applies a TxnRequest (etcd's txn.Txn). The compares of the request
// and of every nested txn on the chosen path are evaluated first, against
// the state before the txn; then every op on the path is checked (ranges
// at valid revisions, puts with existing leases and, for ignore_value /
// ignore_lease, keys that exist when the put runs). Only if all checks
// pass are the ops run, all sharing one main revision. A txn without
// writes leaves the revision unchanged. Nested TxnResponse headers stay
// empty, as in etcd.
//
// One deliberate difference: a put with ignore_value or ignore_lease whose
// key an earlier delete of the same txn removes (only possible with a
// range_end of "\x00", which etcd's duplicate-key check does not see)
// makes etcd panic halfway through the txn. Here the check finds it first
// and the txn fails with ErrKeyNotFound, writing nothing.
func (s *Store) Txn(req *etcdserverpb.TxnRequest) (*etcdserverpb.TxnResponse, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	r := s.applyReader()
	path := compareToPath(r, s.w.rev, req)
	chk := txnChecker{r: r, rev: s.w.rev, s: s}
	if _, err := chk.check(req, path); err != nil {
		return nil, err
	}
	tw := s.Write()
	resp, _ := newTxnResp(req, path)
	_, err := executeTxn(tw, req, path, resp)
	rev := tw.curRev()
	changed := tw.Changed()
	tw.End()
	if err != nil {
		if changed {
			// Part of the txn is in the batch and cannot be taken back;
			// committing it would break atomicity (etcd panics here).
			s.w.failed = fmt.Errorf("kvstore: txn failed after writing, store unusable: %w", err)
			return nil, s.w.failed
		}
		return nil, err
	}
	resp.Header.Revision = rev
	s.m.countTxn(req, path, resp)
	return resp, nil
}

// compareToPath evaluates the compares: path[0] is the outcome of req's
// own compares, followed depth first by those of the nested txns on the
// branch taken.
func compareToPath(r *kvReader, rev int64, req *etcdserverpb.TxnRequest) []bool {
	path := []bool{applyCompares(r, rev, req.GetCompare())}
	for _, op := range branch(req, path[0]) {
		if tv, ok := op.GetRequest().(*etcdserverpb.RequestOp_RequestTxn); ok {
			path = append(path, compareToPath(r, rev, tv.RequestTxn)...)
		}
	}
	return path
}

// branch returns the ops a txn runs when its compares came out as
// succeeded. A nil nested txn (which etcd would crash on) acts as an
// empty one.
func branch(req *etcdserverpb.TxnRequest, succeeded bool) []*etcdserverpb.RequestOp {
	if succeeded {
		return req.GetSuccess()
	}
	return req.GetFailure()
}

func applyCompares(r *kvReader, rev int64, cmps []*etcdserverpb.Compare) bool {
	for _, c := range cmps {
		if !applyCompare(r, rev, c) {
			return false
		}
	}
	return true
}

// applyCompare holds if every key in the compare's range satisfies it; a
// missing key compares as a zero KeyValue, except that a VALUE compare on
// missing keys always fails.
func applyCompare(r *kvReader, rev int64, c *etcdserverpb.Compare) bool {
	rr, err := r.rangeKeys(c.GetKey(), gteRangeEnd(c.GetRangeEnd()), rev, rangeOptions{})
	if err != nil {
		return false
	}
	if len(rr.kvs) == 0 {
		if c.GetTarget() == etcdserverpb.Compare_VALUE {
			return false
		}
		return compareKV(c, &mvccpb.KeyValue{})
	}
	for i := range rr.kvs {
		if !compareKV(c, &rr.kvs[i]) {
			return false
		}
	}
	return true
}

func compareKV(c *etcdserverpb.Compare, kv *mvccpb.KeyValue) bool {
	var result int
	switch c.Target {
	case etcdserverpb.Compare_VALUE:
		var v []byte
		if tv, _ := c.TargetUnion.(*etcdserverpb.Compare_Value); tv != nil {
			v = tv.Value
		}
		result = bytes.Compare(kv.Value, v)
	case etcdserverpb.Compare_CREATE:
		var want int64
		if tv, _ := c.TargetUnion.(*etcdserverpb.Compare_CreateRevision); tv != nil {
			want = tv.CreateRevision
		}
		result = compareInt64(kv.CreateRevision, want)
	case etcdserverpb.Compare_MOD:
		var want int64
		if tv, _ := c.TargetUnion.(*etcdserverpb.Compare_ModRevision); tv != nil {
			want = tv.ModRevision
		}
		result = compareInt64(kv.ModRevision, want)
	case etcdserverpb.Compare_VERSION:
		var want int64
		if tv, _ := c.TargetUnion.(*etcdserverpb.Compare_Version); tv != nil {
			want = tv.Version
		}
		result = compareInt64(kv.Version, want)
	case etcdserverpb.Compare_LEASE:
		var want int64
		if tv, _ := c.TargetUnion.(*etcdserverpb.Compare_Lease); tv != nil {
			want = tv.Lease
		}
		result = compareInt64(kv.Lease, want)
	}
	switch c.Result {
	case etcdserverpb.Compare_EQUAL:
		return result == 0
	case etcdserverpb.Compare_NOT_EQUAL:
		return result != 0
	case etcdserverpb.Compare_GREATER:
		return result > 0
	case etcdserverpb.Compare_LESS:
		return result < 0
	}
	return true // an unknown result holds, as in etcd
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// txnChecker validates the ops on the chosen path before anything runs
// (etcd's checkTxn), against the state before the txn at revision rev.
type txnChecker struct {
	r   *kvReader
	rev int64
	s   *Store // for the lease table
	// deleted holds the DeleteRange ops met so far on the path, in the
	// order they will run.
	deleted []*etcdserverpb.DeleteRangeRequest
}

// check validates the ops of req's branch given by path[0] and of the
// nested txns on the path. It returns how many nested txns it consumed
// from path.
func (c *txnChecker) check(req *etcdserverpb.TxnRequest, path []bool) (int, error) {
	txns := 0
	for _, op := range branch(req, path[0]) {
		var err error
		switch tv := op.GetRequest().(type) {
		case *etcdserverpb.RequestOp_RequestRange:
			err = checkRangeRevision(c.r, c.rev, tv.RequestRange)
		case *etcdserverpb.RequestOp_RequestPut:
			err = c.checkPut(tv.RequestPut)
		case *etcdserverpb.RequestOp_RequestDeleteRange:
			c.deleted = append(c.deleted, tv.RequestDeleteRange)
		case *etcdserverpb.RequestOp_RequestTxn:
			var n int
			n, err = c.check(tv.RequestTxn, path[1:])
			txns += n + 1
			path = path[n+1:]
		}
		if err != nil {
			return 0, err
		}
	}
	return txns, nil
}

func checkRangeRevision(r *kvReader, rev int64, req *etcdserverpb.RangeRequest) error {
	switch {
	case req.GetRevision() == 0:
		return nil
	case req.GetRevision() > rev:
		return ErrFutureRev
	case req.GetRevision() < r.compactRev:
		return ErrCompacted
	}
	return nil
}

func (c *txnChecker) checkPut(req *etcdserverpb.PutRequest) error {
	if req.GetIgnoreValue() || req.GetIgnoreLease() {
		rr, err := c.r.rangeKeys(req.GetKey(), nil, c.rev, rangeOptions{count: true})
		if err != nil {
			return err
		}
		if rr.count == 0 || c.deletedEarlier(req.GetKey()) {
			return ErrKeyNotFound
		}
	}
	if !c.s.leaseExists(req.GetLease()) {
		return ErrLeaseNotFound
	}
	return nil
}

// deletedEarlier reports whether a delete met earlier on the path covers
// key. The key exists before the txn (checkPut saw it) and CheckTxn
// forbids putting it again in between, so such a delete removes it.
func (c *txnChecker) deletedEarlier(key []byte) bool {
	for _, d := range c.deleted {
		if keyInRange(key, d.GetKey(), gteRangeEnd(d.GetRangeEnd())) {
			return true
		}
	}
	return false
}

// newTxnResp allocates the response skeleton for the path taken and
// returns how many nested txns it covered.
func newTxnResp(req *etcdserverpb.TxnRequest, path []bool) (*etcdserverpb.TxnResponse, int) {
	ops := branch(req, path[0])
	resp := &etcdserverpb.TxnResponse{
		Responses: make([]*etcdserverpb.ResponseOp, len(ops)),
		Succeeded: path[0],
		Header:    &etcdserverpb.ResponseHeader{},
	}
	txns := 0
	for i, op := range ops {
		switch tv := op.GetRequest().(type) {
		case *etcdserverpb.RequestOp_RequestRange:
			resp.Responses[i] = &etcdserverpb.ResponseOp{Response: &etcdserverpb.ResponseOp_ResponseRange{}}
		case *etcdserverpb.RequestOp_RequestPut:
			resp.Responses[i] = &etcdserverpb.ResponseOp{Response: &etcdserverpb.ResponseOp_ResponsePut{}}
		case *etcdserverpb.RequestOp_RequestDeleteRange:
			resp.Responses[i] = &etcdserverpb.ResponseOp{Response: &etcdserverpb.ResponseOp_ResponseDeleteRange{}}
		case *etcdserverpb.RequestOp_RequestTxn:
			nested, n := newTxnResp(tv.RequestTxn, path[1:])
			resp.Responses[i] = &etcdserverpb.ResponseOp{Response: &etcdserverpb.ResponseOp_ResponseTxn{ResponseTxn: nested}}
			path = path[1+n:]
			txns += n + 1
		default:
			// An empty op gets an empty response, as in etcd.
			resp.Responses[i] = &etcdserverpb.ResponseOp{}
		}
	}
	return resp, txns
}

// txnExecutor runs the ops of a txn: a TxnWrite for txns that write,
// a readOnlyTxn on the read side.
type txnExecutor interface {
	rangeOp(req *etcdserverpb.RangeRequest) (*etcdserverpb.RangeResponse, error)
	putOp(req *etcdserverpb.PutRequest) (*etcdserverpb.PutResponse, error)
	deleteRangeOp(req *etcdserverpb.DeleteRangeRequest) (*etcdserverpb.DeleteRangeResponse, error)
}

// executeTxn runs the ops of the path taken, filling resp, and returns
// how many nested txns it consumed from path.
func executeTxn(x txnExecutor, req *etcdserverpb.TxnRequest, path []bool, resp *etcdserverpb.TxnResponse) (int, error) {
	txns := 0
	for i, op := range branch(req, path[0]) {
		switch tv := op.GetRequest().(type) {
		case *etcdserverpb.RequestOp_RequestRange:
			rr, err := x.rangeOp(tv.RequestRange)
			if err != nil {
				return 0, fmt.Errorf("txn range: %w", err)
			}
			resp.Responses[i].Response.(*etcdserverpb.ResponseOp_ResponseRange).ResponseRange = rr
		case *etcdserverpb.RequestOp_RequestPut:
			pr, err := x.putOp(tv.RequestPut)
			if err != nil {
				return 0, fmt.Errorf("txn put: %w", err)
			}
			resp.Responses[i].Response.(*etcdserverpb.ResponseOp_ResponsePut).ResponsePut = pr
		case *etcdserverpb.RequestOp_RequestDeleteRange:
			dr, err := x.deleteRangeOp(tv.RequestDeleteRange)
			if err != nil {
				return 0, fmt.Errorf("txn delete range: %w", err)
			}
			resp.Responses[i].Response.(*etcdserverpb.ResponseOp_ResponseDeleteRange).ResponseDeleteRange = dr
		case *etcdserverpb.RequestOp_RequestTxn:
			nested := resp.Responses[i].Response.(*etcdserverpb.ResponseOp_ResponseTxn).ResponseTxn
			n, err := executeTxn(x, tv.RequestTxn, path[1:], nested)
			if err != nil {
				return 0, err
			}
			txns += n + 1
			path = path[n+1:]
		}
	}
	return txns, nil
}

func (tw *TxnWrite) rangeOp(req *etcdserverpb.RangeRequest) (*etcdserverpb.RangeResponse, error) {
	return executeRange(tw.reader(), tw.curRev(), req)
}

func (tw *TxnWrite) putOp(req *etcdserverpb.PutRequest) (*etcdserverpb.PutResponse, error) {
	return tw.put(req)
}

func (tw *TxnWrite) deleteRangeOp(req *etcdserverpb.DeleteRangeRequest) (*etcdserverpb.DeleteRangeResponse, error) {
	return tw.deleteRange(req)
}
