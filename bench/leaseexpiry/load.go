package main

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// putLoad is the concurrent put load: a fixed number of workers, each
// putting in a closed loop, one request at a time, over its own small set
// of non-leased keys (overwriting them, so the key space stays bounded).
type putLoad struct {
	tl     *timeline
	puts   atomic.Int64
	errors atomic.Int64
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startPutLoad starts workers; each completed put is recorded in tl at the
// second it completed.
func startPutLoad(ctx context.Context, clients []*clientv3.Client, prefix string, workers, keysPerWorker int, value string, tl *timeline) *putLoad {
	ctx, cancel := context.WithCancel(ctx)
	p := &putLoad{tl: tl, cancel: cancel}
	for w := range workers {
		keys := make([]string, keysPerWorker)
		for i := range keys {
			keys[i] = prefix + strconv.Itoa(w) + "/" + strconv.Itoa(i)
		}
		cli := clients[w%len(clients)]
		p.wg.Go(func() { p.work(ctx, cli, keys, value) })
	}
	return p
}

func (p *putLoad) work(ctx context.Context, cli *clientv3.Client, keys []string, value string) {
	for n := 0; ; n++ {
		start := time.Now()
		_, err := cli.Put(ctx, keys[n%len(keys)], value)
		end := time.Now()
		if ctx.Err() != nil {
			return // the run is over; this put may have been cut short
		}
		if err != nil {
			p.errors.Add(1)
			continue
		}
		p.puts.Add(1)
		p.tl.record(end, end.Sub(start))
	}
}

// stop ends the load and waits for the workers.
func (p *putLoad) stop() {
	p.cancel()
	p.wg.Wait()
}
