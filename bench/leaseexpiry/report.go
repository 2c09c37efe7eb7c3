package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// result is one run's figures, as written by run -json and read by table.
// Times are seconds; "after expiry" counts from the expiry instant, the
// earliest moment any lease could expire.
type result struct {
	Name         string  `json:"name"`
	Endpoint     string  `json:"endpoint"`
	Leases       int     `json:"leases"`
	KeysPerLease int     `json:"keys_per_lease"`
	TTL          int64   `json:"ttl_s"`
	PutClients   int     `json:"put_clients"`
	BoundSeconds float64 `json:"bound_s"`

	GrantSeconds  float64 `json:"grant_s"`
	AttachSeconds float64 `json:"attach_s"`
	// ExpirySpread is how far apart the earliest and latest possible
	// expiry of all leases are.
	ExpirySpread  float64 `json:"expiry_spread_s"`
	FirstDeleted  float64 `json:"first_deleted_s"`
	AllGone       float64 `json:"all_gone_s"` // -1: not within the bound
	DeletedKeys   int64   `json:"deleted_keys"`
	RemainingKeys int64   `json:"remaining_keys"`

	Baseline phaseStats `json:"baseline"`
	Expiry   phaseStats `json:"expiry"`
	After    phaseStats `json:"after"`
	// PutErrors counts failed puts of the load (all phases).
	PutErrors int64 `json:"put_errors"`
	// Seconds is the load second by second, Offset 0 being the second
	// that starts at the expiry instant.
	Seconds []secondStats `json:"seconds"`
}

// phaseStats summarises the put load over the whole seconds of a phase.
// On a shared machine single seconds are noisy, so besides the lowest one
// it gives the lowest 5-second mean and how many seconds fell below half
// the baseline's mean (compare with the baseline's own count).
type phaseStats struct {
	Seconds int     `json:"seconds"`
	Puts    uint64  `json:"puts"`
	MeanRPS float64 `json:"mean_rps"`
	MinRPS  float64 `json:"min_rps"`
	// Min5sRPS is the lowest mean of 5 consecutive seconds (of all of
	// them when the phase is shorter).
	Min5sRPS float64 `json:"min_5s_rps"`
	// BelowHalf counts the seconds under half the baseline's mean req/s.
	BelowHalf int     `json:"seconds_below_half_baseline"`
	P50ms     float64 `json:"p50_ms"`
	P99ms     float64 `json:"p99_ms"`
}

type secondStats struct {
	Offset      int     `json:"offset_s"`
	Puts        uint64  `json:"puts"`
	P99ms       float64 `json:"p99_ms"`
	DeletedKeys int64   `json:"deleted_keys"`
}

// phaseSeconds are the whole seconds of the timeline (indices) in each
// phase. base is the index of the second starting at the expiry instant;
// loadFrom (the end of warm-up), allGone and loadEnd are offsets from that
// instant (allGone is the bound when not every key went). Only whole
// seconds count: the baseline is the last baselineLen whole seconds
// before the instant that follow the warm-up; the expiry phase the whole
// seconds before the last delete (at least the first second); the after
// phase the whole seconds from then to the end of the load.
func phaseSeconds(base int, baselineLen, loadFrom, allGone, loadEnd time.Duration) (baseline, expiry, after [2]int) {
	ceilSec := func(d time.Duration) int { return int(math.Ceil(d.Seconds())) }
	floorSec := func(d time.Duration) int { return int(math.Floor(d.Seconds())) }
	baseline = [2]int{base + max(-floorSec(baselineLen), ceilSec(loadFrom)), base}
	expiry = [2]int{base, base + max(1, floorSec(allGone))}
	after = [2]int{base + max(1, ceilSec(allGone)), base + floorSec(loadEnd)}
	return baseline, expiry, after
}

// smoothingSeconds is the window of phaseStats.Min5sRPS.
const smoothingSeconds = 5

