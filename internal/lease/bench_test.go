package lease

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"
)

// nopAux discards persisted records: the benchmarks measure the lessor.
type nopAux struct{}

func (nopAux) PutAux(byte, []byte, []byte) {}
func (nopAux) DeleteAux(byte, []byte)      {}

// BenchmarkApplyGrant is the apply cost of one LeaseGrant on a primary
// (table insert, heap insert, record encoding).
func BenchmarkApplyGrant(b *testing.B) {
	l, err := New(Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	l.Promote(0)
	b.ReportAllocs()
	for i := range b.N {
		if _, err := l.ApplyGrant(nopAux{}, int64(i+1), 60); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenew is keep-alive throughput on the primary: concurrent
// renewals of random leases among 100,000, on the system clock.
func BenchmarkRenew(b *testing.B) {
	l, err := New(Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	const leases = 100_000
	for id := int64(1); id <= leases; id++ {
		if _, err := l.ApplyGrant(nopAux{}, id, 60); err != nil {
			b.Fatal(err)
		}
	}
	l.Promote(0)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(rand.Uint64(), 0))
		ctx := context.Background()
		for pb.Next() {
			if _, err := l.Renew(ctx, rng.Int64N(leases)+1); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// benchmarkExpire measures the time from 100,000 leases expiring at once
// until all their revokes are proposed (the proposer only records them).
// The fake clock jumps from one wake-up of the expiry loop to the next, so
// with the default rate the figure is the lessor's own cost of the 100
// simulated seconds etcd's rate limit spreads the revokes over
// (simulated-s/op).
func benchmarkExpire(b *testing.B, rate int) {
	const leases = 100_000
	for range b.N {
		b.StopTimer()
		p := newFakeProposer()
		l, clock, _ := newTestLessor(b, Config{Proposer: p, RevokeRate: rate, ExpiredRetryInterval: time.Hour})
		l.Promote(0)
		for id := int64(1); id <= leases; id++ {
			mustGrant(b, l, nopAux{}, id, 5)
		}
		if err := l.Start(); err != nil {
			b.Fatal(err)
		}
		start := clock.Now()
		clock.waitTimer(b, start.Add(5*time.Second))
		b.StartTimer()

		// Time moves on only once the revokes handed out so far are
		// proposed: the proposer here is instant, so a window of real time
		// would have been enough for them.
		handed := func() bool { return l.queued.Load() >= leases }
		for !handed() {
			p.waitFor(b, "handed revokes", func(p *fakeProposer) bool { return int64(len(p.revokes)) >= l.queued.Load() })
			clock.advanceToNextTimer(b, handed)
		}
		p.waitFor(b, "all revokes", func(p *fakeProposer) bool { return len(p.revokes) == leases })

		b.StopTimer()
		b.ReportMetric(clock.Now().Sub(start.Add(5*time.Second)).Seconds(), "simulated-s/op")
		l.Stop()
	}
}

func BenchmarkExpire100kRateLimited(b *testing.B) { benchmarkExpire(b, 0) }
func BenchmarkExpire100kUnlimited(b *testing.B)   { benchmarkExpire(b, 1<<30) }
