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
	budget     *responseBudget // nil: responses are not bounded (the apply side)
}

type rangeOptions struct {
	limit int64
	rev   int64
	count bool
	// meta leaves every Value nil and takes the metadata from the key
	// index where it has it (see kvFromIndex), reading records only for
	// keys whose newest revision at rev is not their latest.
	meta bool
	// charge counts the first charge key-values found against the
	// reader's budget (-1: all of them; 0: none).
	charge int
	// chunk reads one chunk of a streamed range: the walk stops at the
	// first live key past limit, or once the key-values found encode to
	// stopBytes or more (0: no byte bound), instead of going on counting
	// the rest of the range (see rangestream.go).
	// keep, in a chunk read, takes only the key-values it accepts (their
	// metadata is read first, the value only for those kept); the others
	// are walked and counted all the same.
	chunk     bool
	stopBytes int
	keep      func(*mvccpb.KeyValue) bool
}

type rangeResult struct {
	kvs   []mvccpb.KeyValue
	revs  []revision // with meta: where each of kvs is stored
	count int
	rev   int64
	// With rangeOptions.chunk: the encoded size of kvs, whether the walk
	// stopped at a live key it did not take (so more follow), and the
	// last live key it walked (the index's own bytes: not to be changed).
	bytes   int
	stopped bool
	last    []byte
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
	c := rangeCollector{r: r, ro: ro, rev: rev, mem: arena{expect: expectedKeys(end, ro.limit)}}
	r.index.visit(key, end, c.visit)
	if c.err == nil && r.budget.over() {
		c.err = r.budget.err()
	}
	if c.err == nil && c.deferredFrom != nil {
		// The values past the first deferAboveBytes were only counted:
		// the response fits, so load them now.
		r.index.visit(c.deferredFrom, end, c.load)
	}
	if c.err != nil {
		return rangeResult{}, c.err
	}
	return rangeResult{kvs: c.kvs, revs: c.revs, count: c.total, rev: curRev, bytes: c.bytes, stopped: c.stopped, last: c.last}, nil
}

// expectedKeys guesses how many key-values a range yields, to size the
// arena's chunks: one for a single key, else the limit or many.
func expectedKeys(end []byte, limit int64) int {
	switch {
	case end == nil:
		return 1
	case limit > 0:
		return int(min(limit, 1<<16))
	}
	return 1 << 16
}

// rangeCollector gathers the key-values of one range as the key index is
// walked in key order. Once the values it charged pass deferAboveBytes it
// keeps no more of them and only counts their sizes (deferredFrom is
// the first key not kept): a response over the bound is then refused
// having held no more than that, and one within it is loaded by a second
// walk from deferredFrom (load).
type rangeCollector struct {
	r      *kvReader
	ro     rangeOptions
	rev    int64
	mem    arena
	keyBuf [revKeyLen]byte
	kvs    []mvccpb.KeyValue
	revs   []revision
	total  int // keys alive at rev
	found  int // of them, those the response carries (kept or counted)
	// deferredFrom is the key from which values are counted, not kept.
	deferredFrom []byte
	err          error // a read failed: stop
	// With rangeOptions.chunk: the encoded size of kvs, whether the walk
	// stopped at a live key because the chunk was full, the last key.
	bytes   int
	stopped bool
	last    []byte
}

// chunkFull reports whether a chunk read has walked as many live keys,
// or taken as many bytes of key-values, as it may.
func (c *rangeCollector) chunkFull() bool {
	return (c.ro.limit > 0 && c.total >= int(c.ro.limit)) ||
		(c.ro.stopBytes > 0 && c.bytes >= c.ro.stopBytes)
}

