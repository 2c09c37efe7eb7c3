package forward

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/internal/cluster/transport"
	"github.com/metastore-io/metastore/internal/lease"
)

// Keep-alives a follower forwards go to the leader in batches: every
// keep-alive arriving while a batch is on its way to the same member waits
// for the next one, which carries all of them in one transport request.
// One batch is in flight per member it goes to, so under load the batches
// grow instead of the requests multiplying; a lone keep-alive goes at
// once, alone. The leader proves it still leads (a ReadIndex round) once
// per batch and renews each lease on its own clock: a keep-alive is
// answered only with a TTL the leader's lessor granted (etcd's rule), or
// with the leader's error.
//
// A leader that froze or was cut off answers nothing, while the others
// elect a new one within an election timeout or two; a keep-alive must
// not wait behind a batch stuck on the old leader, or the lease expires
// on the new one. So each batch is bounded by an election timeout (a
// leader that takes longer has probably lost its place), and when raft
// reports another leader, every keep-alive waiting for a batch to a
// member that no longer leads, or riding in one, is answered at once with
// the retryable lease.ErrNotPrimary: its caller (untilAnswered) sends it
// again to the new leader, whose batch nothing stuck holds up.
//
// Wire format (the body of a lease.renewbatch request, and the OK body of
// its reply), each item prefixed with its length as a uvarint:
//
//	request = { len | pb.LeaseKeepAliveRequest }...
//	reply   = { len | status u8 | body }...    (codec.go's reply, per lease, in request order)
//
// For example two keep-alives, leases 7 and 9, where 9 does not exist:
// request 02 08 07 | 02 08 09; reply 05 00 08 07 10 3c | 10 01 "lease not found".

// maxRenewBatch bounds the keep-alives of one forwarded batch (some 12
// bytes each, far below the transport's forward size limit).
const maxRenewBatch = 4096

// errRenewRetargeted answers a keep-alive forwarded to a member that no
// longer leads: its caller retries with the new leader.
var errRenewRetargeted = fmt.Errorf("%w: the leader changed while the keep-alive was on its way", lease.ErrNotPrimary)

// RenewBatcher coalesces the keep-alives a member forwards to the leader.
//
// Lock order: mu is a leaf lock.
type RenewBatcher struct {
	transport *transport.Transport
	// spawn runs a flush as one of the member's goroutines, so that the
	// member waits for it on stop; it fails once the member is stopping.
	spawn func(func()) error
	// callTimeout bounds one forwarded batch: an election timeout.
	callTimeout time.Duration
	stopping    <-chan struct{} // the member's, closed when it begins to stop

	mu sync.Mutex
	// leader is the leader raft last reported (Retarget); keep-alives
	// for any other member are refused at once.
	leader uint64
	// queues holds the keep-alives for each member that has some waiting
	// or a batch on its way; a queue leaves the map when it empties or
	// its member stops leading.
	queues map[uint64]*renewQueue
	// batches counts the batches sent (tests read it).
	batches atomic.Uint64
}

// NewRenewBatcher is the batcher of a member whose transport is t. spawn
// runs the member's goroutines (see RenewBatcher.spawn), callTimeout
// bounds one batch (an election timeout), and stopping closes when the
// member begins to stop.
func NewRenewBatcher(t *transport.Transport, spawn func(func()) error, callTimeout time.Duration, stopping <-chan struct{}) *RenewBatcher {
	return &RenewBatcher{transport: t, spawn: spawn, callTimeout: callTimeout, stopping: stopping, queues: map[uint64]*renewQueue{}}
}

// Batches is the number of batches sent so far.
func (b *RenewBatcher) Batches() uint64 { return b.batches.Load() }

// renewQueue is the keep-alives for one member: those waiting for the
// next batch, and the batch on its way (sent is nil when none is).
type renewQueue struct {
	to      uint64
	pending []*batchedRenew
	sent    []*batchedRenew
	cancel  context.CancelFunc // ends the batch on its way
}

// batchedRenew is one keep-alive waiting for its batch's answer.
type batchedRenew struct {
	id   int64
	once sync.Once
	done chan struct{} // closed once ttl and err are set
	ttl  int64
	err  error
}

