package concurrency

import (
	"context"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/pkg/concurrency/queue"
)

// The errors Election reports; the texts are etcd's.
var (
	// ErrElectionNotLeader is returned by Proclaim when this session does
	// not lead (any more).
	ErrElectionNotLeader = errors.New("election: not leader")
	// ErrElectionNoLeader is returned by Leader when nobody campaigns.
	ErrElectionNoLeader = errors.New("election: no leader")
)

// Election is a leader election on a key prefix. Candidates queue exactly
// like mutex waiters (see the package documentation); the oldest candidate
// leads and its key's value is the value it proclaims. An Election value is
// used by one goroutine at a time, except Observe and Leader.
type Election struct {
	session *Session
	prefix  string

	leaderKey     string
	leaderRev     int64
	leaderSession *Session // nil when this Election does not lead
	hdr           *pb.ResponseHeader
}

// NewElection returns an election on prefix pfx for session s.
func NewElection(s *Session, pfx string) *Election {
	return &Election{session: s, prefix: pfx + "/"}
}

// ResumeElection returns an election that already leads through the given
// key and create revision, for example one recorded before a restart. pfx
// is used as given: it is the full prefix, trailing "/" included.
func ResumeElection(s *Session, pfx string, leaderKey string, leaderRev int64) *Election {
	return &Election{
		session:       s,
		prefix:        pfx,
		leaderKey:     leaderKey,
		leaderRev:     leaderRev,
		leaderSession: s,
	}
}

// Campaign enters the election with value val and blocks until this
// session leads, ctx ends, or a non-recoverable error occurs. A session
// that is already a candidate keeps its place and only updates its value.
// If ctx is cancelled while waiting, the candidacy is withdrawn.
func (e *Election) Campaign(ctx context.Context, val string) error {
	s := e.session
	client := s.Client()

	key := fmt.Sprintf("%s%x", e.prefix, s.Lease())
	resp, err := client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, val, clientv3.WithLease(s.Lease()))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		if ctx.Err() != nil {
			// Withdrawn while the put was under way: it may have been
			// applied without the answer reaching us, so take back
			// whatever this session's key is (beyond etcd, whose
			// candidacy then lingers until the lease expires).
			_, _ = client.Txn(client.Ctx()).
				If(clientv3.Compare(clientv3.LeaseValue(key), "=", s.Lease())).
				Then(clientv3.OpDelete(key)).
				Commit()
		}
		return err
	}
	e.leaderKey, e.leaderRev, e.leaderSession = key, resp.Header.Revision, s
	if !resp.Succeeded {
		existing := resp.Responses[0].GetResponseRange().Kvs[0]
		e.leaderRev = existing.CreateRevision
		if string(existing.Value) != val {
			if err := e.Proclaim(ctx, val); err != nil {
				_ = e.Resign(ctx)
				return err
			}
		}
	}

	if err := queue.Await(ctx, client, e.prefix, e.leaderRev); err != nil {
		if ctx.Err() != nil {
			// Withdrawn by the caller: remove the key so the candidacy
			// does not linger until the lease expires.
			_ = e.Resign(client.Ctx())
		} else {
			e.leaderSession = nil
		}
		return err
	}
	e.hdr = resp.Header
	return nil
}

// Proclaim changes the leader's value without a new election. It fails
// with ErrElectionNotLeader unless this session still leads.
func (e *Election) Proclaim(ctx context.Context, val string) error {
	if e.leaderSession == nil {
		return ErrElectionNotLeader
	}
	resp, err := e.session.Client().Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(e.leaderKey), "=", e.leaderRev)).
		Then(clientv3.OpPut(e.leaderKey, val, clientv3.WithLease(e.leaderSession.Lease()))).
		Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		e.leaderKey = ""
		return ErrElectionNotLeader
	}
	e.hdr = resp.Header
	return nil
}

