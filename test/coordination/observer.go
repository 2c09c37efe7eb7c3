package coordination

import (
	"context"
	"fmt"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/metastore-io/metastore/test/framework"
)

// observeSDKQueues follows the SDK locks' queues from outside the
// contenders, until ctx ends: every key that joins a queue (its value is
// the contender, lock.WithOwner) and leaves it is recorded in hist, so the
// checker can tell an SDK lock call waiting in line from one that is not
// in the queue at all. One watcher per member, each on a client bound to
// it, all from the revision it starts at: a key comes and goes when the
// first of them sees it, so a frozen or cut-off member's watcher, which
// lags, changes nothing.
func observeSDKQueues(ctx context.Context, clients []*clientv3.Client, hist *History) (done <-chan struct{}, err error) {
	var resp *clientv3.GetResponse
	for _, cli := range clients {
		if resp, err = cli.Get(ctx, sdkPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly()); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("observe the sdk queues: %w", err)
	}
	finished := make(chan struct{})
	var wg sync.WaitGroup
	for _, cli := range clients {
		wg.Go(func() {
			next := resp.Header.Revision + 1
			for ctx.Err() == nil {
				next = observeFrom(ctx, cli, hist, next)
				pause(ctx, retryPause)
			}
		})
	}
	go func() {
		wg.Wait()
		close(finished)
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

// newObserverClients are clients bound to one member each, for the
// observer.
func newObserverClients(c *framework.Cluster) ([]*clientv3.Client, error) {
	tlsCfg, err := c.TLS().ClientTLS()
	if err != nil {
		return nil, fmt.Errorf("observer client TLS: %w", err)
	}
	var clients []*clientv3.Client
	for _, m := range c.Members() {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.Endpoint()}, TLS: tlsCfg,
			DialTimeout: framework.DefaultDialTimeout, Logger: zap.NewNop()})
		if err != nil {
			closeAll(clients)
			return nil, fmt.Errorf("observer client for %s: %w", m.Name(), err)
		}
		clients = append(clients, cli)
	}
	return clients, nil
}

func closeAll(clients []*clientv3.Client) {
	for _, cli := range clients {
		cli.Close()
	}
}
