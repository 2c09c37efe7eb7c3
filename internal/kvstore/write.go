package kvstore

import (
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// TxnWrite is a write transaction: every change made through it shares one
// main revision (the store revision + 1) with increasing sub revisions, and
// the store revision advances once, at End, if anything changed. Reads
// through it see its own earlier changes. Only the apply goroutine uses it,
// and only one is open at a time.
type TxnWrite struct {
	s        *Store
	beginRev int64
	changes  int
}

// Write opens a write transaction. It panics if one is already open: the
// apply goroutine must End each one before starting the next.
func (s *Store) Write() *TxnWrite {
	if s.w.txn != nil {
		panic("kvstore: Write while another write transaction is open")
	}
	tw := &TxnWrite{s: s, beginRev: s.w.rev}
	s.w.txn = tw
	return tw
}

// Rev is the store revision the transaction started from.
func (tw *TxnWrite) Rev() int64 { return tw.beginRev }

// Changed reports whether the transaction has written anything.
func (tw *TxnWrite) Changed() bool { return tw.changes > 0 }

// End closes the transaction; the store revision becomes Rev()+1 if it
// changed anything. The changes are visible to readers after Commit.
func (tw *TxnWrite) End() {
	if tw.s.w.txn != tw {
		panic("kvstore: End of a write transaction that is not open")
	}
	if tw.changes > 0 {
		tw.s.w.rev++
	}
	tw.s.w.txn = nil
}

// curRev is the revision reads inside the transaction are at.
func (tw *TxnWrite) curRev() int64 {
	if tw.changes > 0 {
		return tw.beginRev + 1
	}
	return tw.beginRev
}

func (tw *TxnWrite) reader() *kvReader { return tw.s.applyReader() }

// Put writes key=value carrying lease (0: none) and returns the revision
// of the write. The lease must exist; Put does not check it (Store.Put and
// Store.Txn do). key and value are copied.
func (tw *TxnWrite) Put(key, value []byte, lease int64) int64 {
	w := &tw.s.w
	rev := tw.beginRev + 1
	created := rev
	var ver, oldLease int64
	if ki := w.index.lookup(key); ki != nil && ki.isLive() {
		created, ver, oldLease = ki.created, ki.ver, ki.lease
	}
	idxRev := revision{main: rev, sub: int64(tw.changes)}
	kv, data := marshalKeyValue(mvccpb.KeyValue{
		Key:            key,
		Value:          value,
		CreateRevision: created,
		ModRevision:    rev,
		Version:        ver + 1,
		Lease:          lease,
	})
	var keyBuf [revKeyLen]byte
	w.batch.PutOwned(appendRevKey(keyBuf[:0], idxRev, false), data)
	w.index.put(kv.Key, idxRev, lease)
	w.pending[idxRev] = kv
	w.events = append(w.events, mvccpb.Event{Type: mvccpb.PUT, Kv: kv})
	tw.changes++
	tw.s.m.putBytes.Add(float64(len(key) + len(value)))

	if oldLease == lease || tw.s.leases == nil {
		return rev
	}
	if oldLease != 0 {
		tw.s.leases.Detach(oldLease, kv.Key)
	}
	if lease != 0 {
		tw.s.leases.Attach(lease, kv.Key)
	}
	return rev
}

// DeleteRange deletes the keys in [key, end) (end nil: just key; end
// empty: every key >= key) and returns how many it deleted and the
// revision a response reports: Rev()+1 if the transaction changed
// anything so far, else Rev().
func (tw *TxnWrite) DeleteRange(key, end []byte) (deleted, rev int64) {
	w := &tw.s.w
	kis := w.index.liveKeys(key, end, tw.curRev())
	for _, ki := range kis {
		tw.delete(ki)
	}
	return int64(len(kis)), tw.curRev()
}

func (tw *TxnWrite) delete(ki *keyIndex) {
	w := &tw.s.w
	idxRev := revision{main: tw.beginRev + 1, sub: int64(tw.changes)}
	oldLease := ki.lease
	key := ki.key // immutable bytes, shared by every copy of the keyIndex
	data := encodeKeyValue(&mvccpb.KeyValue{Key: key}, w.recordScratch)
	var keyBuf [revKeyLen + 1]byte
	w.batch.Put(appendRevKey(keyBuf[:0], idxRev, true), data)
	w.keepScratch(data)
	if !w.index.tombstone(ki, idxRev) {
		panic("kvstore: delete of a key that is not live: " + string(key))
	}
	w.events = append(w.events, mvccpb.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: key, ModRevision: idxRev.main}})
	tw.changes++
	if oldLease != 0 && tw.s.leases != nil {
		tw.s.leases.Detach(oldLease, key)
	}
}