// Resign gives up leadership (or candidacy) by deleting this session's key,
// if it is still the one this Election created. Resigning when not leading
// is a no-op.
func (e *Election) Resign(ctx context.Context) error {
	if e.leaderSession == nil {
		return nil
	}
	resp, err := e.session.Client().Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(e.leaderKey), "=", e.leaderRev)).
		Then(clientv3.OpDelete(e.leaderKey)).
		Commit()
	if err == nil {
		e.hdr = resp.Header
	}
	e.leaderKey = ""
	e.leaderSession = nil
	return err
}

// Leader returns the current leader's key and value, or
// ErrElectionNoLeader when nobody campaigns.
func (e *Election) Leader(ctx context.Context) (*clientv3.GetResponse, error) {
	resp, err := e.session.Client().Get(ctx, e.prefix, clientv3.WithFirstCreate()...)
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, ErrElectionNoLeader
	}
	return resp, nil
}

// Observe reports the leader and every value it proclaims, in order, and
// then each following leader the same way. Each response holds one key. The
// channel closes when ctx ends or the underlying watch fails.
func (e *Election) Observe(ctx context.Context) <-chan clientv3.GetResponse {
	out := make(chan clientv3.GetResponse)
	go e.observe(ctx, out)
	return out
}

// observe alternates between two phases until ctx ends or a watch fails:
// find the leader (waiting for the first candidate if there is none), then
// follow the leader's key until it is deleted.
func (e *Election) observe(ctx context.Context, out chan<- clientv3.GetResponse) {
	defer close(out)
	client := e.session.Client()
	for {
		hdr, leader, ok := e.awaitLeader(ctx, client)
		if !ok {
			return
		}
		select {
		case out <- clientv3.GetResponse{Header: hdr, Kvs: []*mvccpb.KeyValue{leader}}:
		case <-ctx.Done():
			return
		}
		if !followLeader(ctx, client, leader.Key, hdr.Revision+1, out) {
			return
		}
	}
}

// awaitLeader returns the current leader, waiting for the first candidate
// to appear when there is none. ok is false when ctx ended or a read or
// watch failed.
func (e *Election) awaitLeader(ctx context.Context, client *clientv3.Client) (*pb.ResponseHeader, *mvccpb.KeyValue, bool) {
	resp, err := client.Get(ctx, e.prefix, clientv3.WithFirstCreate()...)
	if err != nil {
		return nil, nil, false
	}
	if len(resp.Kvs) > 0 {
		return resp.Header, resp.Kvs[0], true
	}
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	watch := client.Watch(watchCtx, e.prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision))
	for {
		wr, open := <-watch
		if !open || wr.Err() != nil {
			return nil, nil, false
		}
		// The first put under an empty prefix is the new leader; deletes
		// (of candidates that gave up) are skipped.
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.PUT {
				hdr := wr.Header
				// A batch may hold several puts: report the leader at the
				// revision of its own write.
				hdr.Revision = ev.Kv.ModRevision
				return &hdr, ev.Kv, true
			}
		}
	}
}

// followLeader forwards every new value of the leader's key from revision
// rev on, until the key is deleted (it returns true: look for the next
// leader) or ctx ends or the watch fails (false).
func followLeader(ctx context.Context, client *clientv3.Client, key []byte, rev int64, out chan<- clientv3.GetResponse) bool {
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	watch := client.Watch(watchCtx, string(key), clientv3.WithRev(rev))
	for {
		wr, open := <-watch
		if !open {
			return false
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return true
			}
			hdr := wr.Header
			select {
			case out <- clientv3.GetResponse{Header: &hdr, Kvs: []*mvccpb.KeyValue{ev.Kv}}:
			case <-ctx.Done():
				return false
			}
		}
	}
}

// Key is the leader key this Election created, or "" when it does not lead.
func (e *Election) Key() string { return e.leaderKey }

// Rev is the create revision of the leader key, if elected.
func (e *Election) Rev() int64 { return e.leaderRev }

// Header is the response header of the last successful campaign, proclaim
// or resign.
func (e *Election) Header() *pb.ResponseHeader { return e.hdr }
