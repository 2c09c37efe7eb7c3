package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

func TestZZWatchProbe(t *testing.T) {
	s := startServer(t, clusterConfigProbe())
	ctx := testContext(t, 60*time.Second)
	wc := pb.NewWatchClient(s.cli.ActiveConnection())
	st, err := wc.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rc := make(chan *pb.WatchResponse, 100)
	go func() {
		for {
			r, err := st.Recv()
			if err != nil {
				close(rc)
				return
			}
			rc <- r
		}
	}()
	dump := func(label string, d time.Duration) {
		tm := time.After(d)
		for {
			select {
			case r := <-rc:
				fmt.Printf("%s: %v\n", label, r)
			case <-tm:
				return
			}
		}
	}
	for i := 0; i < 5; i++ {
		mustPut(ctx, t, s.cli, fmt.Sprintf("k%d", i), "v")
	} // revs 2..6
	s.cli.Delete(ctx, "k0") // 7
	s.cli.Compact(ctx, 5)
	send := func(r *pb.WatchRequest) {
		if err := st.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	cr := func(c *pb.WatchCreateRequest) *pb.WatchRequest {
		return &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: c}}
	}
	send(cr(&pb.WatchCreateRequest{Key: []byte("k"), RangeEnd: []byte("l"), StartRevision: 3}))
	dump("compacted", 500*time.Millisecond)
	send(cr(&pb.WatchCreateRequest{Key: []byte("k"), RangeEnd: []byte("l"), StartRevision: 5, WatchId: 7}))
	dump("atcompact", 500*time.Millisecond)
	send(cr(&pb.WatchCreateRequest{Key: []byte("k"), StartRevision: -1}))
	dump("negative", 300*time.Millisecond)
	send(cr(&pb.WatchCreateRequest{Key: []byte("k"), WatchId: 7}))
	dump("dup", 300*time.Millisecond)
	send(cr(&pb.WatchCreateRequest{Key: []byte("k"), RangeEnd: []byte("a")}))
	dump("emptyrange", 300*time.Millisecond)
	send(cr(&pb.WatchCreateRequest{Key: []byte("k"), WatchId: 0}))
	dump("dup0-compacted-id", 300*time.Millisecond)
	send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}})
	dump("progress-with-compacted", 300*time.Millisecond)
	send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: 0}}})
	dump("cancel-compacted", 300*time.Millisecond)
	send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: 99}}})
	dump("cancel-unknown", 300*time.Millisecond)
	send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}})
	dump("progress", 300*time.Millisecond)
	send(cr(&pb.WatchCreateRequest{Key: []byte("k"), RangeEnd: []byte("l"), StartRevision: 100}))
	dump("future", 300*time.Millisecond)
	send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}})
	dump("progress-future", 300*time.Millisecond)
	send(cr(&pb.WatchCreateRequest{Key: []byte("k"), RangeEnd: []byte("l"), StartRevision: 6, WatchId: -1}))
	dump("id-1", 300*time.Millisecond)
	send(cr(&pb.WatchCreateRequest{Key: []byte("k1"), WatchId: 42, Filters: []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT}, PrevKv: true}))
	dump("noput", 300*time.Millisecond)
	_, _ = s.cli.Txn(ctx).Then(clientv3OpPut("k1", "x"), clientv3OpPut("k2", "y")).Commit()
	dump("txn", 300*time.Millisecond)
	s.cli.Delete(ctx, "k1")
	dump("del", 300*time.Millisecond)
	send(cr(&pb.WatchCreateRequest{Key: []byte{}, RangeEnd: []byte{0}, StartRevision: 1, WatchId: 43}))
	dump("fromkey-empty-rev1", 300*time.Millisecond)
	_ = context.Background
}
