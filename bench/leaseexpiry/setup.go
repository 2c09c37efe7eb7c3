package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// minAlignedTTL is the shortest TTL a grant may get. Granting is meant to
// finish well ahead of the expiry instant; a grant left with less than
// this means the run's TTL is too short for the server's grant rate.
const minAlignedTTL = 10

// grantedLease is one lease and the span its expiry lies in: the server
// starts the TTL when it applies the grant, somewhere between sending the
// request and receiving the answer.
type grantedLease struct {
	id               int64
	earliest, latest time.Time // send + TTL, receive + TTL
	ttl              int64
}

// alignedTTL is the whole number of seconds from sent to expireAt,
// rounded up: a lease granted at sent with this TTL expires at or after
// expireAt and less than a second (plus the grant's latency) later.
func alignedTTL(expireAt, sent time.Time) int64 {
	d := expireAt.Sub(sent)
	return int64((d + time.Second - 1) / time.Second)
}

// parallel runs work(i) for i in [0, n) on workers goroutines and returns
// the first error; after an error the remaining items are skipped.
func parallel(ctx context.Context, n, workers int, work func(ctx context.Context, worker, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var once sync.Once
	var firstErr error
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := work(ctx, w, i); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// grantAligned grants n leases whose expiries all fall in the same second,
// expireAt or at most a second (plus one grant's latency) after: each
// grant asks for the seconds left until expireAt, so early grants get
// longer TTLs than late ones.
func grantAligned(ctx context.Context, clients []*clientv3.Client, n, workers int, expireAt time.Time) ([]grantedLease, error) {
	leases := make([]grantedLease, n)
	err := parallel(ctx, n, workers, func(ctx context.Context, w, i int) error {
		sent := time.Now()
		ttl := alignedTTL(expireAt, sent)
		if ttl < minAlignedTTL {
			return fmt.Errorf("lease %d of %d would get a TTL of %d s: granting is too slow for the TTL, raise -ttl", i, n, ttl)
		}
		resp, err := clients[w%len(clients)].Grant(ctx, ttl)
		if err != nil {
			return fmt.Errorf("grant lease %d: %w", i, err)
		}
		received := time.Now()
		if resp.TTL != ttl {
			return fmt.Errorf("grant lease %d: asked for a TTL of %d s, server granted %d s", i, ttl, resp.TTL)
		}
		leases[i] = grantedLease{
			id:       int64(resp.ID),
			ttl:      ttl,
			earliest: sent.Add(time.Duration(ttl) * time.Second),
			latest:   received.Add(time.Duration(ttl) * time.Second),
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return leases, nil
}

// expiryWindow is the span every lease's expiry lies in.
func expiryWindow(leases []grantedLease) (first, last time.Time) {
	for i, l := range leases {
		if i == 0 || l.earliest.Before(first) {
			first = l.earliest
		}
		if i == 0 || l.latest.After(last) {
			last = l.latest
		}
	}
	return first, last
}

// leasedKey is key k of lease i under prefix, zero-padded so the keys sort
// by lease: prefix "p/" gives p/0000042/03 for lease 42, key 3.
func leasedKey(prefix string, i, k int) string {
	b := make([]byte, 0, len(prefix)+11)
	b = append(b, prefix...)
	b = appendPadded(b, i, 7)
	b = append(b, '/')
	b = appendPadded(b, k, 2)
	return string(b)
}

func appendPadded(b []byte, v, width int) []byte {
	s := strconv.Itoa(v)
	for range width - len(s) {
		b = append(b, '0')
	}
	return append(b, s...)
}

// maxTxnOps is how many puts one attach transaction carries: etcd's
// default limit of operations per transaction (--max-txn-ops).
const maxTxnOps = 128

// attachKeys puts keysPerLease keys on every lease and returns the highest
// revision the puts reached. A lease's keys go in one transaction (in
// chunks of maxTxnOps), which is how a client registering several keys
// under one lease would write them, and which makes attaching a million
// keys take a tenth of the requests.
func attachKeys(ctx context.Context, clients []*clientv3.Client, leases []grantedLease, prefix string, keysPerLease, workers int, value string) (int64, error) {
	chunks := (keysPerLease + maxTxnOps - 1) / maxTxnOps
	var maxRev atomic.Int64
	err := parallel(ctx, len(leases)*chunks, workers, func(ctx context.Context, w, j int) error {
		i, first := j/chunks, (j%chunks)*maxTxnOps
		lease := clientv3.WithLease(clientv3.LeaseID(leases[i].id))
		ops := make([]clientv3.Op, 0, min(maxTxnOps, keysPerLease-first))
		for k := first; k < first+cap(ops); k++ {
			ops = append(ops, clientv3.OpPut(leasedKey(prefix, i, k), value, lease))
		}
		resp, err := clients[w%len(clients)].Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("put keys %d-%d of lease %d: %w", first, first+len(ops)-1, i, err)
		}
		for rev := resp.Header.Revision; ; {
			cur := maxRev.Load()
			if rev <= cur || maxRev.CompareAndSwap(cur, rev) {
				break
			}
		}
		return nil
	})
	return maxRev.Load(), err
}
