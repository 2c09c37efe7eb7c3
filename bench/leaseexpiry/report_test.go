package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestAlignedTTLExpiresInTheSameSecond(t *testing.T) {
	expireAt := time.Unix(2000, 0)
	for _, before := range []time.Duration{29300 * time.Millisecond, 29900 * time.Millisecond, 30 * time.Second, 12*time.Second + 1} {
		sent := expireAt.Add(-before)
		ttl := alignedTTL(expireAt, sent)
		expires := sent.Add(time.Duration(ttl) * time.Second)
		if expires.Before(expireAt) || !expires.Before(expireAt.Add(time.Second)) {
			t.Errorf("sent %v before: TTL %d expires %v after the instant", before, ttl, expires.Sub(expireAt))
		}
	}
}

func TestLeasedKeysSortByLeaseThenKey(t *testing.T) {
	if got := leasedKey("p/", 42, 3); got != "p/0000042/03" {
		t.Fatalf("leasedKey = %q", got)
	}
	if !(leasedKey("p/", 9, 11) < leasedKey("p/", 10, 0)) {
		t.Fatal("keys of lease 9 do not sort before lease 10's")
	}
}

func TestParallelStopsAtFirstError(t *testing.T) {
	var done atomic.Int64
	boom := errors.New("boom")
	err := parallel(context.Background(), 1000, 8, func(_ context.Context, _, i int) error {
		if i == 10 {
			return boom
		}
		done.Add(1)
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	var all atomic.Int64
	if err := parallel(context.Background(), 1000, 8, func(context.Context, int, int) error { all.Add(1); return nil }); err != nil || all.Load() != 1000 {
		t.Fatalf("clean run: err %v, %d items done, want 1000", err, all.Load())
	}
}

func TestPhaseSecondsAreWholeSecondsAroundTheExpiry(t *testing.T) {
	// Warm-up over 20.4s before the instant, keys gone 100.6s after it,
	// load stopped at 105.9s; second 21 starts at the instant.
	baseline, expiry, after := phaseSeconds(21, 30*time.Second, -20400*time.Millisecond, 100600*time.Millisecond, 105900*time.Millisecond)
	if baseline != [2]int{1, 21} || expiry != [2]int{21, 121} || after != [2]int{122, 126} {
		t.Fatalf("phases %v %v %v", baseline, expiry, after)
	}
	// A baseline shorter than the load before the instant is its end.
	if baseline, _, _ = phaseSeconds(21, 5*time.Second, -20400*time.Millisecond, time.Second, 5*time.Second); baseline != [2]int{16, 21} {
		t.Fatalf("5s baseline: %v", baseline)
	}
	// Keys gone within the first second: the expiry phase is that second.
	_, expiry, after = phaseSeconds(5, 3*time.Second, -3*time.Second, 300*time.Millisecond, 3*time.Second)
	if expiry != [2]int{5, 6} || after != [2]int{6, 8} {
		t.Fatalf("sub-second expiry: %v %v", expiry, after)
	}
}

func TestSummariseCountsEmptySecondsAsZero(t *testing.T) {
	origin := time.Unix(1000, 0)
	tl := newTimeline(origin, 10*time.Second)
	for i, n := range []int{4, 0, 2} { // second 1 had no completed put at all
		for range n {
			tl.record(origin.Add(time.Duration(i)*time.Second+time.Millisecond), time.Duration(i+1)*time.Millisecond)
		}
	}
	st := summarise(tl, [2]int{0, 3}, 3)
	if st.Seconds != 3 || st.Puts != 6 || st.MeanRPS != 2 || st.MinRPS != 0 || st.Min5sRPS != 2 || st.BelowHalf != 1 {
		t.Fatalf("summary %+v", st)
	}
	if st.P99ms < 3 || st.P99ms > 3.1 {
		t.Fatalf("p99 %.3fms, want about 3ms", st.P99ms)
	}
	if (summarise(tl, [2]int{3, 3}, 3) != phaseStats{}) {
		t.Fatal("an empty phase has figures")
	}
}

func TestMinFiveSecondMeanSlides(t *testing.T) {
	origin := time.Unix(1000, 0)
	tl := newTimeline(origin, 10*time.Second)
	for i, n := range []int{10, 10, 10, 10, 10, 0, 10, 10, 10, 10} {
		for range n {
			tl.record(origin.Add(time.Duration(i)*time.Second), time.Millisecond)
		}
	}
	if st := summarise(tl, [2]int{0, 10}, 10); st.Min5sRPS != 8 || st.MinRPS != 0 || st.BelowHalf != 1 {
		t.Fatalf("summary %+v, want min 5-s mean 8", st)
	}
}

func sampleResult(name string) *result {
	return &result{
		Name: name, Leases: 100, KeysPerLease: 10, PutClients: 4, BoundSeconds: 600,
		AllGone: 2, FirstDeleted: 1, DeletedKeys: 1000,
		Baseline: phaseStats{Seconds: 5, MeanRPS: 1000},
		Expiry:   phaseStats{Seconds: 2, MeanRPS: 600, MinRPS: 400, Min5sRPS: 600},
	}
}

func TestTableVerdicts(t *testing.T) {
	var out bytes.Buffer
	if err := writeTable(&out, []*result{sampleResult("a"), sampleResult("b")}); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"revoke rate (leases/s)", "600 (60%)", "400 (40%)"} {
		if !strings.Contains(text, want) {
			t.Errorf("table lacks %q:\n%s", want, text)
		}
	}
	lines := strings.Split(text, "\n")
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "revoke rate") && !strings.HasSuffix(strings.TrimSpace(l), "100") {
			t.Errorf("revoke rate of 100 leases over 1s: %q", l)
		}
		if strings.Contains(l, "expiry min 1-s >= 50%") && !strings.Contains(l, "NO") {
			t.Errorf("40%% minimum not flagged: %q", l)
		}
	}
}

func TestDecodeResultRoundTrips(t *testing.T) {
	data, err := json.Marshal(sampleResult("metastore"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := decodeResult(data)
	if err != nil || r.Name != "metastore" || r.Expiry.MinRPS != 400 {
		t.Fatalf("decoded %+v, %v", r, err)
	}
	if _, err := decodeResult([]byte(`{"leases": 3}`)); err == nil {
		t.Fatal("a result without a name decoded")
	}
}

func FuzzDecodeResult(f *testing.F) {
	good, _ := json.Marshal(sampleResult("etcd"))
	f.Add(good)
	f.Add([]byte(`{"name":"x","leases":-1}`))
	f.Add([]byte(`{"name":"x","all_gone_s":-1,"seconds":[{"offset_s":-3}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := decodeResult(data)
		if err != nil {
			return
		}
		// Anything accepted can be tabulated.
		if err := writeTable(&bytes.Buffer{}, []*result{r}); err != nil {
			t.Fatal(err)
		}
		writeSeries(&bytes.Buffer{}, r)
	})
}
