package auth

import (
	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// The permission checks of etcd 3.6 (authStore.isOpPermitted and the
// checks internal/statemachine makes at apply). They read the published state only: safe on
// any goroutine, no lock. ai may be nil or an empty AuthInfo
// (no credentials).

func (s *Store) isOpPermitted(ai *AuthInfo, key, rangeEnd []byte, permType authpb.Permission_Type) error {
	st := s.load()
	if !st.enabled {
		return nil
	}
	// Revision 0 only comes with no credentials at all.
	if ai == nil || ai.Revision == 0 {
		return ErrUserEmpty
	}
	if ai.Revision < st.rev {
		s.log.Warn("request auth revision is less than current node auth revision",
			"current node auth revision", st.rev, "request auth revision", ai.Revision,
			"request key", string(key), "error", ErrAuthOldRevision)
		return ErrAuthOldRevision
	}
	u := st.users[ai.Username]
	if u == nil {
		s.log.Error("cannot find a user for permission check", "user-name", ai.Username)
		return ErrPermissionDenied
	}
	if hasRootRole(u) {
		return nil
	}
	if p := st.perms[ai.Username]; p != nil && p.permits(key, rangeEnd, permType) {
		return nil
	}
	return ErrPermissionDenied
}

// IsPutPermitted checks write access to key.
func (s *Store) IsPutPermitted(ai *AuthInfo, key []byte) error {
	return s.isOpPermitted(ai, key, nil, authpb.WRITE)
}

// IsRangePermitted checks read access to [key, rangeEnd).
func (s *Store) IsRangePermitted(ai *AuthInfo, key, rangeEnd []byte) error {
	return s.isOpPermitted(ai, key, rangeEnd, authpb.READ)
}

// IsDeleteRangePermitted checks write access to [key, rangeEnd).
func (s *Store) IsDeleteRangePermitted(ai *AuthInfo, key, rangeEnd []byte) error {
	return s.isOpPermitted(ai, key, rangeEnd, authpb.WRITE)
}

// IsAdminPermitted checks that the user has the root role.
func (s *Store) IsAdminPermitted(ai *AuthInfo) error {
	st := s.load()
	if !st.enabled {
		return nil
	}
	if ai == nil || ai.Username == "" {
		return ErrUserEmpty
	}
	u := st.users[ai.Username]
	if u == nil {
		return ErrUserNotFound
	}
	if !hasRootRole(u) {
		return ErrPermissionDenied
	}
	return nil
}

// LeaseKeys returns the keys attached to a lease, nil for an unknown lease
// (the member's lease table).
type LeaseKeys func(id int64) [][]byte

// CheckLeasePuts checks that the user may write every key attached to
// lease id: attaching a key to, or revoking, a lease whose keys the user
// could not delete would let it delete them.
func (s *Store) CheckLeasePuts(ai *AuthInfo, keys LeaseKeys, id int64) error {
	if id == 0 {
		return nil
	}
	attached := keys(id)
	if attached == nil {
		return nil
	}
	if s.IsAdminPermitted(ai) == nil {
		return nil
	}
	for _, k := range attached {
		if err := s.IsPutPermitted(ai, k); err != nil {
			return err
		}
	}
	return nil
}

// CheckPut is the check of a Put: write on the key, write on the keys of
// its lease, and read on the key for prev_kv.
func (s *Store) CheckPut(ai *AuthInfo, keys LeaseKeys, r *pb.PutRequest) error {
	if err := s.IsPutPermitted(ai, r.Key); err != nil {
		return err
	}
	if err := s.CheckLeasePuts(ai, keys, r.Lease); err != nil {
		return err
	}
	if r.PrevKv {
		return s.IsRangePermitted(ai, r.Key, nil)
	}
	return nil
}

// CheckDeleteRange is the check of a DeleteRange: write on the range, and
// read on it for prev_kv.
func (s *Store) CheckDeleteRange(ai *AuthInfo, r *pb.DeleteRangeRequest) error {
	if err := s.IsDeleteRangePermitted(ai, r.Key, r.RangeEnd); err != nil {
		return err
	}
	if r.PrevKv {
		return s.IsRangePermitted(ai, r.Key, r.RangeEnd)
	}
	return nil
}

// CheckTxn checks every compare and every operation of both branches of a
// txn and, recursively, of every txn nested in them, whichever branch
// would run: the answer must not depend on data the user may not read.
func (s *Store) CheckTxn(ai *AuthInfo, keys LeaseKeys, r *pb.TxnRequest) error {
	for _, c := range r.Compare {
		if err := s.IsRangePermitted(ai, c.Key, c.RangeEnd); err != nil {
			return err
		}
	}
	if err := s.checkOps(ai, keys, r.Success); err != nil {
		return err
	}
	return s.checkOps(ai, keys, r.Failure)
}

func (s *Store) checkOps(ai *AuthInfo, keys LeaseKeys, ops []*pb.RequestOp) error {
	for _, op := range ops {
		var err error
		switch v := op.Request.(type) {
		case *pb.RequestOp_RequestRange:
			if v.RequestRange != nil {
				err = s.IsRangePermitted(ai, v.RequestRange.Key, v.RequestRange.RangeEnd)
			}
		case *pb.RequestOp_RequestPut:
			if v.RequestPut != nil {
				err = s.CheckPut(ai, keys, v.RequestPut)
			}
		case *pb.RequestOp_RequestDeleteRange:
			if d := v.RequestDeleteRange; d != nil {
				// etcd checks read (prev_kv) before write here.
				if d.PrevKv {
					err = s.IsRangePermitted(ai, d.Key, d.RangeEnd)
				}
				if err == nil {
					err = s.IsDeleteRangePermitted(ai, d.Key, d.RangeEnd)
				}
			}
		case *pb.RequestOp_RequestTxn:
			if v.RequestTxn != nil {
				err = s.CheckTxn(ai, keys, v.RequestTxn)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// CheckLeaseReads checks that the user may read every key attached to
// the given leases (LeaseTimeToLive with keys, LeaseLeases): listing them
// must not reveal keys it may not read. Root passes without looking.
func (s *Store) CheckLeaseReads(ai *AuthInfo, keys LeaseKeys, ids ...int64) error {
	if s.IsAdminPermitted(ai) == nil {
		return nil
	}
	for _, id := range ids {
		for _, k := range keys(id) {
			if err := s.IsRangePermitted(ai, k, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// CheckLeaseRenew is a keep-alive's check: write on every key of the
// lease (etcd's checkLeaseRenew).
func (s *Store) CheckLeaseRenew(ai *AuthInfo, keys LeaseKeys, id int64) error {
	if s.IsAdminPermitted(ai) == nil {
		return nil
	}
	for _, k := range keys(id) {
		if err := s.IsPutPermitted(ai, k); err != nil {
			return err
		}
	}
	return nil
}
