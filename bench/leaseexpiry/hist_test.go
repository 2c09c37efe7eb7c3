package main

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketsCoverValuesContiguously(t *testing.T) {
	// Every value maps to a bucket whose upper bound is at least the value,
	// within 1/64 of it, and buckets never go backwards.
	prev := -1
	for us := uint64(0); us < 1<<20; us++ {
		b := bucketOf(us)
		if b < prev || b > prev+1 {
			t.Fatalf("value %d: bucket %d after %d", us, b, prev)
		}
		prev = b
		up := bucketUpper(b)
		if up < us || float64(up-us) > float64(us)/subBuckets {
			t.Fatalf("value %d: bucket %d upper bound %d", us, b, up)
		}
	}
	if got := bucketOf(1 << 62); got != bucketCount-1 {
		t.Fatalf("huge value in bucket %d, want the last, %d", got, bucketCount-1)
	}
	if got := bucketOf(1000); got != 317 || bucketUpper(317) != 1007 {
		t.Fatalf("1000µs in bucket %d (upper %d), want 317 (upper 1007) as documented", got, bucketUpper(got))
	}
}

func TestQuantileMatchesSortedSample(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h histogram
	sample := make([]time.Duration, 10_000)
	for i := range sample {
		sample[i] = time.Duration(rng.ExpFloat64() * float64(3*time.Millisecond))
		h.record(sample[i])
	}
	slices.Sort(sample)
	var s latencySummary
	s.add(&h)
	for _, q := range []float64{0.5, 0.9, 0.99, 1} {
		exact := sample[int(q*float64(len(sample))+0.999999)-1].Truncate(time.Microsecond)
		got := s.quantile(q)
		if got < exact || float64(got-exact) > float64(exact)/subBuckets+float64(time.Microsecond) {
			t.Errorf("q%.2f: got %v, exact %v", q, got, exact)
		}
	}
	var empty latencySummary
	if empty.quantile(0.99) != 0 {
		t.Error("empty summary has a non-zero quantile")
	}
}

func TestTimelineFilesBySecond(t *testing.T) {
	origin := time.Unix(1000, 0)
	tl := newTimeline(origin, 3*time.Second)
	tl.record(origin.Add(10*time.Millisecond), time.Millisecond)
	tl.record(origin.Add(1999*time.Millisecond), time.Millisecond)
	tl.record(origin.Add(2*time.Second), time.Millisecond)
	tl.record(origin.Add(-time.Nanosecond), time.Millisecond)
	tl.record(origin.Add(10*time.Second), time.Millisecond)
	for i, want := range []uint64{1, 1, 1, 0} {
		var got uint64
		if h := tl.second(i); h != nil {
			got = h.total.Load()
		}
		if got != want {
			t.Errorf("second %d holds %d puts, want %d", i, got, want)
		}
	}
	if tl.dropped.Load() != 2 {
		t.Errorf("dropped %d samples outside the span, want 2", tl.dropped.Load())
	}
	if tl.index(origin.Add(-time.Nanosecond)) != -1 || tl.index(origin.Add(-time.Second)) != -1 || tl.index(origin.Add(-time.Second-1)) != -2 {
		t.Error("negative offsets do not round down to whole seconds")
	}
}
