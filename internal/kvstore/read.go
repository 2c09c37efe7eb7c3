package kvstore

import (
	"bytes"
	"fmt"
	"sort"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// kvReader reads the MVCC state through one consistent image: a key index,
// the backend image holding the values of committed revisions and, on the
// apply side only, the values written since the last Commit.
type kvReader struct {
	index      indexView
	values     Reader
	pending    map[revision]*mvccpb.KeyValue // nil on the read side
	compactRev int64
}

type rangeOptions struct {
	limit int64
	rev   int64
	count bool
}

type rangeResult struct {
	kvs   []mvccpb.KeyValue
	count int
	rev   int64
}

// rangeKeys is etcd's storeTxnCommon.rangeKeys: the keys in [key, end)
// alive at ro.rev (0: curRev), reported at header revision curRev.
func (r *kvReader) rangeKeys(key, end []byte, curRev int64, ro rangeOptions) (rangeResult, error) {
	rev := ro.rev
	if rev > curRev {
		return rangeResult{count: -1, rev: curRev}, ErrFutureRev
	}
	if rev <= 0 {
		rev = curRev
	}
	if rev < r.compactRev {
		return rangeResult{count: -1}, ErrCompacted
	}
	if ro.count {
		return rangeResult{count: r.index.count(key, end, rev), rev: curRev}, nil
	}
	revs, total := r.index.revisions(key, end, rev, int(ro.limit))
	if len(revs) == 0 {
		return rangeResult{count: total, rev: curRev}, nil
	}
	kvs := make([]mvccpb.KeyValue, len(revs))
	var keyBuf [revKeyLen]byte
	mem := arena{expect: len(revs)}
	for i, rv := range revs {
		if err := r.fetch(rv, &kvs[i], keyBuf[:0], &mem); err != nil {
			return rangeResult{}, err
		}
	}
	return rangeResult{kvs: kvs, count: total, rev: curRev}, nil
}

// fetch loads the value written at rev into kv.
func (r *kvReader) fetch(rev revision, kv *mvccpb.KeyValue, keyBuf []byte, mem *arena) error {
	if r.pending != nil {
		if p, ok := r.pending[rev]; ok {
			*kv = *p
			return nil
		}
	}
	k := appendRevKey(keyBuf, rev, false)
	v, ok, err := r.values.Get(k)
	if err != nil {
		return fmt.Errorf("read revision %d.%d: %w", rev.main, rev.sub, err)
	}
	if !ok {
		return fmt.Errorf("revision %d.%d is in the key index but not in the backend", rev.main, rev.sub)
	}
	if err := decodeKeyValue(mem.copy(v), kv); err != nil {
		return fmt.Errorf("revision %d.%d: %w", rev.main, rev.sub, err)
	}
	return nil
}

// gteRangeEnd maps the wire encoding of "no upper bound" ("\x00") to the
// empty non-nil slice the index understands (etcd's mkGteRange).
func gteRangeEnd(rangeEnd []byte) []byte {
	if len(rangeEnd) == 1 && rangeEnd[0] == 0 {
		return []byte{}
	}
	return rangeEnd
}

// executeRange is etcd's executeRange: fetch, filter by mod/create
// revision, sort, apply the limit, at header revision curRev.
func executeRange(r *kvReader, curRev int64, req *etcdserverpb.RangeRequest) (*etcdserverpb.RangeResponse, error) {
	limit := req.Limit
	if req.SortOrder != etcdserverpb.RangeRequest_NONE ||
		req.MinModRevision != 0 || req.MaxModRevision != 0 ||
		req.MinCreateRevision != 0 || req.MaxCreateRevision != 0 {
		// Filters and sorting need every key; truncate afterwards.
		limit = 0
	}
	if limit > 0 {
		limit++ // one more to learn whether there are more
	}
	rr, err := r.rangeKeys(req.Key, gteRangeEnd(req.RangeEnd), curRev, rangeOptions{limit: limit, rev: req.Revision, count: req.CountOnly})
	if err != nil {
		return nil, err
	}
	if req.MaxModRevision != 0 {
		rr.kvs = pruneKVs(rr.kvs, func(kv *mvccpb.KeyValue) bool { return kv.ModRevision > req.MaxModRevision })
	}
	if req.MinModRevision != 0 {
		rr.kvs = pruneKVs(rr.kvs, func(kv *mvccpb.KeyValue) bool { return kv.ModRevision < req.MinModRevision })
	}
	if req.MaxCreateRevision != 0 {
		rr.kvs = pruneKVs(rr.kvs, func(kv *mvccpb.KeyValue) bool { return kv.CreateRevision > req.MaxCreateRevision })
	}
	if req.MinCreateRevision != 0 {
		rr.kvs = pruneKVs(rr.kvs, func(kv *mvccpb.KeyValue) bool { return kv.CreateRevision < req.MinCreateRevision })
	}
	if err := sortKVs(rr.kvs, req.SortOrder, req.SortTarget); err != nil {
		return nil, err
	}
	resp := &etcdserverpb.RangeResponse{Header: &etcdserverpb.ResponseHeader{Revision: rr.rev}, Count: int64(rr.count)}
	if req.Limit > 0 && len(rr.kvs) > int(req.Limit) {
		rr.kvs = rr.kvs[:req.Limit]
		resp.More = true
	}
	resp.Kvs = make([]*mvccpb.KeyValue, len(rr.kvs))
	for i := range rr.kvs {
		if req.KeysOnly {
			rr.kvs[i].Value = nil
		}
		resp.Kvs[i] = &rr.kvs[i]
	}
	return resp, nil
}

func pruneKVs(kvs []mvccpb.KeyValue, prunable func(*mvccpb.KeyValue) bool) []mvccpb.KeyValue {
	j := 0
	for i := range kvs {
		kvs[j] = kvs[i]
		if !prunable(&kvs[i]) {
			j++
		}
	}
	return kvs[:j]
}

// sortKVs orders kvs the way etcd does. The index yields keys in ascending
// order, so KEY/ASCEND needs no work and any other target with order NONE
// means ASCEND. sort.Sort (not a stable sort) is used on purpose: with the
// same input and the same Less it orders ties exactly as etcd does.
func sortKVs(kvs []mvccpb.KeyValue, order etcdserverpb.RangeRequest_SortOrder, target etcdserverpb.RangeRequest_SortTarget) error {
	if target != etcdserverpb.RangeRequest_KEY && order == etcdserverpb.RangeRequest_NONE {
		order = etcdserverpb.RangeRequest_ASCEND
	} else if target == etcdserverpb.RangeRequest_KEY && order == etcdserverpb.RangeRequest_ASCEND {
		order = etcdserverpb.RangeRequest_NONE
	}
	if order == etcdserverpb.RangeRequest_NONE {
		return nil
	}
	var sorter sort.Interface
	switch target {
	case etcdserverpb.RangeRequest_KEY:
		sorter = kvsByKey(kvs)
	case etcdserverpb.RangeRequest_VERSION:
		sorter = kvsByVersion(kvs)
	case etcdserverpb.RangeRequest_CREATE:
		sorter = kvsByCreate(kvs)
	case etcdserverpb.RangeRequest_MOD:
		sorter = kvsByMod(kvs)
	case etcdserverpb.RangeRequest_VALUE:
		sorter = kvsByValue(kvs)
	default:
		// etcd panics here; CheckRange rejects such requests earlier.
		return fmt.Errorf("sort target %d: %w", target, ErrInvalidSortOption)
	}
	switch order { // an unknown order leaves the keys as they are, as in etcd
	case etcdserverpb.RangeRequest_ASCEND:
		sort.Sort(sorter)
	case etcdserverpb.RangeRequest_DESCEND:
		sort.Sort(sort.Reverse(sorter))
	}
	return nil
}

type kvsByKey []mvccpb.KeyValue

func (s kvsByKey) Len() int           { return len(s) }
func (s kvsByKey) Swap(i, j int)      { s[i], s[j] = s[j], s[i] }
func (s kvsByKey) Less(i, j int) bool { return bytes.Compare(s[i].Key, s[j].Key) < 0 }

type kvsByVersion []mvccpb.KeyValue

func (s kvsByVersion) Len() int           { return len(s) }
func (s kvsByVersion) Swap(i, j int)      { s[i], s[j] = s[j], s[i] }
func (s kvsByVersion) Less(i, j int) bool { return s[i].Version-s[j].Version < 0 }

type kvsByCreate []mvccpb.KeyValue

func (s kvsByCreate) Len() int           { return len(s) }
func (s kvsByCreate) Swap(i, j int)      { s[i], s[j] = s[j], s[i] }
func (s kvsByCreate) Less(i, j int) bool { return s[i].CreateRevision-s[j].CreateRevision < 0 }

type kvsByMod []mvccpb.KeyValue

func (s kvsByMod) Len() int           { return len(s) }
func (s kvsByMod) Swap(i, j int)      { s[i], s[j] = s[j], s[i] }
func (s kvsByMod) Less(i, j int) bool { return s[i].ModRevision-s[j].ModRevision < 0 }

type kvsByValue []mvccpb.KeyValue

func (s kvsByValue) Len() int           { return len(s) }
func (s kvsByValue) Swap(i, j int)      { s[i], s[j] = s[j], s[i] }
func (s kvsByValue) Less(i, j int) bool { return bytes.Compare(s[i].Value, s[j].Value) < 0 }
