package coordination

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/metastore-io/metastore/test/framework"
)

// observeSDKQueues follows the SDK locks' queues from outside the
// contenders, until ctx ends: every key that joins a queue (its value is
// the contender, lock.WithOwner) and leaves it is recorded in hist, so the
// checker can tell an SDK lock call waiting in line from one that is not
// in the queue at all. It watches from the revision it starts at, through
// cli (every member, so a dead or frozen one is left for another).
func observeSDKQueues(ctx context.Context, cli *clientv3.Client, hist *History) (done <-chan struct{}, err error) {
	resp, err := cli.Get(ctx, sdkPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return nil, fmt.Errorf("observe the sdk queues: %w", err)
	}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		next := resp.Header.Revision + 1
		for ctx.Err() == nil {
			next = observeFrom(ctx, cli, hist, next)
			pause(ctx, retryPause)
		}
	}()
	return finished, nil
}

// observeFrom watches from revision next until the watch ends, and
// returns where to resume.
func observeFrom(ctx context.Context, cli *clientv3.Client, hist *History, next int64) int64 {
	watchCtx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range cli.Watch(watchCtx, sdkPrefix, clientv3.WithPrefix(), clientv3.WithRev(next)) {
		if wr.Err() != nil {
			return next
		}
		for _, ev := range wr.Events {
			key := string(ev.Kv.Key)
			switch {
			case ev.Type == clientv3.EventTypeDelete:
				hist.KeyDeleted(key)
			case ev.Kv.CreateRevision == ev.Kv.ModRevision:
				hist.KeyCreated(sdkResource(key), string(ev.Kv.Value), key)
			}
			next = ev.Kv.ModRevision + 1
		}
	}
	return next
}

// sdkResource names the lock of a queue key, prefix + name + "/" + lease.
func sdkResource(key string) string {
	name := strings.TrimPrefix(key, sdkPrefix)
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[:i]
	}
	return string(APISDK) + "/" + name
}

// observerKeepAlive finds a frozen member's watch stream dead so that the
// observer's client moves to another member.
const observerKeepAlive = 2 * time.Second

// newObserverClient is a client on every member of c for the observer.
func newObserverClient(c *framework.Cluster) (*clientv3.Client, error) {
	tlsCfg, err := c.TLS().ClientTLS()
	if err != nil {
		return nil, fmt.Errorf("observer client TLS: %w", err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), TLS: tlsCfg, DialTimeout: framework.DefaultDialTimeout,
		DialKeepAliveTime: observerKeepAlive, DialKeepAliveTimeout: observerKeepAlive, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("observer client: %w", err)
	}
	return cli, nil
}
