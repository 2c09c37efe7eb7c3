package kvstoretest

import (
	"fmt"
	"slices"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/kvstore"
)

// MaxTxnOps is the txn size limit the scenarios are written for (etcd's
// --max-txn-ops); Exec validates with it.
const MaxTxnOps = 16

// Step is one request of a Scenario and what etcd answers to it.
type Step struct {
	// Req is a *RangeRequest, *PutRequest, *DeleteRangeRequest,
	// *TxnRequest or *CompactionRequest.
	Req any
	// Want is the expected response (a pointer to the matching response
	// type), compared on the wire encoding; nil when Err is set.
	Want any
	// Err is the expected error, one of kvstore's sentinels.
	Err error
}

// Scenario is a sequence of requests run on an empty store.
type Scenario struct {
	Name string
	// Leases are the lease IDs granted before the first step.
	Leases []int64
	Steps  []Step
	// Deviation, when set, says why etcd does not give these answers
	// (a deliberate difference, see kvstore's doc); the comparison with
	// a real etcd skips such scenarios.
	Deviation string
}

// Exec runs one request the way the server does: the gRPC layer's
// validation first, then reads on the read side and writes on the apply
// side followed by SetConsistentIndex and Commit (one raft entry per
// request). A read-only txn is served by ReadTxn, a compaction reports
// the store revision after it, as etcd's server does.
func Exec(s *kvstore.Store, req any) (any, error) {
	switch r := req.(type) {
	case *pb.RangeRequest:
		if err := kvstore.CheckRange(r); err != nil {
			return nil, err
		}
		return s.Range(r)
	case *pb.PutRequest:
		if err := kvstore.CheckPut(r); err != nil {
			return nil, err
		}
		return apply(s, func() (any, error) { return s.Put(r) })
	case *pb.DeleteRangeRequest:
		if err := kvstore.CheckDeleteRange(r); err != nil {
			return nil, err
		}
		return apply(s, func() (any, error) { return s.DeleteRange(r) })
	case *pb.TxnRequest:
		if err := kvstore.CheckTxn(r, MaxTxnOps); err != nil {
			return nil, err
		}
		if kvstore.IsTxnReadOnly(r) {
			return s.ReadTxn(r)
		}
		return apply(s, func() (any, error) { return s.Txn(r) })
	case *pb.CompactionRequest:
		resp, err := apply(s, func() (any, error) { return s.Compact(r.Revision) })
		if err != nil {
			return nil, err
		}
		cr := resp.(*pb.CompactionResponse)
		cr.Header.Revision = s.Rev()
		return cr, nil
	}
	return nil, fmt.Errorf("kvstoretest: unknown request type %T", req)
}

// apply runs fn as the apply loop runs one raft entry.
func apply(s *kvstore.Store, fn func() (any, error)) (any, error) {
	resp, err := fn()
	index, _ := s.ConsistentIndex()
	s.SetConsistentIndex(index+1, 1)
	if _, cerr := s.Commit(); cerr != nil {
		return nil, fmt.Errorf("commit: %w", cerr)
	}
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// marshaler is what every etcd request and response implements.
type marshaler interface {
	Marshal() ([]byte, error)
	String() string
}

// SameResponse reports whether got and want have the same wire encoding;
// if not, the message shows both.
func SameResponse(got, want any) (bool, string) {
	g, gok := got.(marshaler)
	w, wok := want.(marshaler)
	if !gok || !wok {
		return false, fmt.Sprintf("cannot compare %T with %T", got, want)
	}
	gb, err := g.Marshal()
	if err != nil {
		return false, fmt.Sprintf("marshal %T: %v", got, err)
	}
	wb, err := w.Marshal()
	if err != nil {
		return false, fmt.Sprintf("marshal %T: %v", want, err)
	}
	if slices.Equal(gb, wb) {
		return true, ""
	}
	return false, fmt.Sprintf("\n got %T{%v}\nwant %T{%v}", got, g.String(), want, w.String())
}

// Leases is a kvstore.LeaseTable for tests: a fixed set of granted
// leases that records which keys are attached to each.
type Leases struct {
	mu       sync.Mutex
	granted  map[int64]bool
	attached map[int64]map[string]bool
	// calls counts Attach and Detach calls, to catch redundant ones.
	calls int
}

// NewLeases returns a table in which ids are granted.
func NewLeases(ids ...int64) *Leases {
	l := &Leases{granted: make(map[int64]bool), attached: make(map[int64]map[string]bool)}
	for _, id := range ids {
		l.granted[id] = true
	}
	return l
}

// LeaseExists implements kvstore.LeaseTable.
func (l *Leases) LeaseExists(id int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.granted[id]
}

// Attach implements kvstore.LeaseTable.
func (l *Leases) Attach(id int64, key []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.attached[id] == nil {
		l.attached[id] = make(map[string]bool)
	}
	l.attached[id][string(key)] = true
}

// Detach implements kvstore.LeaseTable.
func (l *Leases) Detach(id int64, key []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	delete(l.attached[id], string(key))
}

// Keys returns the keys attached to id, sorted.
func (l *Leases) Keys(id int64) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var keys []string
	for k := range l.attached[id] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Calls is the number of Attach and Detach calls so far.
func (l *Leases) Calls() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls
}
