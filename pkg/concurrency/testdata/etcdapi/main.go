// Command etcdapi is code written against etcd's concurrency package. It is
// never run: compat_test.go compiles it as written, then again with only
// the import path changed to MetaStore's package, and both must build. Each
// exported name is pinned to etcd's exact signature by assigning it to a
// variable of that type, and used the way applications use it.
package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Signatures, exactly as etcd 3.6 declares them.
var (
	_ func(*clientv3.Client, ...concurrency.SessionOption) (*concurrency.Session, error) = concurrency.NewSession
	_ func(int) concurrency.SessionOption                                                = concurrency.WithTTL
	_ func(clientv3.LeaseID) concurrency.SessionOption                                   = concurrency.WithLease
	_ func(context.Context) concurrency.SessionOption                                    = concurrency.WithContext

	_ func(*concurrency.Session) *clientv3.Client           = (*concurrency.Session).Client
	_ func(*concurrency.Session) clientv3.LeaseID           = (*concurrency.Session).Lease
	_ func(*concurrency.Session) context.Context            = (*concurrency.Session).Ctx
	_ func(*concurrency.Session) <-chan struct{}            = (*concurrency.Session).Done
	_ func(*concurrency.Session)                            = (*concurrency.Session).Orphan
	_ func(*concurrency.Session) error                      = (*concurrency.Session).Close
	_ func(*concurrency.Session, string) *concurrency.Mutex = concurrency.NewMutex
	_ func(*concurrency.Session, string) sync.Locker        = concurrency.NewLocker

	_ func(*concurrency.Mutex, context.Context) error = (*concurrency.Mutex).Lock
	_ func(*concurrency.Mutex, context.Context) error = (*concurrency.Mutex).TryLock
	_ func(*concurrency.Mutex, context.Context) error = (*concurrency.Mutex).Unlock
	_ func(*concurrency.Mutex) clientv3.Cmp           = (*concurrency.Mutex).IsOwner
	_ func(*concurrency.Mutex) string                 = (*concurrency.Mutex).Key
	_ func(*concurrency.Mutex) *pb.ResponseHeader     = (*concurrency.Mutex).Header

	_ func(*concurrency.Session, string) *concurrency.Election                = concurrency.NewElection
	_ func(*concurrency.Session, string, string, int64) *concurrency.Election = concurrency.ResumeElection

	_ func(*concurrency.Election, context.Context, string) error                  = (*concurrency.Election).Campaign
	_ func(*concurrency.Election, context.Context, string) error                  = (*concurrency.Election).Proclaim
	_ func(*concurrency.Election, context.Context) error                          = (*concurrency.Election).Resign
	_ func(*concurrency.Election, context.Context) (*clientv3.GetResponse, error) = (*concurrency.Election).Leader
	_ func(*concurrency.Election, context.Context) <-chan clientv3.GetResponse    = (*concurrency.Election).Observe
	_ func(*concurrency.Election) string                                          = (*concurrency.Election).Key
	_ func(*concurrency.Election) int64                                           = (*concurrency.Election).Rev
	_ func(*concurrency.Election) *pb.ResponseHeader                              = (*concurrency.Election).Header

	_ func(context.Context, *clientv3.Client, func(concurrency.STM) error) (*clientv3.TxnResponse, error) = concurrency.NewSTMRepeatable
	_ func(context.Context, *clientv3.Client, func(concurrency.STM) error) (*clientv3.TxnResponse, error) = concurrency.NewSTMSerializable
	_ func(context.Context, *clientv3.Client, func(concurrency.STM) error) (*clientv3.TxnResponse, error) = concurrency.NewSTMReadCommitted

	_ error = concurrency.ErrLocked
	_ error = concurrency.ErrSessionExpired
	_ error = concurrency.ErrLockReleased
	_ error = concurrency.ErrElectionNotLeader
	_ error = concurrency.ErrElectionNoLeader

	_ = []concurrency.Isolation{
		concurrency.SerializableSnapshot,
		concurrency.Serializable,
		concurrency.RepeatableReads,
		concurrency.ReadCommitted,
	}
)

// stmBody uses every STM method with etcd's signatures.
func stmBody(stm concurrency.STM) error {
	var (
		get func(...string) string                     = stm.Get
		put func(string, string, ...clientv3.OpOption) = stm.Put
		rev func(string) int64                         = stm.Rev
		del func(string)                               = stm.Del
	)
	n := get("counter", "other")
	put("counter", n+"1", clientv3.WithPrevKV())
	if rev("counter") < 0 {
		del("counter")
	}
	return nil
}

// app is what a typical etcd user writes.
func app(ctx context.Context, cli *clientv3.Client) error {
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(10), concurrency.WithContext(ctx))
	if err != nil {
		return err
	}
	defer s.Close()
	resumed, err := concurrency.NewSession(cli, concurrency.WithLease(s.Lease()))
	if err != nil {
		return err
	}
	resumed.Orphan()

	m := concurrency.NewMutex(s, "/app/lock")
	if err := m.TryLock(ctx); errors.Is(err, concurrency.ErrLocked) {
		if err := m.Lock(ctx); err != nil {
			return err
		}
	}
	if _, err := cli.Txn(ctx).If(m.IsOwner()).Then(clientv3.OpPut("/app/data", "x")).Commit(); err != nil {
		return err
	}
	fmt.Println(m.Key(), m.Header().Revision)
	if err := m.Unlock(ctx); err != nil {
		return err
	}
	l := concurrency.NewLocker(s, "/app/locker")
	l.Lock()
	l.Unlock()

	e := concurrency.NewElection(s, "/app/election")
	if err := e.Campaign(ctx, "me"); err != nil {
		return err
	}
	if err := e.Proclaim(ctx, "still me"); errors.Is(err, concurrency.ErrElectionNotLeader) {
		return err
	}
	leader, err := e.Leader(ctx)
	if errors.Is(err, concurrency.ErrElectionNoLeader) {
		return err
	}
	fmt.Println(string(leader.Kvs[0].Value), e.Key(), e.Rev(), e.Header())
	for resp := range e.Observe(ctx) {
		fmt.Println(string(resp.Kvs[0].Value))
		break
	}
	if err := e.Resign(ctx); err != nil {
		return err
	}
	resumedElection := concurrency.ResumeElection(s, "/app/election/", e.Key(), e.Rev())
	_ = resumedElection.Resign(ctx)

	select {
	case <-s.Done():
	case <-s.Ctx().Done():
	default:
	}
	fmt.Println(s.Client() == cli)

	iso := concurrency.WithIsolation(concurrency.RepeatableReads)
	if _, err := concurrency.NewSTM(cli, stmBody, iso, concurrency.WithAbortContext(ctx), concurrency.WithPrefetch("counter")); err != nil {
		return err
	}
	_, err = concurrency.NewSTM(cli, func(stm concurrency.STM) error { return stmBody(stm) })
	return err
}

func main() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}})
	if err != nil {
		panic(err)
	}
	defer cli.Close()
	if err := app(context.Background(), cli); err != nil {
		panic(err)
	}
}
