package main

import (
	"bytes"
	"strings"
	"testing"
)

// A results file as table.sh assembles it: two rounds of one config, a
// param line, and a footprint run where etcd stopped early.
const sample = "1 member, memory\t1\tmetastore\tput\trps\t300\n" +
	"1 member, memory\t1\tetcd\tput\trps\t100\n" +
	"1 member, memory\t2\tetcd\tput\trps\t200\n" +
	"1 member, memory\t2\tmetastore\tput\trps\t100\n" +
	"1 member, memory\t3\tmetastore\tput\trps\t200\n" +
	"1 member, memory\t3\tetcd\tput\trps\t150\n" +
	"1 member, memory\t1\tmetastore\tput\tp99_ms\t2\n" +
	"1 member, memory\t1\tetcd\tput\tp99_ms\t4\n" +
	"1 member, memory\t1\tmetastore\tput\tcpu_us\t30\n" +
	"1 member, memory\t1\tetcd\tput\tcpu_us\t60\n" +
	"1 member, memory\t1\tmetastore\tput\tpeak_rss_mib\t90\n" +
	"1 member, memory\t1\tetcd\tput\tpeak_rss_mib\t60\n" +
	"1 member, memory\t1\tmetastore\twatch-latency\tp99_ms\t0.3\n" +
	"1 member, memory\t1\tetcd\twatch-latency\tp99_ms\t0.2\n" +
	"1 member, memory\t1\tmetastore\twatch-latency\tavg_ms\t0.19\n" +
	"1 member, memory\t1\tetcd\twatch-latency\tavg_ms\t0.1\n" +
	"1 member, memory\t1\tmetastore\twatch-latency\trps\t1000\n" +
	"1 member, memory\t0\t-\tparam\tclients\t1000\n" +
	"1 member, memory\t0\t-\tparam\twatchers\t100\n" +
	"footprint\t1\trocksdb\t-\tdisk_mib\t50\n" +
	"footprint\t1\tetcd\t-\tdisk_mib\t200\n" +
	"footprint\t1\tetcd\t-\tstopped_at_keys\t1234\n"

func TestMedianOfRounds(t *testing.T) {
	rs, err := parse(strings.NewReader(sample), true)
	if err != nil {
		t.Fatal(err)
	}
	// metastore 300, 100, 200 -> 200; etcd 100, 200, 150 -> 150.
	r, ok := rs.ratio("1 member, memory", "metastore", "put", "rps")
	if !ok || r != 200.0/150.0 {
		t.Fatalf("put req/s ratio = %v, %v; want %v", r, ok, 200.0/150.0)
	}
	rs.values[key{"c", "t", "w", "m"}] = []float64{4, 1, 3, 2}
	if m, _ := rs.median(key{"c", "t", "w", "m"}); m != 2.5 {
		t.Fatalf("median of an even count = %v, want 2.5", m)
	}
	if targets := rs.targets["1 member, memory"]; len(targets) != 2 {
		t.Fatalf("targets = %v, want metastore and etcd only (not the param lines')", targets)
	}
}

func TestSummary(t *testing.T) {
	rs, err := parse(strings.NewReader(sample), true)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	writeSummary(&out, rs)
	got := out.String()
	for _, want := range []string{
		"| workload | 1 member, memory |",
		"| put, 1000 clients | 1.33× · 0.50× · 0.50× |",
		"| watch-latency, 100 watchers: event p99 (avg) · CPU | 1.50× (0.19 vs 0.10 ms) · – |",
		"| peak RSS during the run (per-workload range) | 1.50–1.50× (max 90 vs 60 MiB) |",
		"| data dir at the stop (MiB) | 50.0 | 200 | 0.25× |",
		"etcd 3.6 stopped after 1234 puts",
		"1 member, memory, medians (clients=1000, watchers=100):",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "put, 1 client |") {
		t.Errorf("summary has a row for a workload that was not run:\n%s", got)
	}
}

func TestParseRejectsMalformedLines(t *testing.T) {
	for _, in := range []string{"1\tmetastore\tput\trps\n", "1\tmetastore\tput\trps\tfast\n"} {
		if _, err := parse(strings.NewReader(in), false); err == nil {
			t.Errorf("parse(%q) succeeded", in)
		}
	}
}