func (c *rangeCollector) visit(ki *keyIndex) bool {
	rv, ok := ki.get(c.rev)
	if !ok {
		return true
	}
	if c.ro.chunk {
		if c.chunkFull() {
			c.stopped = true
			return false
		}
		c.last = ki.key
	}
	c.total++
	if c.ro.keep != nil {
		var m mvccpb.KeyValue
		if _, err := c.r.fetchMeta(ki, rv, &m, c.keyBuf[:0], &c.mem); err != nil {
			c.err = err
			return false
		}
		if !c.ro.keep(&m) {
			return true
		}
	}
	if c.ro.limit > 0 && c.found >= int(c.ro.limit) {
		return true // past the limit only the count goes on
	}
	c.found++
	charged := c.ro.charge < 0 || c.found <= c.ro.charge
	budget := c.r.budget
	if budget.overMemory() {
		return false // refused at once
	}
	if budget.over() || c.deferredFrom != nil || (charged && !c.ro.meta && !c.ro.chunk && budget.pastDeferral()) {
		// Over the bound, or past what is kept before knowing the
		// response fits: the rest of what it would carry is counted.
		if c.deferredFrom == nil && !budget.over() {
			c.deferredFrom = ki.key
		}
		if !charged {
			return !budget.over() // uncharged and not kept: the limit's extra key
		}
		n, err := c.r.recordSize(rv, c.keyBuf[:0])
		if err != nil {
			c.err = err
			return false
		}
		budget.count(n)
		return true
	}
	var kv mvccpb.KeyValue
	var n int
	var err error
	if c.ro.meta {
		n, err = c.r.fetchMeta(ki, rv, &kv, c.keyBuf[:0], &c.mem)
	} else {
		n, err = c.r.fetch(rv, &kv, c.keyBuf[:0], &c.mem)
	}
	if err != nil {
		c.err = err
		return false
	}
	if charged && !budget.charge(n) {
		return !budget.overMemory() // kv is not kept
	}
	c.kvs = append(c.kvs, kv)
	c.bytes += n
	if c.ro.meta {
		c.revs = append(c.revs, rv)
	}
	return true
}

// load is the second walk of a deferred range: it loads the key-values
// the first walk counted, from deferredFrom on, holding them against the
// memory bound (their sizes are already counted).
func (c *rangeCollector) load(ki *keyIndex) bool {
	rv, ok := ki.get(c.rev)
	if !ok {
		return true
	}
	if len(c.kvs) >= c.found {
		return false
	}
	var kv mvccpb.KeyValue
	n, err := c.r.fetch(rv, &kv, c.keyBuf[:0], &c.mem)
	if err != nil {
		c.err = err
		return false
	}
	charged := c.ro.charge < 0 || len(c.kvs) < c.ro.charge
	if charged && !c.r.budget.hold(n) {
		c.err = c.r.budget.err()
		return false
	}
	c.kvs = append(c.kvs, kv)
	return true
}

// fetch loads the value written at rev into kv and returns the size of
// its encoding.
func (r *kvReader) fetch(rev revision, kv *mvccpb.KeyValue, keyBuf []byte, mem *arena) (int, error) {
	if r.pending != nil {
		if p, ok := r.pending[rev]; ok {
			*kv = *p
			return kv.Size(), nil
		}
	}
	v, err := r.record(rev, keyBuf)
	if err != nil {
		return 0, err
	}
	if err := decodeKeyValue(mem.copy(v), kv); err != nil {
		return 0, fmt.Errorf("revision %d.%d: %w", rev.main, rev.sub, err)
	}
	return len(v), nil
}

// fetchMeta loads the metadata of the key-value written at rev into kv,
// leaving Value nil, and returns the size of that encoding. A key whose
// latest revision is rev and is a put has its metadata in the key index
// (creation revision, version and lease of its live generation): that
// is every key of a read at the current revision, which then touches no
// stored value at all.
func (r *kvReader) fetchMeta(ki *keyIndex, rev revision, kv *mvccpb.KeyValue, keyBuf []byte, mem *arena) (int, error) {
	if ki.isLive() && ki.last.rev() == rev {
		*kv = mvccpb.KeyValue{Key: ki.key, CreateRevision: ki.created, ModRevision: rev.main, Version: ki.ver, Lease: ki.lease}
		return kv.Size(), nil
	}
	if r.pending != nil {
		if p, ok := r.pending[rev]; ok {
			*kv = *p
			kv.Value = nil
			return kv.Size(), nil
		}
	}
	v, err := r.record(rev, keyBuf)
	if err != nil {
		return 0, err
	}
	if err := decodeKeyValue(v, kv); err != nil {
		return 0, fmt.Errorf("revision %d.%d: %w", rev.main, rev.sub, err)
	}
	kv.Key, kv.Value = mem.copy(kv.Key), nil
	return kv.Size(), nil
}

// record returns the stored record of rev, valid as long as the view.
func (r *kvReader) record(rev revision, keyBuf []byte) ([]byte, error) {
	v, ok, err := r.values.Get(appendRevKey(keyBuf, rev, false))
	if err != nil {
		return nil, fmt.Errorf("read revision %d.%d: %w", rev.main, rev.sub, err)
	}
	if !ok {
		return nil, fmt.Errorf("revision %d.%d is in the key index but not in the backend", rev.main, rev.sub)
	}
	return v, nil
}

// recordSize returns the size of the key-value stored at rev, without
// keeping it.
func (r *kvReader) recordSize(rev revision, keyBuf []byte) (int, error) {
	if r.pending != nil {
		if p, ok := r.pending[rev]; ok {
			return p.Size(), nil
		}
	}
	v, err := r.record(rev, keyBuf)
	return len(v), err
}

