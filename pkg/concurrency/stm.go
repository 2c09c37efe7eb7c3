package concurrency

import (
	"context"
	"math"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// STM is a transactional view of the store handed to the function NewSTM
// runs. Its unexported methods keep other implementations out, as etcd's
// does.
type STM interface {
	// Get returns the value of the first key and adds all keys to the read
	// set, fetching them in one round trip. A failed read aborts the
	// transaction: NewSTM returns the error and Get never returns.
	Get(key ...string) string
	// Put adds a write of key to the write set.
	Put(key, val string, opts ...clientv3.OpOption)
	// Rev returns the mod revision of key as read by the transaction.
	Rev(key string) int64
	// Del adds a delete of key to the write set.
	Del(key string)

	// commit applies the write set if the isolation guard holds; it
	// returns nil when it does not (the function must run again).
	commit() *clientv3.TxnResponse
	// reset empties the read and write sets before a run.
	reset()
}

// Isolation is the isolation level of an STM transaction.
type Isolation int

const (
	// SerializableSnapshot reads from one snapshot and fails the commit on
	// any conflicting read or write: serializable with write-conflict
	// checks. It is the default.
	SerializableSnapshot Isolation = iota
	// Serializable reads every key at the revision of the transaction's
	// first read and fails the commit if any read key changed.
	Serializable
	// RepeatableReads returns the same data for repeated reads of a key
	// within one run and fails the commit if any read key changed.
	RepeatableReads
	// ReadCommitted reads whatever is committed and never fails the commit.
	ReadCommitted
)

// stmAbort carries a read or commit error out of the user's function, which
// has no error path for Get; NewSTM recovers it.
type stmAbort struct{ err error }

type stmOptions struct {
	iso      Isolation
	ctx      context.Context
	prefetch []string
}

// stmOption configures NewSTM. It is unexported, as in etcd, so options
// can only come from this package.
type stmOption func(*stmOptions)

// WithIsolation sets the isolation level (default SerializableSnapshot).
func WithIsolation(lvl Isolation) stmOption {
	return func(o *stmOptions) { o.iso = lvl }
}

// WithAbortContext sets the context that bounds every request of the
// transaction; when it ends, NewSTM gives up with its error.
func WithAbortContext(ctx context.Context) stmOption {
	return func(o *stmOptions) { o.ctx = ctx }
}

// WithPrefetch reads the given keys in one round trip before each run of
// the function, for transactions that always read them.
func WithPrefetch(keys ...string) stmOption {
	return func(o *stmOptions) { o.prefetch = append(o.prefetch, keys...) }
}

// NewSTM runs apply in a transaction and commits its writes, running apply
// again from scratch whenever the commit's guard fails. It returns the
// committed Txn's response, or the first error apply or a request returns.
func NewSTM(c *clientv3.Client, apply func(STM) error, so ...stmOption) (*clientv3.TxnResponse, error) {
	opts := stmOptions{ctx: c.Ctx()}
	for _, set := range so {
		set(&opts)
	}
	if len(opts.prefetch) > 0 {
		body := apply
		apply = func(s STM) error {
			s.Get(opts.prefetch...)
			return body(s)
		}
	}
	if opts.iso < SerializableSnapshot || opts.iso > ReadCommitted {
		panic("unsupported stm")
	}
	return runSTM(&stm{client: c, ctx: opts.ctx, iso: opts.iso}, apply)
}

// NewSTMRepeatable runs apply with RepeatableReads isolation.
//
// Deprecated: use NewSTM with WithAbortContext and WithIsolation.
func NewSTMRepeatable(ctx context.Context, c *clientv3.Client, apply func(STM) error) (*clientv3.TxnResponse, error) {
	return NewSTM(c, apply, WithAbortContext(ctx), WithIsolation(RepeatableReads))
}

// NewSTMSerializable runs apply with Serializable isolation.
//
// Deprecated: use NewSTM with WithAbortContext and WithIsolation.
func NewSTMSerializable(ctx context.Context, c *clientv3.Client, apply func(STM) error) (*clientv3.TxnResponse, error) {
	return NewSTM(c, apply, WithAbortContext(ctx), WithIsolation(Serializable))
}

// NewSTMReadCommitted runs apply with ReadCommitted isolation.
//
// Deprecated: use NewSTM with WithAbortContext and WithIsolation.
func NewSTMReadCommitted(ctx context.Context, c *clientv3.Client, apply func(STM) error) (*clientv3.TxnResponse, error) {
	return NewSTM(c, apply, WithAbortContext(ctx), WithIsolation(ReadCommitted))
}

// runSTM is the retry loop. Errors raised inside Get or commit arrive as
// an stmAbort panic; any other panic belongs to the caller and goes on.
func runSTM(s STM, apply func(STM) error) (resp *clientv3.TxnResponse, err error) {
	defer func() {
		if r := recover(); r != nil {
			abort, ok := r.(stmAbort)
			if !ok {
				panic(r)
			}
			resp, err = nil, abort.err
		}
	}()
	for {
		s.reset()
		if err := apply(s); err != nil {
			return nil, err
		}
		if resp := s.commit(); resp != nil {
			return resp, nil
		}
	}
}

// stmWrite is one buffered write: the value Get should return for the key
// (empty for a delete) and the operation to commit.
type stmWrite struct {
	val string
	op  clientv3.Op
}

// stm implements every isolation level; iso decides where reads come from
// (readOpts) and what the commit compares (guard).
type stm struct {
	client *clientv3.Client
	ctx    context.Context
	iso    Isolation

	reads  map[string]*clientv3.GetResponse
	writes map[string]stmWrite
	// snapshotRev is the revision serializable levels read at, set by the
	// first read of a run; 0 before it.
	snapshotRev int64
	// prefetched holds the values a failed serializable commit returned,
	// to be used by the next run instead of reading again.
	prefetched map[string]*clientv3.GetResponse
}

func (s *stm) serializable() bool { return s.iso == SerializableSnapshot || s.iso == Serializable }

func (s *stm) reset() {
	s.reads = make(map[string]*clientv3.GetResponse)
	s.writes = make(map[string]stmWrite)
	s.snapshotRev = 0
}

func (s *stm) Get(keys ...string) string {
	if len(keys) == 0 {
		return ""
	}
	for _, k := range keys {
		if w, ok := s.writes[k]; ok {
			return w.val
		}
	}
	return valueOf(s.read(keys))
}

func (s *stm) Put(key, val string, opts ...clientv3.OpOption) {
	s.writes[key] = stmWrite{val: val, op: clientv3.OpPut(key, val, opts...)}
}

func (s *stm) Del(key string) {
	s.writes[key] = stmWrite{op: clientv3.OpDelete(key)}
}

func (s *stm) Rev(key string) int64 {
	if resp := s.read([]string{key}); len(resp.Kvs) > 0 {
		return resp.Kvs[0].ModRevision
	}
	return 0
}

// read returns the response for keys[0], fetching every key not yet in the
// read set in a single Txn. The first read of a serializable run fixes the
// snapshot revision for the rest of the run.
func (s *stm) read(keys []string) *clientv3.GetResponse {
	firstRead := len(s.reads) == 0
	var missing []string
	for _, k := range keys {
		if _, ok := s.reads[k]; ok {
			continue
		}
		if resp, ok := s.prefetched[k]; ok {
			delete(s.prefetched, k)
			s.reads[k] = resp
			continue
		}
		missing = append(missing, k)
	}
	if len(missing) > 0 {
		opts := s.readOpts()
		ops := make([]clientv3.Op, len(missing))
		for i, k := range missing {
			ops[i] = clientv3.OpGet(k, opts...)
		}
		resp, err := s.client.Txn(s.ctx).Then(ops...).Commit()
		if err != nil {
			panic(stmAbort{err})
		}
		for i, k := range missing {
			s.reads[k] = (*clientv3.GetResponse)(resp.Responses[i].GetResponseRange())
		}
	}
	first := s.reads[keys[0]]
	if firstRead && s.serializable() {
		// The run's first read fixes its snapshot, whether it came from
		// the server just now or from the previous run's failed commit.
		s.snapshotRev = first.Header.Revision
	}
	return first
}

// readOpts: serializable levels read at the snapshot once one is fixed;
// RepeatableReads and ReadCommitted read the local member's state.
func (s *stm) readOpts() []clientv3.OpOption {
	switch {
	case s.serializable() && s.snapshotRev > 0:
		return []clientv3.OpOption{clientv3.WithRev(s.snapshotRev), clientv3.WithSerializable()}
	case s.serializable():
		return nil
	default:
		return []clientv3.OpOption{clientv3.WithSerializable()}
	}
}

// guard is the If of the commit Txn for the isolation level.
func (s *stm) guard() []clientv3.Cmp {
	if s.iso == ReadCommitted {
		return nil
	}
	cmps := make([]clientv3.Cmp, 0, len(s.reads)+len(s.writes))
	oldest := int64(math.MaxInt64 - 1)
	for k, resp := range s.reads {
		modRev := int64(0)
		if len(resp.Kvs) > 0 {
			modRev = resp.Kvs[0].ModRevision
		}
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", modRev))
		oldest = min(oldest, resp.Header.Revision)
	}
	if s.iso == SerializableSnapshot {
		// A key written since the oldest read is a write conflict, even if
		// the transaction never read it.
		for k := range s.writes {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "<", oldest+1))
		}
	}
	return cmps
}

func (s *stm) commit() *clientv3.TxnResponse {
	writes := make([]clientv3.Op, 0, len(s.writes))
	for _, w := range s.writes {
		writes = append(writes, w.op)
	}
	txn := s.client.Txn(s.ctx).If(s.guard()...).Then(writes...)
	var reread []string
	if s.serializable() {
		// On conflict, return the current values of the read set in the
		// same round trip; the next run starts from them.
		reread = make([]string, 0, len(s.reads))
		ops := make([]clientv3.Op, 0, len(s.reads))
		for k := range s.reads {
			reread = append(reread, k)
			ops = append(ops, clientv3.OpGet(k))
		}
		txn = txn.Else(ops...)
	}
	resp, err := txn.Commit()
	if err != nil {
		panic(stmAbort{err})
	}
	if resp.Succeeded {
		return resp
	}
	if s.serializable() {
		s.prefetched = make(map[string]*clientv3.GetResponse, len(reread))
		for i, k := range reread {
			s.prefetched[k] = (*clientv3.GetResponse)(resp.Responses[i].GetResponseRange())
		}
	}
	return nil
}

func valueOf(resp *clientv3.GetResponse) string {
	if resp == nil || len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}
