package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// deletionCounter watches the leased keys' prefix from the revision after
// the last attach and counts delete events until every leased key is gone.
// A revoke deletes all of a lease's keys in one revision, so the events
// arrive in groups of keys-per-lease.
type deletionCounter struct {
	want int64

	// deletedSoFar mirrors deleted for progress reports while running.
	deletedSoFar atomic.Int64

	// Written by the watch goroutine, read after done is closed.
	deleted     int64
	first, last time.Time
	perSecond   []int64 // deletes received per second of the timeline
	err         error

	created chan struct{} // closed once the server confirms the watch
	done    chan struct{} // closed when want deletes arrived or the watch failed
}

// watchDeletions starts the watch; wait for created before relying on it.
// Seconds of perSecond are those of tl (only its origin is used).
func watchDeletions(ctx context.Context, cli *clientv3.Client, prefix string, fromRev, want int64, tl *timeline) *deletionCounter {
	c := &deletionCounter{want: want, created: make(chan struct{}), done: make(chan struct{})}
	wch := cli.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(fromRev),
		clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
	go c.run(wch, tl)
	return c
}

func (c *deletionCounter) run(wch clientv3.WatchChan, tl *timeline) {
	defer close(c.done)
	created := false
	for resp := range wch {
		if err := resp.Err(); err != nil {
			c.err = fmt.Errorf("watch on leased keys: %w", err)
			return
		}
		if resp.Created && !created {
			created = true
			close(c.created)
		}
		if len(resp.Events) == 0 {
			continue
		}
		now := time.Now()
		n := int64(0)
		for _, ev := range resp.Events {
			if ev.Type == mvccpb.DELETE {
				n++
			}
		}
		if n == 0 {
			continue
		}
		if c.deleted == 0 {
			c.first = now
		}
		c.deleted += n
		c.deletedSoFar.Store(c.deleted)
		c.last = now
		if i := tl.index(now); i >= 0 {
			for len(c.perSecond) <= i {
				c.perSecond = append(c.perSecond, 0)
			}
			c.perSecond[i] += n
		}
		if c.deleted >= c.want {
			return
		}
	}
	c.err = errors.New("watch on leased keys closed before every key was deleted")
}