// answer sets the keep-alive's answer; only the first one counts (a
// Retarget may answer a keep-alive whose batch answers later).
func (r *batchedRenew) answer(ttl int64, err error) {
	r.once.Do(func() {
		r.ttl, r.err = ttl, err
		close(r.done)
	})
}

func answerAll(rs []*batchedRenew, ttl int64, err error) {
	for _, r := range rs {
		r.answer(ttl, err)
	}
}

// Renew forwards a keep-alive of lease id to leader with the next batch
// and returns the leader's answer.
func (b *RenewBatcher) Renew(ctx context.Context, leader uint64, id int64) (int64, error) {
	r := &batchedRenew{id: id, done: make(chan struct{})}
	b.mu.Lock()
	if leader != b.leader {
		b.mu.Unlock()
		return -1, errRenewRetargeted
	}
	q := b.queues[leader]
	if q == nil {
		q = &renewQueue{to: leader}
		b.queues[leader] = q
	}
	q.pending = append(q.pending, r)
	start := len(q.pending) == 1 && q.sent == nil
	b.mu.Unlock()
	if start {
		if err := b.spawn(func() { b.flush(q) }); err != nil {
			b.abandon(q, err)
			return -1, err
		}
	}
	select {
	case <-r.done:
		return r.ttl, r.err
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

// Retarget is raft's news of a new leader (0: none known). Keep-alives
// waiting for, or riding in, a batch to any other member get the
// retryable errRenewRetargeted at once, and that member's batch on its
// way is cancelled. It never blocks (it runs on the raft loop).
func (b *RenewBatcher) Retarget(leader uint64) {
	b.mu.Lock()
	b.leader = leader
	var stale []*renewQueue
	for to, q := range b.queues {
		if to != leader {
			stale = append(stale, q)
		}
	}
	b.mu.Unlock()
	for _, q := range stale {
		b.abandon(q, errRenewRetargeted)
	}
}

// abandon removes q from the batcher, cancels its batch on its way and
// answers all of its keep-alives with err.
func (b *RenewBatcher) abandon(q *renewQueue, err error) {
	b.mu.Lock()
	if b.queues[q.to] == q {
		delete(b.queues, q.to)
	}
	rs := slices.Concat(q.pending, q.sent)
	q.pending, q.sent = nil, nil
	cancel := q.cancel
	q.cancel = nil
	b.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	answerAll(rs, -1, err)
}

// flush sends q's batches, one at a time, until none is pending or q is
// abandoned.
func (b *RenewBatcher) flush(q *renewQueue) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), b.callTimeout)
		b.mu.Lock()
		if b.queues[q.to] != q || len(q.pending) == 0 {
			if b.queues[q.to] == q {
				delete(b.queues, q.to)
			}
			q.sent, q.cancel = nil, nil
			b.mu.Unlock()
			cancel()
			return
		}
		n := min(len(q.pending), maxRenewBatch)
		batch := q.pending[:n:n] // capped: later keep-alives never land in it
		q.pending = q.pending[n:]
		q.sent, q.cancel = batch, cancel
		b.mu.Unlock()
		b.send(ctx, q.to, batch)
		cancel()
	}
}