// boolInt is 1 for true: an operation that read the previous value counts
// one range, as in etcd.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// leaseExists is the lease check etcd does before a put.
func (s *Store) leaseExists(id int64) bool {
	return id == 0 || (s.leases != nil && s.leases.LeaseExists(id))
}

// Put applies a PutRequest (etcd's txn.Put): the lease must exist;
// ignore_value / ignore_lease need the key to exist (ErrKeyNotFound).
func (s *Store) Put(req *etcdserverpb.PutRequest) (*etcdserverpb.PutResponse, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if !s.leaseExists(req.Lease) {
		return nil, ErrLeaseNotFound
	}
	tw := s.Write()
	defer tw.End()
	resp, err := tw.put(req)
	if err == nil {
		s.m.countOps(boolInt(req.PrevKv || req.IgnoreValue || req.IgnoreLease), 1, 0)
	}
	return resp, err
}

// put is etcd's put: read the previous value if the request needs it,
// then write.
func (tw *TxnWrite) put(req *etcdserverpb.PutRequest) (*etcdserverpb.PutResponse, error) {
	resp := &etcdserverpb.PutResponse{Header: &etcdserverpb.ResponseHeader{}}
	value, lease := req.Value, req.Lease
	var prev *mvccpb.KeyValue
	if req.IgnoreValue || req.IgnoreLease || req.PrevKv {
		rr, err := tw.reader().rangeKeys(req.Key, nil, tw.curRev(), rangeOptions{})
		if err != nil {
			return nil, err
		}
		if len(rr.kvs) != 0 {
			prev = &rr.kvs[0]
		}
	}
	if (req.IgnoreValue || req.IgnoreLease) && prev == nil {
		return nil, ErrKeyNotFound
	}
	if req.IgnoreValue {
		value = prev.Value
	}
	if req.IgnoreLease {
		lease = prev.Lease
	}
	if req.PrevKv {
		resp.PrevKv = prev
	}
	resp.Header.Revision = tw.Put(req.Key, value, lease)
	return resp, nil
}

// DeleteRange applies a DeleteRangeRequest (etcd's txn.DeleteRange).
// Deleting nothing leaves the revision unchanged.
func (s *Store) DeleteRange(req *etcdserverpb.DeleteRangeRequest) (*etcdserverpb.DeleteRangeResponse, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	tw := s.Write()
	defer tw.End()
	resp, err := tw.deleteRange(req)
	if err == nil {
		s.m.countOps(boolInt(req.PrevKv), 0, 1)
	}
	return resp, err
}

func (tw *TxnWrite) deleteRange(req *etcdserverpb.DeleteRangeRequest) (*etcdserverpb.DeleteRangeResponse, error) {
	resp := &etcdserverpb.DeleteRangeResponse{Header: &etcdserverpb.ResponseHeader{}}
	end := gteRangeEnd(req.RangeEnd)
	if req.PrevKv {
		rr, err := tw.reader().rangeKeys(req.Key, end, tw.curRev(), rangeOptions{})
		if err != nil {
			return nil, err
		}
		resp.PrevKvs = make([]*mvccpb.KeyValue, len(rr.kvs))
		for i := range rr.kvs {
			resp.PrevKvs[i] = &rr.kvs[i]
		}
	}
	resp.Deleted, resp.Header.Revision = tw.DeleteRange(req.Key, end)
	return resp, nil
}

// keepScratch keeps the buffer a record was encoded in for the next one,
// unless it grew past maxRecordScratch.
func (w *writer) keepScratch(data []byte) {
	if cap(data) <= maxRecordScratch {
		w.recordScratch = data[:0]
	}
}