// summarise computes a phase's figures from seconds [span[0], span[1]) of
// tl; baselineRPS is the baseline's mean (0 while summarising the baseline
// itself, whose BelowHalf is then filled in by the caller's second call).
func summarise(tl *timeline, span [2]int, baselineRPS float64) phaseStats {
	var st phaseStats
	if span[1] <= span[0] {
		return st
	}
	var all latencySummary
	counts := make([]float64, 0, span[1]-span[0])
	for i := span[0]; i < span[1]; i++ {
		h := tl.second(i)
		var n uint64
		if h != nil {
			n = h.total.Load()
		}
		all.add(h)
		counts = append(counts, float64(n))
	}
	st.Seconds = len(counts)
	st.Puts = all.total
	st.MeanRPS = float64(all.total) / float64(st.Seconds)
	st.MinRPS = slices.Min(counts)
	window := min(smoothingSeconds, len(counts))
	var sum float64
	for i, n := range counts {
		sum += n
		if i >= window {
			sum -= counts[i-window]
		}
		if i == window-1 {
			st.Min5sRPS = sum / float64(window)
		} else if i >= window {
			st.Min5sRPS = min(st.Min5sRPS, sum/float64(window))
		}
	}
	for _, n := range counts {
		if n < baselineRPS/2 {
			st.BelowHalf++
		}
	}
	st.P50ms = millis(all.quantile(0.50))
	st.P99ms = millis(all.quantile(0.99))
	return st
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// perSecond lists seconds [from, to) of tl with the deletes seen in each.
func perSecond(tl *timeline, base, from, to int, deleted []int64) []secondStats {
	var out []secondStats
	for i := max(from, 0); i < to; i++ {
		s := secondStats{Offset: i - base}
		if h := tl.second(i); h != nil {
			var one latencySummary
			one.add(h)
			s.Puts = one.total
			s.P99ms = millis(one.quantile(0.99))
		}
		if i < len(deleted) {
			s.DeletedKeys = deleted[i]
		}
		out = append(out, s)
	}
	return out
}

// percentOf is part as a percentage of whole (0 when whole is 0).
func percentOf(part, whole float64) float64 {
	if whole == 0 {
		return 0
	}
	return 100 * part / whole
}

func (r *result) revokeRate() float64 {
	if r.AllGone < 0 || r.AllGone <= r.FirstDeleted || r.KeysPerLease == 0 {
		return 0
	}
	return float64(r.DeletedKeys) / float64(r.KeysPerLease) / (r.AllGone - r.FirstDeleted)
}

// tableRow is one line of the comparison: a label and its value per run.
type tableRow struct {
	label string
	value func(r *result) string
}

func f0(v float64) string { return fmt.Sprintf("%.0f", v) }
func f1(v float64) string { return fmt.Sprintf("%.1f", v) }
func f2(v float64) string { return fmt.Sprintf("%.2f", v) }

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

// comparisonRows are the table's lines, in order.
func comparisonRows() []tableRow {
	return []tableRow{
		{"leases x keys/lease", func(r *result) string { return fmt.Sprintf("%d x %d", r.Leases, r.KeysPerLease) }},
		{"grant all leases (s)", func(r *result) string { return f1(r.GrantSeconds) }},
		{"attach all keys (s)", func(r *result) string { return f1(r.AttachSeconds) }},
		{"expiry spread (s)", func(r *result) string { return f2(r.ExpirySpread) }},
		{"first key deleted (s after expiry)", func(r *result) string { return f2(r.FirstDeleted) }},
		{"all keys gone (s after expiry)", func(r *result) string {
			if r.AllGone < 0 {
				return fmt.Sprintf("> %.0f", r.BoundSeconds)
			}
			return f1(r.AllGone)
		}},
		{"revoke rate (leases/s)", func(r *result) string { return f0(r.revokeRate()) }},
		{"put clients", func(r *result) string { return fmt.Sprint(r.PutClients) }},
		{"baseline put req/s (mean)", func(r *result) string { return f0(r.Baseline.MeanRPS) }},
		{"baseline put req/s (min 5-s / 1-s)", func(r *result) string {
			return fmt.Sprintf("%.0f / %.0f", r.Baseline.Min5sRPS, r.Baseline.MinRPS)
		}},
		{"expiry put req/s (mean)", func(r *result) string {
			return fmt.Sprintf("%.0f (%.0f%%)", r.Expiry.MeanRPS, percentOf(r.Expiry.MeanRPS, r.Baseline.MeanRPS))
		}},
		{"expiry put req/s (min 5-s)", func(r *result) string {
			return fmt.Sprintf("%.0f (%.0f%%)", r.Expiry.Min5sRPS, percentOf(r.Expiry.Min5sRPS, r.Baseline.MeanRPS))
		}},
		{"expiry put req/s (min 1-s)", func(r *result) string {
			return fmt.Sprintf("%.0f (%.0f%%)", r.Expiry.MinRPS, percentOf(r.Expiry.MinRPS, r.Baseline.MeanRPS))
		}},
		{"seconds < 50% baseline (baseline, expiry)", func(r *result) string {
			return fmt.Sprintf("%d/%d, %d/%d", r.Baseline.BelowHalf, r.Baseline.Seconds, r.Expiry.BelowHalf, r.Expiry.Seconds)
		}},
		{"after put req/s (mean)", func(r *result) string { return f0(r.After.MeanRPS) }},
		{"put p99 baseline (ms)", func(r *result) string { return f2(r.Baseline.P99ms) }},
		{"put p99 expiry (ms)", func(r *result) string { return f2(r.Expiry.P99ms) }},
		{"put p99 after (ms)", func(r *result) string { return f2(r.After.P99ms) }},
		{"put errors", func(r *result) string { return fmt.Sprint(r.PutErrors) }},
		{"all keys gone within bound", func(r *result) string { return yesNo(r.AllGone >= 0 && r.RemainingKeys == 0) }},
		{"expiry mean >= 50% baseline", func(r *result) string { return yesNo(r.Expiry.MeanRPS >= r.Baseline.MeanRPS/2) }},
		{"expiry min 5-s >= 50% baseline", func(r *result) string { return yesNo(r.Expiry.Min5sRPS >= r.Baseline.MeanRPS/2) }},
		{"expiry min 1-s >= 50% baseline", func(r *result) string { return yesNo(r.Expiry.MinRPS >= r.Baseline.MeanRPS/2) }},
	}
}

// writeTable prints one column per result.
func writeTable(w io.Writer, results []*result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := []string{"metric"}
	for _, r := range results {
		header = append(header, r.Name)
	}
	fmt.Fprintln(tw, strings.Join(header, "\t")+"\t")
	for _, row := range comparisonRows() {
		cells := []string{row.label}
		for _, r := range results {
			cells = append(cells, row.value(r))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// writeSeries prints the per-second put rate and deletes around expiry.
func writeSeries(w io.Writer, r *result) {
	fmt.Fprintf(w, "%s, per second (offset 0 = expiry instant):\n", r.Name)
	fmt.Fprintln(w, "  offset  puts/s  p99_ms  keys_deleted")
	for _, s := range r.Seconds {
		fmt.Fprintf(w, "  %6d  %6d  %6.2f  %12d\n", s.Offset, s.Puts, s.P99ms, s.DeletedKeys)
	}
}

// decodeResult reads one run's JSON and checks it is usable for a table.
func decodeResult(data []byte) (*result, error) {
	var r result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decode result: %w", err)
	}
	if r.Name == "" {
		return nil, errors.New("decode result: no run name")
	}
	if r.Leases < 0 || r.KeysPerLease < 0 {
		return nil, fmt.Errorf("decode result %s: negative lease or key count", r.Name)
	}
	return &r, nil
}
