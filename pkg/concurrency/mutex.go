package concurrency

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/pkg/concurrency/queue"
)

// The errors Mutex reports; the texts are etcd's.
var (
	// ErrLocked is returned by TryLock when another session holds the mutex.
	ErrLocked = errors.New("mutex: Locked by another session")
	// ErrSessionExpired is returned by Lock when the session's key vanished
	// while it was waiting (the lease expired or was revoked), and by Lock
	// and TryLock when the session had expired by the time the mutex was
	// acquired (its holder deadline passed: see the package documentation).
	ErrSessionExpired = errors.New("mutex: session is expired")
	// ErrLockReleased is returned by Unlock when the mutex is not held.
	ErrLockReleased = errors.New("mutex: lock has already been released")
)

// releasedKey marks a mutex whose key was deleted by Unlock or a failed
// TryLock, as etcd's does; Key returns it until the next acquisition.
const releasedKey = "\x00"

// Mutex is a distributed lock: the session whose key under the prefix is
// oldest holds it (see the package documentation for the layout). A Mutex
// value is used by one goroutine at a time.
type Mutex struct {
	s      *Session
	prefix string
	key    string // this session's key under prefix, once tried
	rev    int64  // create revision of key; -1 when not held or queued
	hdr    *pb.ResponseHeader
}

// NewMutex returns a mutex named by pfx for session s. Nothing is written
// until Lock or TryLock.
func NewMutex(s *Session, pfx string) *Mutex {
	return &Mutex{s: s, prefix: pfx + "/", rev: -1}
}

// TryLock takes the mutex if nobody else holds it, and otherwise removes
// its own queue entry again and returns ErrLocked without waiting. ctx
// bounds the RPCs.
func (m *Mutex) TryLock(ctx context.Context) error {
	pos, err := m.join(ctx)
	if err != nil {
		return err
	}
	if pos.Head {
		m.hdr = pos.Header
		return m.checkSession()
	}
	if _, err := m.s.Client().Delete(ctx, m.key); err != nil {
		return err
	}
	m.key, m.rev = releasedKey, -1
	return ErrLocked
}

// Lock takes the mutex, waiting behind earlier sessions in FIFO order. If
// ctx ends while waiting, the session's queue entry is deleted before Lock
// returns ctx's error. ErrSessionExpired means the session's key was lost
// while waiting.
func (m *Mutex) Lock(ctx context.Context) error {
	pos, err := m.join(ctx)
	if err != nil {
		return err
	}
	if pos.Head {
		m.hdr = pos.Header
		return m.checkSession()
	}
	client := m.s.Client()
	// The cleanup runs on the client's context: ctx may be the very thing
	// that ended the wait.
	if err := queue.Await(ctx, client, m.prefix, m.rev); err != nil {
		_ = m.Unlock(client.Ctx())
		return err
	}
	// Everyone ahead is gone; the key must still be there, or the lease
	// expired while waiting and the server deleted it.
	own, err := client.Get(ctx, m.key)
	if err != nil {
		_ = m.Unlock(client.Ctx())
		return err
	}
	if len(own.Kvs) == 0 {
		return ErrSessionExpired
	}
	m.hdr = own.Header
	return m.checkSession()
}

// checkSession is the last step of an acquisition: a session that has
// expired (its holder deadline passed, or the server said its lease is
// gone) can no longer vouch for its lease, so the mutex it just got is
// given back (its key deleted on the client's context) and the caller
// gets ErrSessionExpired. etcd's Lock would return success here, its
// session ending only once the lease has expired. An orphaned or closed
// session is not expired: etcd's own v3lock service locks through a
// session it orphaned first, the lease being its caller's to renew.
func (m *Mutex) checkSession() error {
	if !m.s.expired() {
		return nil
	}
	_ = m.Unlock(m.s.Client().Ctx())
	return ErrSessionExpired
}

// join puts the session in the mutex's queue (or finds it already there)
// and records its key and create revision. If ctx ends while the put is
// under way, the put may have been applied without the answer reaching
// us: join then takes back whatever this session's key is, as
// Election.Campaign does (beyond etcd, whose abandoned waiter lingers
// until its lease expires; the SDK test saw the key still there after
// Lock returned context.Canceled).
func (m *Mutex) join(ctx context.Context) (queue.Position, error) {
	lease := m.s.Lease()
	m.key = fmt.Sprintf("%s%x", m.prefix, lease)
	client := m.s.Client()
	pos, err := queue.Join(ctx, client, m.prefix, m.key, "", lease)
	if err != nil {
		if ctx.Err() != nil {
			_, _ = client.Txn(client.Ctx()).
				If(clientv3.Compare(clientv3.LeaseValue(m.key), "=", lease)).
				Then(clientv3.OpDelete(m.key)).
				Commit()
		}
		return pos, err
	}
	m.rev = pos.Rev
	return pos, nil
}

// Unlock deletes the session's key, releasing the mutex (or leaving the
// queue). It deletes without checking ownership, as etcd's does; the
// fencing-aware lock in pkg/concurrency/lock checks.
func (m *Mutex) Unlock(ctx context.Context) error {
	if m.key == "" || m.key == releasedKey || m.rev <= 0 {
		return ErrLockReleased
	}
	if !strings.HasPrefix(m.key, m.prefix) {
		return fmt.Errorf("invalid key %q, it should have prefix %q", m.key, m.prefix)
	}
	if _, err := m.s.Client().Delete(ctx, m.key); err != nil {
		return err
	}
	m.key, m.rev = releasedKey, -1
	return nil
}

// IsOwner is a comparison that holds while this mutex is held: put it in a
// Txn's If to make writes conditional on still owning the lock.
func (m *Mutex) IsOwner() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(m.key), "=", m.rev)
}

// Key is the session's key under the prefix.
func (m *Mutex) Key() string { return m.key }

// Header is the response header of the request that acquired the mutex.
func (m *Mutex) Header() *pb.ResponseHeader { return m.hdr }

// lockerMutex adapts Mutex to sync.Locker, which has no way to return an
// error: failures panic, as etcd's does.
type lockerMutex struct{ m *Mutex }

func (l lockerMutex) Lock() {
	if err := l.m.Lock(l.m.s.Client().Ctx()); err != nil {
		panic(err)
	}
}

func (l lockerMutex) Unlock() {
	if err := l.m.Unlock(l.m.s.Client().Ctx()); err != nil {
		panic(err)
	}
}

// NewLocker returns a sync.Locker backed by a Mutex. Lock and Unlock use
// the client's context and panic on error.
func NewLocker(s *Session, pfx string) sync.Locker {
	return lockerMutex{m: NewMutex(s, pfx)}
}
