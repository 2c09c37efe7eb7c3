// Package queue is the waiting line shared by the mutexes and elections of
// pkg/concurrency and the fenced locks of pkg/concurrency/lock.
//
// A queue is a key prefix. Each participant owns one key under it, attached
// to the participant's lease; the key with the smallest create revision is
// the head (the lock holder, the leader). For the prefix "/jobs/lock/":
//
//	/jobs/lock/6a   create revision 41   head
//	/jobs/lock/6b   create revision 42   waits for 6a
//	/jobs/lock/6c   create revision 45   waits for 6b
//
// Join puts a participant in line with one transaction that also reads the
// head, so an uncontended acquisition is a single round trip. Await blocks
// until nobody is ahead any more, watching only the nearest predecessor at
// a time, so a release wakes exactly one waiter.
package queue

import (
	"context"
	"errors"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrWatchLost is returned by Await when its watch channel closed while
// neither the context nor the watch said why (etcd's wording).
var ErrWatchLost = errors.New("lost watcher waiting for delete")

// Position is a participant's place in a queue after Join.
type Position struct {
	// Rev is the create revision of the participant's key.
	Rev int64
	// Head reports whether the participant is first in line.
	Head bool
	// Header is the header of the Join transaction.
	Header *pb.ResponseHeader
}

// Join creates key (under prefix, attached to lease, holding val) unless it
// exists, in which case the participant keeps its place, and reports where
// it stands, all in one transaction.
func Join(ctx context.Context, client *clientv3.Client, prefix, key, val string, lease clientv3.LeaseID) (Position, error) {
	head := clientv3.OpGet(prefix, clientv3.WithFirstCreate()...)
	resp, err := client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, val, clientv3.WithLease(lease)), head).
		Else(clientv3.OpGet(key), head).
		Commit()
	if err != nil {
		return Position{}, err
	}
	pos := Position{Rev: resp.Header.Revision, Header: resp.Header}
	if !resp.Succeeded {
		pos.Rev = resp.Responses[0].GetResponseRange().Kvs[0].CreateRevision
	}
	first := resp.Responses[1].GetResponseRange().Kvs
	pos.Head = len(first) == 0 || first[0].CreateRevision == pos.Rev
	return pos, nil
}

// Await blocks until no key under prefix has a create revision below rev,
// that is until everyone ahead in line is gone. It watches only the nearest
// predecessor; when that key is deleted it looks again, since the key may
// have belonged to a waiter that left rather than to the head.
//
// Errors are returned unwrapped, as etcd's package returns them, so callers
// can compare them with rpctypes' sentinels and context's errors.
func Await(ctx context.Context, client *clientv3.Client, prefix string, rev int64) error {
	return AwaitScope(ctx, client, Scope{Prefix: prefix}, rev)
}

// AwaitScope is Await for the queue that scope selects.
func AwaitScope(ctx context.Context, client *clientv3.Client, scope Scope, rev int64) error {
	for {
		key, at, err := scope.nearest(ctx, client, rev)
		if err != nil || key == "" {
			return err
		}
		if err := awaitDelete(ctx, client, key, at); err != nil {
			return err
		}
	}
}

// Scope is the set of keys that make up one queue: the keys under Prefix
// that Member accepts, or all of them when Member is nil. A queue whose
// range also holds keys of other queues (the HTTP lock service keeps a
// name's queue inside the range its older layout used, so that older
// members still see it) names its own keys with Member.
type Scope struct {
	Prefix string
	Member func(key string) bool
}

func (s Scope) has(key string) bool { return s.Member == nil || s.Member(key) }

// nearest is the key of the queue created last before rev, "" when
// there is none, and the revision it was read at.
func (s Scope) nearest(ctx context.Context, client *clientv3.Client, rev int64) (string, int64, error) {
	opts := append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))
	if s.Member != nil {
		// Every key ahead, newest first: the nearest may not be the queue's.
		opts = []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMaxCreateRev(rev - 1),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend)}
	}
	resp, err := client.Get(ctx, s.Prefix, opts...)
	if err != nil {
		return "", 0, err
	}
	for _, kv := range resp.Kvs {
		if s.has(string(kv.Key)) {
			return string(kv.Key), resp.Header.Revision, nil
		}
	}
	return "", resp.Header.Revision, nil
}

// awaitDelete blocks until key is deleted at or after revision rev.
func awaitDelete(ctx context.Context, client *clientv3.Client, key string, rev int64) error {
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var last clientv3.WatchResponse
	for last = range client.Watch(watchCtx, key, clientv3.WithRev(rev)) {
		for _, ev := range last.Events {
			if ev.Type == mvccpb.DELETE {
				return nil
			}
		}
	}
	if err := last.Err(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return ErrWatchLost
}

// Place is a participant's standing after Claim.
type Place struct {
	// Rev is the create revision of the participant's key.
	Rev int64
	// Ahead is how many participants are in line before it (0: the head).
	Ahead int
	// HeadKey and HeadRev name the head of the queue.
	HeadKey string
	HeadRev int64
	// Existed reports that the key was there before Claim: taken over, or
	// left exactly as it was when Claim was not to take it over.
	Existed bool
	// Header is the header of the Claim transaction.
	Header *pb.ResponseHeader
}

// Claim is Join for a participant that may ask again under a new lease: it
// creates key (in the queue scope selects, attached to lease, holding
// val), or, when the key already exists and takeOver is set, attaches it
// to lease while keeping its create revision, that is its place in line.
// Without takeOver an existing key is left untouched. It reports where the
// key stands, all in one transaction.
func Claim(ctx context.Context, client *clientv3.Client, scope Scope, key, val string, lease clientv3.LeaseID, takeOver bool) (Place, error) {
	put := clientv3.OpPut(key, val, clientv3.WithLease(lease))
	reads := []clientv3.Op{
		clientv3.OpGet(key, clientv3.WithKeysOnly()),
		clientv3.OpGet(scope.Prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)),
	}
	existing := reads
	if takeOver {
		existing = append([]clientv3.Op{put}, reads...)
	}
	resp, err := client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(append([]clientv3.Op{put}, reads...)...).Else(existing...).Commit()
	if err != nil {
		return Place{}, err
	}
	n := len(resp.Responses)
	own := resp.Responses[n-2].GetResponseRange().Kvs
	if len(own) == 0 {
		return Place{}, errors.New("queue: claimed key missing from its own transaction")
	}
	p := Place{Rev: own[0].CreateRevision, Existed: !resp.Succeeded, Header: resp.Header}
	for _, kv := range resp.Responses[n-1].GetResponseRange().Kvs {
		if !scope.has(string(kv.Key)) {
			continue
		}
		if p.HeadKey == "" {
			p.HeadKey, p.HeadRev = string(kv.Key), kv.CreateRevision
		}
		if kv.CreateRevision < p.Rev {
			p.Ahead++
		}
	}
	return p, nil
}
