package etcdcompat

import (
	"context"
	"syscall"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/watch"
)

// BenchmarkWatchSend sends the events of puts to 1,000 watchers of one key
// on one gRPC stream, the shape of etcd's benchmark watch-latency, and
// reports the process's CPU time per event delivered (the server's share
// and the raw client's, which only decodes). The stream is not paced: each
// put's 1,000 responses are read before the next put, so pacing would only
// measure its rate.
func BenchmarkWatchSend(b *testing.B) {
	const watchers = 1000
	f := startWatchServiceWith(b, 1.5*1024*1024, watch.Options{StreamResponseRate: -1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := pb.NewWatchClient(f.conn).Watch(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for range watchers {
		req := &pb.WatchCreateRequest{Key: []byte("/bench/key/00000000000000000000")}
		if err := st.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: req}}); err != nil {
			b.Fatal(err)
		}
	}
	for range watchers {
		if _, err := st.Recv(); err != nil {
			b.Fatal(err)
		}
	}
	value := make([]byte, 256)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	received := 0
	for range b.N {
		f.write(map[string][]byte{"/bench/key/00000000000000000000": value})
		for want := received + watchers; received < want; {
			r, err := st.Recv()
			if err != nil {
				b.Fatal(err)
			}
			received += len(r.Events)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(received), "cpu-ns/event")
}

// processCPU is the CPU time the process used so far, in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
