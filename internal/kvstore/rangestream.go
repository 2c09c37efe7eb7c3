package kvstore

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// A streamed range (etcd 3.7's RangeStream) answers a RangeRequest with
// a sequence of RangeResponses whose merge, in order, is the response
// Range gives: intermediate chunks carry key-values only; the last one
// carries the rest of the key-values, the header revision, Count and
// More. The store reads it in chunks, each from a fresh snapshot taken
// for that chunk and released before the chunk is sent, all at the
// revision pinned by the first (the request's, or the store's then), so
// nothing holds a snapshot, or more than one chunk of key-values, for
// the length of the stream. If the pinned revision is compacted before
// the last chunk is read, the stream ends with ErrCompacted.
//
// Chunk sizes adapt: the first chunk takes at most streamFirstChunkKeys
// live keys; a chunk whose key-values reach the target size with half
// its key limit or less halves the next one's limit, one that reaches
// its limit under half the target doubles it. A chunk also stops once
// its key-values reach the target, whatever the key limit, so one chunk
// holds at most the target plus one key-value.
//
// Count is the tally of the live keys the chunks walked (a chunk read
// stops at its limit instead of counting the rest of the range, as a
// unary range does); with a request limit, the keys after the last one
// read are counted once, from the key index, when the limit is reached.
// With filters, Count is the unfiltered count and More says whether
// filtered key-values were left out by the limit, as in executeRange.

// ErrStreamSortOrder refuses a streamed range with a sort order other
// than the natural one (ascending by key): sorting needs the whole
// result before the first chunk, which streaming is there to avoid.
var ErrStreamSortOrder = errors.New("etcdserver: RangeStream does not support sort order other than ascending by key; use Range")

const (
	// streamFirstChunkKeys is the key limit of a stream's first chunk.
	streamFirstChunkKeys = 16
	// streamMaxChunkKeys bounds the adaptive key limit.
	streamMaxChunkKeys = 1 << 14
	// streamProbeKeys bounds the key limit of a chunk that only looks
	// for one more filtered key-value (its metadata is all it reads).
	streamProbeKeys = 1024
	// DefaultStreamChunkBytes is the chunk target when none is given:
	// etcd's default --max-request-bytes.
	DefaultStreamChunkBytes = 1536 * 1024
)

// StreamableSort reports whether req's sort order is the natural one,
// which a streamed range supports: none, or ascending by key.
func StreamableSort(req *etcdserverpb.RangeRequest) bool {
	if req.SortTarget != etcdserverpb.RangeRequest_KEY {
		return false
	}
	return req.SortOrder == etcdserverpb.RangeRequest_NONE || req.SortOrder == etcdserverpb.RangeRequest_ASCEND
}

// RangeStream serves req as a streamed range, calling send with each
// chunk in order; send's error ends the stream. chunkBytes is the target
// encoded size of a chunk's key-values (<= 0: DefaultStreamChunkBytes).
// The request must have passed CheckRange. Each chunk is held to the
// store's response bounds on its own, not the stream as a whole.
func (s *Store) RangeStream(ctx context.Context, req *etcdserverpb.RangeRequest, chunkBytes int, send func(*etcdserverpb.RangeResponse) error) error {
	if !StreamableSort(req) {
		return ErrStreamSortOrder
	}
	if req.CountOnly {
		// No key-values: one message, the unary answer.
		resp, err := s.Range(req)
		if err != nil {
			return err
		}
		return send(resp)
	}
	if chunkBytes <= 0 {
		chunkBytes = DefaultStreamChunkBytes
	}
	st := rangeStream{s: s, req: req, target: chunkBytes, limit: streamFirstChunkKeys, cursor: req.Key, rev: req.Revision}
	s.m.ranges.Inc()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		resp, err := st.next()
		if err != nil {
			return err
		}
		if resp == nil {
			continue // nothing to send from this chunk
		}
		if err := send(resp); err != nil {
			return err
		}
		if resp.Header != nil {
			return nil
		}
	}
}

// rangeStream is the state of one streamed range between chunks.
type rangeStream struct {
	s      *Store
	req    *etcdserverpb.RangeRequest
	target int // chunk byte target
	limit  int // key limit of the next chunk

	cursor    []byte // where the next chunk starts
	rev       int64  // pinned revision; the request's until the first chunk
	headerRev int64  // store revision when the first chunk was read; 0 before
	visited   int    // live keys walked so far
	sent      int    // key-values sent so far
}

