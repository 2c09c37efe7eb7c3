package main

import (
	"bytes"
	"testing"
)

func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct{ prefix, want string }{
		{"watchmem/00000007/", "watchmem/000000070"},
		{"a", "b"},
		{"a\xff", "b"},
		{"\xff\xff", "\x00"},
	} {
		if got := prefixEnd([]byte(tc.prefix)); string(got) != tc.want {
			t.Errorf("prefixEnd(%q) = %q, want %q", tc.prefix, got, tc.want)
		}
	}
}

// TestCreateRequestsAreDisjoint checks what keeps the watchers independent:
// in both modes no watcher's keys include another watcher's.
func TestCreateRequestsAreDisjoint(t *testing.T) {
	const n = 200
	for _, mode := range []string{"keys", "prefixes"} {
		c := watchConfig{mode: mode, prefix: "watchmem/"}
		for i := range n {
			ci := c.createRequest(i).GetCreateRequest()
			for j := range n {
				if i == j {
					continue
				}
				cj := c.createRequest(j).GetCreateRequest()
				inside := bytes.Equal(cj.Key, ci.Key)
				if len(ci.RangeEnd) > 0 {
					inside = bytes.Compare(cj.Key, ci.Key) >= 0 && bytes.Compare(cj.Key, ci.RangeEnd) < 0
				}
				if inside {
					t.Fatalf("mode %s: watcher %d [%q, %q) covers watcher %d's key %q", mode, i, ci.Key, ci.RangeEnd, j, cj.Key)
				}
			}
		}
		if got := c.createRequest(7).GetCreateRequest(); mode == "keys" && (string(got.Key) != "watchmem/00000007" || got.RangeEnd != nil) {
			t.Errorf("keys: watcher 7 watches [%q, %q), want the single key watchmem/00000007", got.Key, got.RangeEnd)
		}
	}
}

const sampleMetrics = `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 123
# HELP go_memstats_heap_inuse_bytes Number of heap bytes that are in use.
# TYPE go_memstats_heap_inuse_bytes gauge
go_memstats_heap_inuse_bytes 4.5056e+06
# TYPE grpc_server_handled_total counter
grpc_server_handled_total{grpc_code="OK",grpc_method="Range"} 7
`

func TestGauges(t *testing.T) {
	got, err := gauges([]byte(sampleMetrics), heapInuseMetric, goroutinesMetric)
	if err != nil {
		t.Fatal(err)
	}
	if got[heapInuseMetric] != 4505600 || got[goroutinesMetric] != 123 {
		t.Errorf("gauges = %v, want heap 4505600 and 123 goroutines", got)
	}
	if _, err := gauges([]byte(sampleMetrics), "process_resident_memory_bytes"); err == nil {
		t.Error("a missing gauge was not reported")
	}
	if _, err := gauges([]byte(sampleMetrics), "grpc_server_handled_total"); err == nil {
		t.Error("a counter was taken for a gauge")
	}
}

// FuzzGauges feeds arbitrary expositions (they come from the network):
// the parse may fail but must not panic, and what it returns is complete.
func FuzzGauges(f *testing.F) {
	f.Add([]byte(sampleMetrics))
	f.Add([]byte("go_goroutines 1\ngo_memstats_heap_inuse_bytes 2\n"))
	f.Add([]byte("# TYPE go_goroutines gauge\ngo_goroutines{a=\"b\"} 1\ngo_goroutines{a=\"c\"} 2\n"))
	f.Add([]byte("go_goroutines NaN"))
	f.Fuzz(func(t *testing.T, exposition []byte) {
		got, err := gauges(exposition, heapInuseMetric, goroutinesMetric)
		if err == nil && len(got) != 2 {
			t.Fatalf("gauges returned %v without an error", got)
		}
	})
}
