package sdk

import (
	"context"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/pkg/concurrency"
	"github.com/metastore-io/metastore/pkg/concurrency/lock"
	coordlock "github.com/metastore-io/metastore/pkg/coord/lock"
	"github.com/metastore-io/metastore/pkg/dlock"
)

// releaseTimeout bounds a contender's release at the end of a scenario.
const releaseTimeout = 5 * time.Second

// lockAPI is one SDK lock API as the holder-loss scenarios drive it.
type lockAPI struct {
	name string
	// hold takes the lock named by pfx on cli; lost is closed once every
	// signal the API gives the holder that it must assume it lost the
	// lock has fired (its notification and its critical-section context).
	hold func(ctx context.Context, cli *clientv3.Client, pfx string) (lost <-chan struct{}, release func(), err error)
	// wait takes the lock, waiting behind the holder.
	wait func(ctx context.Context, cli *clientv3.Client, pfx string) (release func(), err error)
	// queue is the key prefix of the lock's waiting queue.
	queue func(pfx string) string
}

func lockAPIs() []lockAPI {
	return []lockAPI{
		{name: "concurrency", hold: holdMutex, wait: waitMutex, queue: func(p string) string { return p + "/" }},
		{name: "lock", hold: holdFenced, wait: waitFenced, queue: jobQueue},
		{name: "dlock", hold: holdDLock, wait: waitDLock, queue: jobQueue},
		{name: "coord", hold: holdCoord, wait: waitCoord, queue: jobQueue},
	}
}

// jobQueue is the queue of lock "job" under the prefix pfx + "/".
func jobQueue(pfx string) string { return pfx + "/job/" }

func releaseContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), releaseTimeout)
}

// pkg/concurrency: the session's Done and Ctx.
func holdMutex(ctx context.Context, cli *clientv3.Client, pfx string) (<-chan struct{}, func(), error) {
	release, s, err := lockMutex(ctx, cli, pfx)
	if err != nil {
		return nil, nil, err
	}
	return allClosed(s.Done(), s.Ctx().Done()), release, nil
}

func waitMutex(ctx context.Context, cli *clientv3.Client, pfx string) (func(), error) {
	release, _, err := lockMutex(ctx, cli, pfx)
	return release, err
}

func lockMutex(ctx context.Context, cli *clientv3.Client, pfx string) (func(), *concurrency.Session, error) {
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(lossTTL))
	if err != nil {
		return nil, nil, err
	}
	m := concurrency.NewMutex(s, pfx)
	if err := m.Lock(ctx); err != nil {
		s.Orphan()
		return nil, nil, err
	}
	return func() {
		rctx, cancel := releaseContext()
		defer cancel()
		_ = m.Unlock(rctx)
		_ = s.Close()
	}, s, nil
}

// pkg/concurrency/lock: Lost and Context.
func holdFenced(ctx context.Context, cli *clientv3.Client, pfx string) (<-chan struct{}, func(), error) {
	release, h, err := lockFenced(ctx, cli, pfx)
	if err != nil {
		return nil, nil, err
	}
	return allClosed(h.Lost(), h.Context().Done()), release, nil
}

func waitFenced(ctx context.Context, cli *clientv3.Client, pfx string) (func(), error) {
	release, _, err := lockFenced(ctx, cli, pfx)
	return release, err
}

func lockFenced(ctx context.Context, cli *clientv3.Client, pfx string) (func(), *lock.Lock, error) {
	l, err := lock.NewLocker(lock.Config{Client: cli, Prefix: pfx + "/"})
	if err != nil {
		return nil, nil, err
	}
	h, err := l.Lock(ctx, "job", lock.WithTTL(lossTTL*time.Second))
	if err != nil {
		return nil, nil, err
	}
	return func() {
		rctx, cancel := releaseContext()
		defer cancel()
		_ = h.Unlock(rctx)
	}, h, nil
}

// pkg/dlock: the watchdog's "ownership lost" report and HoldContext.
func holdDLock(ctx context.Context, cli *clientv3.Client, pfx string) (<-chan struct{}, func(), error) {
	signal := &messageSignal{msg: "ownership lost", c: make(chan struct{})}
	release, l, err := lockDLock(ctx, cli, pfx, slog.New(signal))
	if err != nil {
		return nil, nil, err
	}
	held, err := dlock.HoldContext(l, "job")
	if err != nil {
		release()
		return nil, nil, err
	}
	return allClosed(signal.c, held.Done()), release, nil
}

func waitDLock(ctx context.Context, cli *clientv3.Client, pfx string) (func(), error) {
	release, _, err := lockDLock(ctx, cli, pfx, nil)
	return release, err
}

func lockDLock(ctx context.Context, cli *clientv3.Client, pfx string, log *slog.Logger) (func(), dlock.Locker, error) {
	l, err := dlock.New(&dlock.Config{Prefix: pfx + "/"}, dlock.WithEtcdConnector(dlock.ClientConnector(cli)), dlock.WithLogger(log))
	if err != nil {
		return nil, nil, err
	}
	if err := l.Lock(ctx, "job", dlock.WithTTL(lossTTL*time.Second)); err != nil {
		return nil, nil, err
	}
	return func() { _ = l.Close() }, l, nil
}

// messageSignal is a slog handler closing c at the first record with
// message msg.
type messageSignal struct {
	msg  string
	once sync.Once
	c    chan struct{}
}

func (h *messageSignal) Enabled(context.Context, slog.Level) bool { return true }
func (h *messageSignal) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *messageSignal) WithGroup(string) slog.Handler            { return h }

func (h *messageSignal) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.c) })
	}
	return nil
}

// pkg/coord/lock: IsExpired (polled) and Holder.Context.
func holdCoord(ctx context.Context, cli *clientv3.Client, pfx string) (<-chan struct{}, func(), error) {
	release, l, err := lockCoord(ctx, cli, pfx)
	if err != nil {
		return nil, nil, err
	}
	lost := make(chan struct{})
	go func() {
		for ctx.Err() == nil {
			// IsExpired may ask the (frozen) member; poll with short calls.
			cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			expired, _ := l.IsExpired(cctx)
			cancel()
			if expired {
				close(lost)
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond): // the poll's pace
			}
		}
	}()
	return allClosed(lost, l.(coordlock.Holder).Context().Done()), release, nil
}

func waitCoord(ctx context.Context, cli *clientv3.Client, pfx string) (func(), error) {
	release, _, err := lockCoord(ctx, cli, pfx)
	return release, err
}

func lockCoord(ctx context.Context, cli *clientv3.Client, pfx string) (func(), coordlock.Lock, error) {
	l, err := coordlock.NewFactory(cli, pfx+"/", nil, nil).Acquire(ctx, "job", lossTTL*time.Second)
	if err != nil {
		return nil, nil, err
	}
	return func() {
		rctx, cancel := releaseContext()
		defer cancel()
		_ = l.Unlock(rctx)
	}, l, nil
}

// allClosed is closed once every one of cs is.
func allClosed(cs ...<-chan struct{}) <-chan struct{} {
	all := make(chan struct{})
	go func() {
		for _, c := range cs {
			<-c
		}
		close(all)
	}()
	return all
}