// send forwards one batch to member to and hands each keep-alive its
// answer. The batch outlives the callers that gave up; it ends within the
// call timeout, when its member stops leading (Retarget cancels ctx), or
// when this member stops (Stop waits for it).
func (b *RenewBatcher) send(ctx context.Context, to uint64, batch []*batchedRenew) {
	ids := make([]int64, len(batch))
	for i, r := range batch {
		ids[i] = r.id
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-b.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	b.batches.Add(1)
	answers, err := b.forward(ctx, to, ids)
	for i, r := range batch {
		if err != nil {
			r.answer(-1, err)
		} else {
			r.answer(answers[i].ttl, answers[i].err)
		}
	}
}

// renewAnswer is the leader's answer to one keep-alive of a batch.
type renewAnswer struct {
	ttl int64
	err error
}

func (b *RenewBatcher) forward(ctx context.Context, leader uint64, ids []int64) ([]renewAnswer, error) {
	reply, err := b.transport.Forward(ctx, leader, MethodLeaseRenewBatch, EncodeRenewBatch(ids))
	if status.Code(err) == codes.Unimplemented {
		// A leader of an earlier build (a rolling upgrade) knows only
		// single keep-alives.
		return b.forwardEach(ctx, leader, ids), nil
	}
	if err != nil {
		return nil, Retryable(fmt.Errorf("%w: %s to member %x: %w", errFailed, MethodLeaseRenewBatch, leader, err))
	}
	body, err := DecodeReply(reply)
	if err != nil {
		return nil, err
	}
	items, err := SplitDelimited(body)
	if err != nil || len(items) != len(ids) {
		return nil, fmt.Errorf("%w: %d keep-alive answers for %d keep-alives (%v)", ErrMalformedReply, len(items), len(ids), err)
	}
	answers := make([]renewAnswer, len(ids))
	for i, item := range items {
		answers[i].ttl = -1
		body, err := DecodeReply(item)
		if err != nil {
			answers[i].err = err
			continue
		}
		answers[i] = decodeRenewReply(body)
	}
	return answers, nil
}

// decodeRenewReply is the answer a leader's encoded keep-alive reply
// gives: the TTL, or why it could not be read (ttl -1).
func decodeRenewReply(body []byte) renewAnswer {
	var resp pb.LeaseKeepAliveResponse
	if err := resp.Unmarshal(body); err != nil {
		return renewAnswer{ttl: -1, err: fmt.Errorf("server: decode forwarded keep-alive reply: %w", err)}
	}
	return renewAnswer{ttl: resp.TTL}
}

// forwardEach forwards the keep-alives of a batch one by one, side by
// side, as members of earlier builds did (MethodLeaseRenew).
func (b *RenewBatcher) forwardEach(ctx context.Context, leader uint64, ids []int64) []renewAnswer {
	answers := make([]renewAnswer, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i].ttl = -1
			body, err := Call(ctx, b.transport, leader, MethodLeaseRenew, &pb.LeaseKeepAliveRequest{ID: id})
			if err != nil {
				answers[i].err = Retryable(err)
				return
			}
			answers[i] = decodeRenewReply(body)
		}()
	}
	wg.Wait()
	return answers
}

// EncodeRenewBatch encodes the request of a batch.
func EncodeRenewBatch(ids []int64) []byte {
	items := make([][]byte, len(ids))
	for i, id := range ids {
		// Marshalling a LeaseKeepAliveRequest cannot fail.
		items[i], _ = (&pb.LeaseKeepAliveRequest{ID: id}).Marshal()
	}
	return AppendDelimited(nil, items)
}

// DecodeRenewBatch decodes the request of a batch.
func DecodeRenewBatch(data []byte) ([]int64, error) {
	items, err := SplitDelimited(data)
	if err != nil {
		return nil, err
	}
	if len(items) > maxRenewBatch {
		return nil, fmt.Errorf("%d keep-alives in one batch, over %d", len(items), maxRenewBatch)
	}
	ids := make([]int64, len(items))
	for i, item := range items {
		var r pb.LeaseKeepAliveRequest
		if err := r.Unmarshal(item); err != nil {
			return nil, fmt.Errorf("keep-alive %d: %w", i, err)
		}
		ids[i] = r.ID
	}
	return ids, nil
}

// AppendDelimited appends items to dst, each prefixed with its length
// as a uvarint.
func AppendDelimited(dst []byte, items [][]byte) []byte {
	for _, item := range items {
		dst = binary.AppendUvarint(dst, uint64(len(item)))
		dst = append(dst, item...)
	}
	return dst
}

var errTruncatedItem = errors.New("length-delimited item runs past the end")

// SplitDelimited splits data into its length-prefixed items (sharing
// data's bytes).
func SplitDelimited(data []byte) ([][]byte, error) {
	var items [][]byte
	for len(data) > 0 {
		n, k := binary.Uvarint(data)
		if k <= 0 {
			return nil, fmt.Errorf("bad item length at item %d", len(items))
		}
		data = data[k:]
		if n > uint64(len(data)) {
			return nil, fmt.Errorf("item %d: %w", len(items), errTruncatedItem)
		}
		items = append(items, data[:n])
		data = data[n:]
	}
	return items, nil
}
