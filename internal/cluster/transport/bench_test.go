package transport

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/test/raftkit"
)

// countingRaft counts stepped messages and signals every 256.
type countingRaft struct {
	n      atomic.Int64
	notify chan struct{}
}

func (c *countingRaft) Step(context.Context, raftpb.Message) error {
	if c.n.Add(1)%256 == 0 {
		select {
		case c.notify <- struct{}{}:
		default:
		}
	}
	return nil
}
func (c *countingRaft) ReportUnreachable(uint64)                   {}
func (c *countingRaft) ReportSnapshot(uint64, raft.SnapshotStatus) {}

// BenchmarkStreamMessages measures messages per second over one stream:
// MsgApps with one entry, sent in batches of 64 as a leader's Ready would,
// with at most 2048 in flight so the queue never overflows.
func BenchmarkStreamMessages(b *testing.B) {
	for _, size := range []int{128, 4096} {
		b.Run(fmt.Sprintf("entry=%dB", size), func(b *testing.B) {
			sender := startMember(b, 1, 0xc1, nil)
			receiver := startMember(b, 2, 0xc1, func(c *Config) {
				c.Raft = &countingRaft{notify: make(chan struct{}, 1)}
			})
			counter := receiver.tr.attached().raft.(*countingRaft)
			connect(b, sender, receiver)

			const batch, window = 64, 2048
			msgs := make([]raftpb.Message, batch)
			data := make([]byte, size)
			for i := range msgs {
				msgs[i] = appMsg(1, 2, uint64(i), data)
			}
			deadline := time.NewTimer(raftkit.Timeout)
			defer deadline.Stop()
			wait := func(target int64) {
				for counter.n.Load() < target {
					select {
					case <-counter.notify:
					case <-time.After(time.Millisecond):
						// the last few messages may not cross a 256 mark
					case <-deadline.C:
						st, _ := sender.tr.PeerStatus(2)
						b.Fatalf("received %d of %d messages (%d dropped)", counter.n.Load(), target, st.Dropped)
					}
				}
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			sent := 0
			for sent < b.N {
				n := min(batch, b.N-sent)
				sender.tr.Send(msgs[:n])
				sent += n
				wait(int64(sent - window))
			}
			wait(int64(b.N))
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			if st, _ := sender.tr.PeerStatus(2); st.Dropped != 0 {
				b.Fatalf("%d messages dropped", st.Dropped)
			}
		})
	}
}
