package main

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Latencies are kept in microseconds in log-linear buckets: values below
// 64 have a bucket each, and every power of two above is split into 64
// equal buckets, so a bucket's width is under 1/64 (1.6%) of its values.
// For example 1000 µs (binary 1111101000) keeps its top 7 bits, 1111101,
// shifted by 3: bucket (3+1)*64 + 125 - 64 = 317, covering 1000-1007 µs.
const (
	subBucketBits  = 6
	subBuckets     = 1 << subBucketBits
	maxLatencyBits = 40 // 2^40 µs is 12 days; longer latencies are clamped
	bucketCount    = (maxLatencyBits-subBucketBits)*subBuckets + subBuckets
)

func bucketOf(us uint64) int {
	if us < subBuckets {
		return int(us)
	}
	us = min(us, 1<<maxLatencyBits-1)
	shift := bits.Len64(us) - subBucketBits - 1
	return (shift+1)*subBuckets + int(us>>shift) - subBuckets
}

// bucketUpper is the largest value that falls in bucket b.
func bucketUpper(b int) uint64 {
	if b < subBuckets {
		return uint64(b)
	}
	shift := b/subBuckets - 1
	mantissa := uint64(b%subBuckets + subBuckets)
	return (mantissa+1)<<shift - 1
}

// histogram counts latencies. Recording is safe from many goroutines;
// reading (merge) happens after the recorders have stopped.
type histogram struct {
	counts [bucketCount]atomic.Uint64
	total  atomic.Uint64
}

func (h *histogram) record(d time.Duration) {
	us := uint64(max(d, 0) / time.Microsecond)
	h.counts[bucketOf(us)].Add(1)
	h.total.Add(1)
}

// latencySummary is the plain (non-atomic) sum of several histograms,
// from which quantiles are read.
type latencySummary struct {
	counts [bucketCount]uint64
	total  uint64
}

func (s *latencySummary) add(h *histogram) {
	if h == nil {
		return
	}
	for i := range h.counts {
		s.counts[i] += h.counts[i].Load()
	}
	s.total += h.total.Load()
}

// quantile is the upper bound of the bucket holding the q-quantile
// (0 < q <= 1): never below the true value, at most 1.6% above it.
func (s *latencySummary) quantile(q float64) time.Duration {
	if s.total == 0 {
		return 0
	}
	rank := uint64(q*float64(s.total) + 0.999999)
	rank = max(1, min(rank, s.total))
	var seen uint64
	for b, n := range s.counts {
		seen += n
		if seen >= rank {
			return time.Duration(bucketUpper(b)) * time.Microsecond
		}
	}
	return time.Duration(bucketUpper(bucketCount-1)) * time.Microsecond
}

// timeline holds one histogram per second of a run, second i covering
// [origin + i s, origin + (i+1) s). Histograms are allocated on first use
// so that a long run costs memory only for the seconds it records.
type timeline struct {
	origin  time.Time
	seconds []atomic.Pointer[histogram]
	dropped atomic.Uint64 // samples outside the timeline's span
}

func newTimeline(origin time.Time, span time.Duration) *timeline {
	return &timeline{origin: origin, seconds: make([]atomic.Pointer[histogram], int(span/time.Second)+1)}
}

// record files a request that completed at end after taking d.
func (t *timeline) record(end time.Time, d time.Duration) {
	i := t.index(end)
	if i < 0 || i >= len(t.seconds) {
		t.dropped.Add(1)
		return
	}
	h := t.seconds[i].Load()
	if h == nil {
		fresh := new(histogram)
		if t.seconds[i].CompareAndSwap(nil, fresh) {
			h = fresh
		} else {
			h = t.seconds[i].Load()
		}
	}
	h.record(d)
}

// index is the second at is in; negative before the origin.
func (t *timeline) index(at time.Time) int {
	d := at.Sub(t.origin)
	if d < 0 {
		return int((d - time.Second + 1) / time.Second)
	}
	return int(d / time.Second)
}

// second returns second i's histogram, nil if nothing was recorded in it.
func (t *timeline) second(i int) *histogram {
	if i < 0 || i >= len(t.seconds) {
		return nil
	}
	return t.seconds[i].Load()
}
