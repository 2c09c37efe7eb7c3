package watch

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// staticHistory is a History with nothing to replay, for benchmarks that
// only exercise the fan-out.
type staticHistory struct{}

func (staticHistory) Events(startRev, endRev int64, key, rangeEnd []byte, limit int) ([]mvccpb.Event, int64, error) {
	return nil, endRev, nil
}
func (staticHistory) Rev() int64        { return 1 }
func (staticHistory) CompactRev() int64 { return 0 }
func (staticHistory) PrevKV([]byte, int64) (*mvccpb.KeyValue, error) {
	return nil, nil
}

// BenchmarkPublishFanOut publishes one event per operation to 10,000
// watchers spread over 100 streams, each read by its own goroutine, and
// waits until every watcher received every event. "burst" publishes
// back to back (the fan-out merges what piles up); "one-by-one" waits for
// each event to reach every watcher before publishing the next.
func BenchmarkPublishFanOut(b *testing.B) {
	for _, mode := range []string{"burst", "one-by-one"} {
		b.Run(mode, func(b *testing.B) { benchmarkPublishFanOut(b, mode == "one-by-one") })
	}
}

func benchmarkPublishFanOut(b *testing.B, oneByOne bool) {
	for _, tc := range []struct {
		name string
		req  func(i int) *pb.WatchCreateRequest
	}{
		{"same-key", func(int) *pb.WatchCreateRequest { return &pb.WatchCreateRequest{Key: []byte("/registry/pods/zzzzz")} }},
		{"same-prefix", func(int) *pb.WatchCreateRequest {
			return &pb.WatchCreateRequest{Key: []byte("/registry/pods/"), RangeEnd: []byte("/registry/pods0")}
		}},
		{"distinct-prefixes", func(i int) *pb.WatchCreateRequest {
			// 10,000 nested/overlapping ranges, all containing the key.
			return &pb.WatchCreateRequest{Key: []byte(fmt.Sprintf("/registry/pods/%05d", i)), RangeEnd: []byte{0}}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			const watchers, streams = 10_000, 100
			h, err := NewHub(staticHistory{}, Options{ErrCompacted: errTestCompacted, StreamBufferBytes: 64 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			// Consumers count events and signal reached once the count
			// gets to target, so the benchmark waits without spinning.
			var received, target atomic.Int64
			reached := make(chan struct{}, 1)
			waitFor := func(n int64) {
				target.Store(n)
				for received.Load() < n {
					<-reached
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			ss := make([]*Stream, streams)
			for i := range ss {
				ss[i] = h.NewStream()
			}
			for i := range watchers {
				if _, err := ss[i%streams].Watch(tc.req(i)); err != nil {
					b.Fatal(err)
				}
			}
			for _, s := range ss {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var buf []Response
					for {
						var err error
						if buf, err = s.Next(ctx, buf[:0]); err != nil {
							return
						}
						n := 0
						for _, r := range buf {
							n += len(r.Events)
						}
						if received.Add(int64(n)) >= target.Load() {
							signal(reached)
						}
					}
				}()
			}
			kv := &mvccpb.KeyValue{Key: []byte("/registry/pods/zzzzz"), Value: make([]byte, 100)}
			b.ReportAllocs()
			target.Store(1 << 62)
			b.ResetTimer()
			cpu0 := processCPU()
			for i := range b.N {
				rev := int64(i) + 2
				c := *kv
				c.ModRevision, c.CreateRevision = rev, rev
				h.Publish(rev, []mvccpb.Event{{Type: mvccpb.PUT, Kv: &c}})
				if oneByOne {
					waitFor(int64(i+1) * watchers)
				}
			}
			want := int64(b.N) * watchers
			waitFor(want)
			b.StopTimer()
			// CPU time, not wall time: the machine may be shared.
			b.ReportMetric(float64(processCPU()-cpu0)/float64(want), "cpu-ns/delivery")
			cancel()
			wg.Wait()
		})
	}
}

// BenchmarkIdleWatcherMemory creates 100,000 watchers that never fire and
// reports the heap they hold per watcher.
func BenchmarkIdleWatcherMemory(b *testing.B) {
	for _, tc := range []struct {
		name string
		req  func(i int) *pb.WatchCreateRequest
	}{
		{"distinct-keys", func(i int) *pb.WatchCreateRequest {
			return &pb.WatchCreateRequest{Key: []byte(fmt.Sprintf("/registry/configmaps/ns-%06d/cm", i))}
		}},
		{"distinct-prefixes", func(i int) *pb.WatchCreateRequest {
			k := fmt.Sprintf("/registry/configmaps/ns-%06d/", i)
			return &pb.WatchCreateRequest{Key: []byte(k), RangeEnd: []byte(k[:len(k)-1] + "0")}
		}},
		{"shared-prefix", func(int) *pb.WatchCreateRequest {
			return &pb.WatchCreateRequest{Key: []byte("/registry/configmaps/"), RangeEnd: []byte("/registry/configmaps0")}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			const watchers, streams = 100_000, 1_000
			reqs := make([]*pb.WatchCreateRequest, watchers)
			for i := range reqs {
				reqs[i] = tc.req(i)
			}
			for range b.N {
				h, err := NewHub(staticHistory{}, Options{ErrCompacted: errTestCompacted})
				if err != nil {
					b.Fatal(err)
				}
				ss := make([]*Stream, streams)
				for i := range ss {
					ss[i] = h.NewStream()
				}
				before := heapInUse()
				for i, req := range reqs {
					if _, err := ss[i%streams].Watch(req); err != nil {
						b.Fatal(err)
					}
				}
				// The created responses are consumed, as a client would.
				drained, stop := context.WithCancel(context.Background())
				stop()
				for _, s := range ss {
					for {
						if _, err := s.Next(drained, nil); err != nil {
							break
						}
					}
				}
				after := heapInUse()
				b.ReportMetric(float64(after-before)/watchers, "bytes/watcher")
				runtime.KeepAlive(reqs)
				h.Close()
			}
		})
	}
}

// processCPU is the CPU time the process used so far, in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