// loadValues fills in the values of kvs, found with rangeOptions.meta at
// revs, charging them against the budget: the second half of a filtered
// or sorted range, which loads only the values it sends. Past
// deferAboveBytes it counts the sizes of the rest before loading them.
func (r *kvReader) loadValues(kvs []mvccpb.KeyValue, revs []revision) error {
	var keyBuf [revKeyLen]byte
	mem := arena{expect: len(kvs)}
	i := 0
	for ; i < len(kvs) && !r.budget.over(); i++ {
		if r.budget.pastDeferral() {
			break
		}
		n, err := r.fetch(revs[i], &kvs[i], keyBuf[:0], &mem)
		if err != nil {
			return err
		}
		r.budget.charge(n)
	}
	if r.budget.overMemory() {
		return r.budget.err()
	}
	rest := i
	for ; i < len(kvs); i++ {
		n, err := r.recordSize(revs[i], keyBuf[:0])
		if err != nil {
			return err
		}
		r.budget.count(n)
	}
	if r.budget.over() {
		return r.budget.err()
	}
	for i = rest; i < len(kvs); i++ {
		n, err := r.fetch(revs[i], &kvs[i], keyBuf[:0], &mem)
		if err != nil {
			return err
		}
		if !r.budget.hold(n) {
			return r.budget.err()
		}
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
//
// Values are loaded only for the key-values the response carries: a
// keys_only range reads none (its metadata comes from the key index), and
// a filtered or sorted one first collects metadata, then loads the values
// of the keys that are left. Only a sort by value needs every value first.
// Everything loaded for the response is charged against the reader's
// budget as it is loaded.
func executeRange(r *kvReader, curRev int64, req *etcdserverpb.RangeRequest) (*etcdserverpb.RangeResponse, error) {
	limit := req.Limit
	filtered := isFiltered(req)
	if req.SortOrder != etcdserverpb.RangeRequest_NONE || filtered {
		// Filters and sorting need every key; truncate afterwards.
		limit = 0
	}
	if limit > 0 {
		limit++ // one more to learn whether there are more
	}
	ro := rangeOptions{limit: limit, rev: req.Revision, count: req.CountOnly, charge: -1}
	// sortKVs reorders the keys unless it sorts by key in ascending order
	// (order NONE with another target means ascending).
	reorders := req.SortTarget != etcdserverpb.RangeRequest_KEY || req.SortOrder == etcdserverpb.RangeRequest_DESCEND
	switch {
	case req.SortTarget == etcdserverpb.RangeRequest_VALUE:
		// Sorting by value needs every value; all are charged.
	case !filtered && !reorders:
		// What is found is what is sent, up to the limit (the extra key
		// that tells whether there are more is not sent).
		ro.meta = req.KeysOnly
		if req.Limit > 0 {
			ro.charge = int(req.Limit)
		}
	default:
		// Metadata first; charged once filtered, sorted and cut.
		ro.meta, ro.charge = true, 0
	}
	rr, err := r.rangeKeys(req.Key, gteRangeEnd(req.RangeEnd), curRev, ro)
	if err != nil {
		return nil, err
	}
	rr.kvs, rr.revs = filterKVs(req, rr.kvs, rr.revs)
	if err := sortKVs(rr.kvs, rr.revs, req.SortOrder, req.SortTarget); err != nil {
		return nil, err
	}
	resp := newRangeResponse(rr.rev, int64(rr.count))
	if req.Limit > 0 && len(rr.kvs) > int(req.Limit) {
		rr.kvs = rr.kvs[:req.Limit]
		resp.More = true
	}
	if ro.meta && ro.charge == 0 {
		if req.KeysOnly {
			err = r.budget.chargeKVs(rr.kvs)
		} else {
			err = r.loadValues(rr.kvs, rr.revs)
		}
		if err != nil {
			return nil, err
		}
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

// rangeResponse is a RangeResponse and its header in one allocation (a
// range's response is built per request).
type rangeResponse struct {
	resp etcdserverpb.RangeResponse
	hdr  etcdserverpb.ResponseHeader
}

func newRangeResponse(rev, count int64) *etcdserverpb.RangeResponse {
	r := &rangeResponse{hdr: etcdserverpb.ResponseHeader{Revision: rev}}
	r.resp.Header, r.resp.Count = &r.hdr, count
	return &r.resp
}

// isFiltered reports whether req filters by mod or create revision.
func isFiltered(req *etcdserverpb.RangeRequest) bool {
	return req.MinModRevision != 0 || req.MaxModRevision != 0 ||
		req.MinCreateRevision != 0 || req.MaxCreateRevision != 0
}

// filterKVs keeps the key-values within req's mod and create revision
// bounds, and their revisions with them (revs is nil or as long as kvs).
func filterKVs(req *etcdserverpb.RangeRequest, kvs []mvccpb.KeyValue, revs []revision) ([]mvccpb.KeyValue, []revision) {
	if req.MaxModRevision != 0 {
		kvs, revs = pruneKVs(kvs, revs, func(kv *mvccpb.KeyValue) bool { return kv.ModRevision > req.MaxModRevision })
	}
	if req.MinModRevision != 0 {
		kvs, revs = pruneKVs(kvs, revs, func(kv *mvccpb.KeyValue) bool { return kv.ModRevision < req.MinModRevision })
	}
	if req.MaxCreateRevision != 0 {
		kvs, revs = pruneKVs(kvs, revs, func(kv *mvccpb.KeyValue) bool { return kv.CreateRevision > req.MaxCreateRevision })
	}
	if req.MinCreateRevision != 0 {
		kvs, revs = pruneKVs(kvs, revs, func(kv *mvccpb.KeyValue) bool { return kv.CreateRevision < req.MinCreateRevision })
	}
	return kvs, revs
}

// pruneKVs drops the key-values prunable reports, and their revisions
// with them (revs is nil or as long as kvs).
func pruneKVs(kvs []mvccpb.KeyValue, revs []revision, prunable func(*mvccpb.KeyValue) bool) ([]mvccpb.KeyValue, []revision) {
	j := 0
	for i := range kvs {
		kvs[j] = kvs[i]
		if revs != nil {
			revs[j] = revs[i]
		}
		if !prunable(&kvs[i]) {
			j++
		}
	}
	if revs != nil {
		revs = revs[:j]
	}
	return kvs[:j], revs
}

// sortKVs orders kvs the way etcd does, and revs (nil or as long as kvs)
// along. The index yields keys in ascending order, so KEY/ASCEND needs no
// work and any other target with order NONE means ASCEND. sort.Sort (not
// a stable sort) is used on purpose: with the same input and the same
// Less it orders ties exactly as etcd does.
func sortKVs(kvs []mvccpb.KeyValue, revs []revision, order etcdserverpb.RangeRequest_SortOrder, target etcdserverpb.RangeRequest_SortTarget) error {
	if target != etcdserverpb.RangeRequest_KEY && order == etcdserverpb.RangeRequest_NONE {
		order = etcdserverpb.RangeRequest_ASCEND
	} else if target == etcdserverpb.RangeRequest_KEY && order == etcdserverpb.RangeRequest_ASCEND {
		order = etcdserverpb.RangeRequest_NONE
	}
	if order == etcdserverpb.RangeRequest_NONE {
		return nil
	}
	sorter := kvSorter{kvs: kvs, revs: revs}
	switch target {
	case etcdserverpb.RangeRequest_KEY:
		sorter.less = func(a, b *mvccpb.KeyValue) bool { return bytes.Compare(a.Key, b.Key) < 0 }
	case etcdserverpb.RangeRequest_VERSION:
		sorter.less = func(a, b *mvccpb.KeyValue) bool { return a.Version-b.Version < 0 }
	case etcdserverpb.RangeRequest_CREATE:
		sorter.less = func(a, b *mvccpb.KeyValue) bool { return a.CreateRevision-b.CreateRevision < 0 }
	case etcdserverpb.RangeRequest_MOD:
		sorter.less = func(a, b *mvccpb.KeyValue) bool { return a.ModRevision-b.ModRevision < 0 }
	case etcdserverpb.RangeRequest_VALUE:
		sorter.less = func(a, b *mvccpb.KeyValue) bool { return bytes.Compare(a.Value, b.Value) < 0 }
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

// kvSorter sorts key-values, and the revisions they were read at if
// known, by one of etcd's sort targets.
type kvSorter struct {
	kvs  []mvccpb.KeyValue
	revs []revision
	less func(a, b *mvccpb.KeyValue) bool
}

func (s kvSorter) Len() int           { return len(s.kvs) }
func (s kvSorter) Less(i, j int) bool { return s.less(&s.kvs[i], &s.kvs[j]) }
func (s kvSorter) Swap(i, j int) {
	s.kvs[i], s.kvs[j] = s.kvs[j], s.kvs[i]
	if s.revs != nil {
		s.revs[i], s.revs[j] = s.revs[j], s.revs[i]
	}
}
