package watch

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// BenchmarkPublishLatency measures, inside the hub, how long an event
// takes from the start of Publish to the return of Next in the stream's
// reader goroutine (where the gRPC layer would encode and send it): the
// hub's share of etcd's watch-latency benchmark, without the network, the
// client or gRPC. Every watcher watches one key, as the benchmark's do.
// As the apply goroutine answers the put's proposer right after Publish,
// the publisher then wakes a goroutine standing for the proposer, which
// notes the time of the answer; as the benchmark tool does, an event is
// also timed from that answer, counting 0 when it came first ("answer-"
// figures): the race between the event and the put's answer.
//
//   - idle: each event is published once every watcher received the
//     previous one, so nothing is queued when it comes: the cost of the
//     hand-offs alone.
//   - 100/s: events published every 10 ms whatever was received, as the
//     benchmark tool puts (run with -benchtime=Nx for N events).
//
// It reports the median and 99th percentile over every (event, watcher).
// The readers do nothing but count, so a stream is never held back by its
// client; figures move with the machine's load, compare runs made side by
// side.
func BenchmarkPublishLatency(b *testing.B) {
	for _, shape := range []struct{ streams, perStream int }{{10, 10}, {10, 1000}} {
		for _, mode := range []string{"idle", "100/s"} {
			name := fmt.Sprintf("watchers=%d/%s", shape.streams*shape.perStream, mode)
			b.Run(name, func(b *testing.B) {
				benchmarkPublishLatency(b, shape.streams, shape.perStream, mode == "idle")
			})
		}
	}
}

func benchmarkPublishLatency(b *testing.B, streams, perStream int, idle bool) {
	h, err := NewHub(staticHistory{}, Options{ErrCompacted: errTestCompacted})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	const firstRev = 2
	// published[i] and answered[i]: when the event of revision firstRev+i
	// was published, and when its proposer heard of it.
	published := make([]atomic.Int64, b.N)
	answered := make([]atomic.Int64, b.N)
	answers := make(chan int, 1)
	go func() {
		for i := range answers {
			answered[i].Store(time.Now().UnixNano())
		}
	}()
	defer close(answers)
	watchers := int64(streams * perStream)
	var received atomic.Int64
	reached := make(chan struct{}, 1)
	var target atomic.Int64
	target.Store(1 << 62)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// lat and afterAnswer are each reader's samples.
	lat := make([][]time.Duration, streams)
	afterAnswer := make([][]time.Duration, streams)
	for i := range streams {
		s := h.NewStream()
		for range perStream {
			if _, err := s.Watch(&pb.WatchCreateRequest{Key: []byte("key")}); err != nil {
				b.Fatal(err)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []Response
			for {
				var err error
				if buf, err = s.Next(ctx, buf[:0]); err != nil {
					return
				}
				now := time.Now().UnixNano()
				n := 0
				for _, r := range buf {
					for _, ev := range r.Events {
						j := ev.Kv.ModRevision - firstRev
						lat[i] = append(lat[i], time.Duration(now-published[j].Load()))
						var d time.Duration // the event came before the answer: 0
						if a := answered[j].Load(); a != 0 && now > a {
							d = time.Duration(now - a)
						}
						afterAnswer[i] = append(afterAnswer[i], d)
					}
					n += len(r.Events)
				}
				if received.Add(int64(n)) >= target.Load() {
					signal(reached)
				}
			}
		}()
	}
	waitFor := func(n int64) {
		target.Store(n)
		for received.Load() < n {
			<-reached
		}
	}
	kv := &mvccpb.KeyValue{Key: []byte("key"), Value: make([]byte, 256)}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	b.ResetTimer()
	for i := range b.N {
		if !idle {
			<-tick.C
		}
		rev := int64(firstRev + i)
		c := *kv
		c.ModRevision, c.CreateRevision = rev, rev
		published[i].Store(time.Now().UnixNano())
		h.Publish(rev, []mvccpb.Event{{Type: mvccpb.PUT, Kv: &c}})
		answers <- i
		if idle {
			waitFor(int64(i+1) * watchers)
		}
	}
	waitFor(int64(b.N) * watchers)
	b.StopTimer()
	cancel()
	wg.Wait()
	for _, m := range []struct {
		name    string
		samples [][]time.Duration
	}{{"", lat}, {"answer-", afterAnswer}} {
		all := slices.Concat(m.samples...)
		slices.Sort(all)
		b.ReportMetric(float64(all[len(all)/2].Microseconds()), m.name+"p50-µs")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), m.name+"p99-µs")
	}
}