// next reads the next chunk and returns the response to send: nil when
// the chunk leaves nothing to send and is not the last; the last
// response has a header.
func (st *rangeStream) next() (*etcdserverpb.RangeResponse, error) {
	req := st.req
	filtered := isFiltered(req)
	limit := st.limit
	probing := req.Limit > 0 && st.sent >= int(req.Limit)
	if probing {
		limit = min(limit, streamProbeKeys)
	}
	if req.Limit > 0 && !filtered {
		// Every key walked is sent: read no further than the limit.
		limit = min(limit, int(req.Limit)-st.sent)
	}
	ch, err := st.s.readChunk(req, st.cursor, st.rev, limit, st.target, probing)
	if err != nil {
		return nil, err
	}
	if st.headerRev == 0 { // the first chunk pins the revision
		st.rev, st.headerRev = ch.rev, ch.storeRev
	}
	st.visited += ch.visited
	kvs := ch.kvs
	more := false
	if req.Limit > 0 && st.sent+len(kvs) > int(req.Limit) {
		kvs, more = kvs[:int(req.Limit)-st.sent], true
	}
	st.sent += len(kvs)
	st.adapt(ch, limit)
	single := len(req.RangeEnd) == 0
	limitReached := req.Limit > 0 && st.sent >= int(req.Limit) && (!filtered || more)
	if ch.stopped && !single && !limitReached {
		// More keys follow and the answer is not complete yet.
		st.cursor = append(ch.last, 0)
		if len(kvs) == 0 {
			return nil, nil
		}
		return &etcdserverpb.RangeResponse{Kvs: kvs}, nil
	}
	count := st.visited
	if ch.stopped && !single {
		// Stopped by the request's limit: the keys after are counted,
		// once, from the key index.
		rest, err := st.s.countAt(append(ch.last, 0), gteRangeEnd(req.RangeEnd), st.rev)
		if err != nil {
			return nil, err
		}
		count += rest
		if !filtered {
			more = rest > 0
		}
	}
	return &etcdserverpb.RangeResponse{
		Header: &etcdserverpb.ResponseHeader{Revision: st.headerRev},
		Kvs:    kvs, Count: int64(count), More: more,
	}, nil
}

// adapt sets the next chunk's key limit from this one's size.
func (st *rangeStream) adapt(ch rangeChunk, limit int) {
	switch {
	case ch.bytes >= st.target && ch.visited <= limit/2:
		// Filled by bytes with half the keys or fewer: halve.
		st.limit = max(1, limit/2)
	case ch.visited >= limit && ch.bytes < st.target/2:
		// Stopped by keys under half the target: double.
		st.limit = min(2*limit, streamMaxChunkKeys)
	}
}

// rangeChunk is one chunk of a streamed range.
type rangeChunk struct {
	kvs      []*mvccpb.KeyValue // within the filters, values loaded unless keys_only
	visited  int                // live keys walked
	bytes    int                // encoded size of the key-values read
	last     []byte             // the last live key walked (a copy)
	stopped  bool               // the walk stopped at a live key: more follow
	rev      int64              // the revision read at
	storeRev int64              // the store revision of the snapshot read
}

// readChunk reads the live keys of req's range from key on, at revision
// rev (<= 0: the current one), up to limit keys or target bytes of
// key-values, from a snapshot of its own. The filters are applied as the
// keys are walked, on their metadata, so that only the values sent are
// read. Probing (the request's limit is reached; the chunk only tells
// whether a filtered key-value is left out) reads metadata only.
func (s *Store) readChunk(req *etcdserverpb.RangeRequest, key []byte, rev int64, limit, target int, probing bool) (rangeChunk, error) {
	snap, err := s.acquire()
	if err != nil {
		return rangeChunk{}, err
	}
	defer snap.release()
	r := s.responseReader(snap)
	ro := rangeOptions{limit: int64(limit), rev: rev, charge: -1, chunk: true, stopBytes: target, meta: req.KeysOnly || probing}
	if isFiltered(req) {
		ro.keep = func(kv *mvccpb.KeyValue) bool {
			return (req.MaxModRevision == 0 || kv.ModRevision <= req.MaxModRevision) &&
				(req.MinModRevision == 0 || kv.ModRevision >= req.MinModRevision) &&
				(req.MaxCreateRevision == 0 || kv.CreateRevision <= req.MaxCreateRevision) &&
				(req.MinCreateRevision == 0 || kv.CreateRevision >= req.MinCreateRevision)
		}
	}
	end := []byte(nil)
	if len(req.RangeEnd) > 0 {
		end = gteRangeEnd(req.RangeEnd)
	}
	rr, err := r.rangeKeys(key, end, snap.rev, ro)
	if err != nil {
		return rangeChunk{}, err
	}
	ch := rangeChunk{visited: rr.count, bytes: rr.bytes, stopped: rr.stopped, rev: rev, storeRev: snap.rev}
	if rev <= 0 {
		ch.rev = snap.rev
	}
	ch.last = append([]byte(nil), rr.last...)
	ch.kvs = make([]*mvccpb.KeyValue, len(rr.kvs))
	for i := range rr.kvs {
		ch.kvs[i] = &rr.kvs[i]
	}
	return ch, nil
}

// countAt counts the keys in [key, end) alive at rev, from the key
// index of the current snapshot.
func (s *Store) countAt(key, end []byte, rev int64) (int, error) {
	snap, err := s.acquire()
	if err != nil {
		return 0, err
	}
	defer snap.release()
	if rev < snap.compactRev {
		return 0, ErrCompacted
	}
	return snap.keys.count(key, end, rev), nil
}
