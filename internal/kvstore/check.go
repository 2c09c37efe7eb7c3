package kvstore

import (
	"go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Request validation that etcd does in its gRPC layer before a request is
// proposed (v3rpc/key.go). pkg/etcdcompat calls these before handing a
// request to the member, so
// that malformed requests never reach the raft log.

// CheckRange validates a RangeRequest.
func CheckRange(r *etcdserverpb.RangeRequest) error {
	if len(r.GetKey()) == 0 {
		return ErrEmptyKey
	}
	if _, ok := etcdserverpb.RangeRequest_SortOrder_name[int32(r.GetSortOrder())]; !ok {
		return ErrInvalidSortOption
	}
	if _, ok := etcdserverpb.RangeRequest_SortTarget_name[int32(r.GetSortTarget())]; !ok {
		return ErrInvalidSortOption
	}
	return nil
}

// CheckPut validates a PutRequest.
func CheckPut(r *etcdserverpb.PutRequest) error {
	if len(r.GetKey()) == 0 {
		return ErrEmptyKey
	}
	if r.GetIgnoreValue() && len(r.GetValue()) != 0 {
		return ErrValueProvided
	}
	if r.GetIgnoreLease() && r.GetLease() != 0 {
		return ErrLeaseProvided
	}
	return nil
}

// CheckDeleteRange validates a DeleteRangeRequest.
func CheckDeleteRange(r *etcdserverpb.DeleteRangeRequest) error {
	if len(r.GetKey()) == 0 {
		return ErrEmptyKey
	}
	return nil
}

// CheckTxn validates a TxnRequest: sizes (at most maxTxnOps compares,
// success ops and failure ops per level, nested levels getting what the
// outer one leaves), keys, every op, then that no branch writes a key
// twice or puts a key it also deletes (ErrDuplicateKey).
func CheckTxn(r *etcdserverpb.TxnRequest, maxTxnOps int) error {
	if err := checkTxnRequest(r, maxTxnOps); err != nil {
		return err
	}
	if _, _, err := checkIntervals(r.GetSuccess()); err != nil {
		return err
	}
	if _, _, err := checkIntervals(r.GetFailure()); err != nil {
		return err
	}
	return nil
}

func checkTxnRequest(r *etcdserverpb.TxnRequest, maxTxnOps int) error {
	opc := max(len(r.GetCompare()), len(r.GetSuccess()), len(r.GetFailure()))
	if opc > maxTxnOps {
		return ErrTooManyOps
	}
	for _, c := range r.GetCompare() {
		if len(c.GetKey()) == 0 {
			return ErrEmptyKey
		}
	}
	for _, u := range r.GetSuccess() {
		if err := checkRequestOp(u, maxTxnOps-opc); err != nil {
			return err
		}
	}
	for _, u := range r.GetFailure() {
		if err := checkRequestOp(u, maxTxnOps-opc); err != nil {
			return err
		}
	}
	return nil
}

func checkRequestOp(u *etcdserverpb.RequestOp, maxTxnOps int) error {
	switch uv := u.GetRequest().(type) {
	case *etcdserverpb.RequestOp_RequestRange:
		return CheckRange(uv.RequestRange)
	case *etcdserverpb.RequestOp_RequestPut:
		return CheckPut(uv.RequestPut)
	case *etcdserverpb.RequestOp_RequestDeleteRange:
		return CheckDeleteRange(uv.RequestDeleteRange)
	case *etcdserverpb.RequestOp_RequestTxn:
		if uv.RequestTxn == nil {
			return ErrKeyNotFound
		}
		return checkTxnRequest(uv.RequestTxn, maxTxnOps)
	default:
		// An empty op: etcd answers with "key not found" too.
		return ErrKeyNotFound
	}
}

// keyInterval is a deleted key interval [begin, end) using etcd's "affine"
// string order for interval ends, in which the empty string is above every
// other string. A single key k is [k, k+"\x00").
type keyInterval struct {
	begin, end string
}

func pointInterval(k string) keyInterval { return keyInterval{begin: k, end: k + "\x00"} }

// affineCompare orders strings with "" as +infinity.
func affineCompare(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == "":
		return 1
	case b == "":
		return -1
	case a < b:
		return -1
	}
	return 1
}

// containsPoint is etcd's interval intersection test of the point k with
// iv. Like etcd, an inverted interval (range_end "\x00", meaning "to the
// end" on the wire) contains nothing here, so etcd's check does not
// catch a put under such a delete; we keep that behaviour.
func (iv keyInterval) containsPoint(k string) bool {
	p := pointInterval(k)
	if affineCompare(p.begin, iv.begin) < 0 && affineCompare(p.end, iv.begin) <= 0 {
		return false // left of iv
	}
	if affineCompare(p.begin, iv.end) >= 0 {
		return false // right of iv
	}
	return true
}

type intervalSet []keyInterval

func (s intervalSet) containsPoint(k string) bool {
	for _, iv := range s {
		if iv.containsPoint(k) {
			return true
		}
	}
	return false
}

// checkIntervals is etcd's checkIntervals: it fails with ErrDuplicateKey
// if the ops (and the nested txns among them) put the same key twice or
// put a key that one of them deletes. Puts in the success and the failure
// branch of one nested txn may coincide, as only one branch runs. It
// returns the keys put and the intervals deleted, for the enclosing level.
func checkIntervals(reqs []*etcdserverpb.RequestOp) (map[string]struct{}, intervalSet, error) {
	var dels intervalSet
	for _, req := range reqs {
		tv, ok := req.GetRequest().(*etcdserverpb.RequestOp_RequestDeleteRange)
		if !ok || tv.RequestDeleteRange == nil {
			continue
		}
		d := tv.RequestDeleteRange
		if len(d.RangeEnd) != 0 {
			dels = append(dels, keyInterval{begin: string(d.Key), end: string(d.RangeEnd)})
		} else {
			dels = append(dels, pointInterval(string(d.Key)))
		}
	}

	puts := make(map[string]struct{})
	for _, req := range reqs {
		tv, ok := req.GetRequest().(*etcdserverpb.RequestOp_RequestTxn)
		if !ok || tv.RequestTxn == nil {
			continue
		}
		putsThen, delsThen, err := checkIntervals(tv.RequestTxn.Success)
		if err != nil {
			return nil, dels, err
		}
		putsElse, delsElse, err := checkIntervals(tv.RequestTxn.Failure)
		if err != nil {
			return nil, dels, err
		}
		for k := range putsThen {
			if _, ok := puts[k]; ok {
				return nil, dels, ErrDuplicateKey
			}
			if dels.containsPoint(k) {
				return nil, dels, ErrDuplicateKey
			}
			puts[k] = struct{}{}
		}
		for k := range putsElse {
			if _, ok := puts[k]; ok {
				if _, fromThen := putsThen[k]; !fromThen {
					return nil, dels, ErrDuplicateKey
				}
			}
			if dels.containsPoint(k) {
				return nil, dels, ErrDuplicateKey
			}
			puts[k] = struct{}{}
		}
		dels = append(dels, delsThen...)
		dels = append(dels, delsElse...)
	}

	for _, req := range reqs {
		tv, ok := req.GetRequest().(*etcdserverpb.RequestOp_RequestPut)
		if !ok || tv.RequestPut == nil {
			continue
		}
		k := string(tv.RequestPut.Key)
		if _, ok := puts[k]; ok {
			return nil, dels, ErrDuplicateKey
		}
		if dels.containsPoint(k) {
			return nil, dels, ErrDuplicateKey
		}
		puts[k] = struct{}{}
	}
	return puts, dels, nil
}
