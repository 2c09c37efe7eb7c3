package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

const dash = "–"

// headline rows: the workload, how its row is named, and how its cell is
// made.
type headlineRow struct {
	workload string
	name     func(rs *results, config string) string
	cell     func(rs *results, config, workload string) string
}

func headlineRows() []headlineRow {
	fixed := func(s string) func(*results, string) string { return func(*results, string) string { return s } }
	sized := func(format, param string) func(*results, string) string {
		return func(rs *results, config string) string { return fmt.Sprintf(format, rs.param(config, param)) }
	}
	return []headlineRow{
		{"put-1client", fixed("put, 1 client"), rateCell},
		{"put", sized("put, %.0f clients", "clients"), rateCell},
		{"range-linearizable", fixed("range linearizable"), rateCell},
		{"range-serializable", fixed("range serializable"), rateCell},
		{"txn-put", sized("txn-put (%.0f ops)", "txn_ops"), rateCell},
		{"watch-latency-100", fixed("watch-latency, 100 watchers: event p99 (avg) · CPU"), watchLatencyCell},
		{"watch-latency", sized("watch-latency, %.0f watchers: event p99 (avg) · CPU", "watchers"), watchLatencyCell},
		{"lease-keepalive", fixed("lease-keepalive"), rateCell},
		{"watch-create", fixed("watch create"), rateCell},
		{"watch-events", fixed("watch events delivered: events/s · – · CPU per event"), rateCell},
	}
}

func times(r float64, ok bool) string {
	if !ok {
		return dash
	}
	return fmt.Sprintf("%.2f×", r)
}

// rateCell: req/s · p99 · server CPU per request, each MetaStore / etcd.
func rateCell(rs *results, config, workload string) string {
	parts := make([]string, 0, 3)
	for _, m := range []string{"rps", "p99_ms", "cpu_us"} {
		parts = append(parts, times(rs.ratio(config, "metastore", workload, m)))
	}
	return strings.Join(parts, " · ")
}

// watchLatencyCell: event p99 ratio (average latencies) · CPU per event.
func watchLatencyCell(rs *results, config, workload string) string {
	p99 := times(rs.ratio(config, "metastore", workload, "p99_ms"))
	a, aok := rs.median(key{config, "metastore", workload, "avg_ms"})
	b, bok := rs.median(key{config, "etcd", workload, "avg_ms"})
	if aok && bok {
		p99 += fmt.Sprintf(" (%s vs %s ms)", num(a), num(b))
	}
	return p99 + " · " + times(rs.ratio(config, "metastore", workload, "cpu_us"))
}

// peakRSSCell: the range of the per-workload peak-RSS ratios, and the
// highest peaks of both.
func peakRSSCell(rs *results, config string) string {
	lo, hi := math.Inf(1), math.Inf(-1)
	var maxM, maxE float64
	for _, w := range rs.workloads[config] {
		r, ok := rs.ratio(config, "metastore", w, "peak_rss_mib")
		if !ok {
			continue
		}
		lo, hi = min(lo, r), max(hi, r)
		m, _ := rs.median(key{config, "metastore", w, "peak_rss_mib"})
		e, _ := rs.median(key{config, "etcd", w, "peak_rss_mib"})
		maxM, maxE = max(maxM, m), max(maxE, e)
	}
	if math.IsInf(lo, 1) {
		return dash
	}
	return fmt.Sprintf("%.2f–%.2f× (max %.0f vs %.0f MiB)", lo, hi, maxM, maxE)
}

// num prints a figure with the precision its size deserves.
func num(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// benchConfigs are the configs of compare.sh runs (not footprint/scale).
func benchConfigs(rs *results) []string {
	var out []string
	for _, c := range rs.configs {
		if c != "footprint" && c != "scale" {
			out = append(out, c)
		}
	}
	return out
}

func writeSummary(w io.Writer, rs *results) {
	configs := benchConfigs(rs)
	if len(configs) > 0 {
		fmt.Fprintln(w, "MetaStore ÷ etcd 3.6, medians of the rounds: req/s · p99 · server CPU per request")
		fmt.Fprintln(w)
		fmt.Fprintf(w, "| workload | %s |\n", strings.Join(configs, " | "))
		fmt.Fprintf(w, "|---|%s\n", strings.Repeat("---|", len(configs)))
		for _, row := range headlineRows() {
			if !measuredAnywhere(rs, configs, row.workload) {
				continue
			}
			cells := make([]string, len(configs))
			for i, c := range configs {
				cells[i] = row.cell(rs, c, row.workload)
			}
			fmt.Fprintf(w, "| %s | %s |\n", row.name(rs, configs[0]), strings.Join(cells, " | "))
		}
		cells := make([]string, len(configs))
		for i, c := range configs {
			cells[i] = peakRSSCell(rs, c)
		}
		fmt.Fprintf(w, "| peak RSS during the run (per-workload range) | %s |\n", strings.Join(cells, " | "))
	}
	for _, c := range []string{"footprint", "scale"} {
		if _, ok := rs.targets[c]; ok {
			fmt.Fprintln(w)
			writeFootprint(w, rs, c)
		}
	}
	for _, c := range configs {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "%s, medians%s:\n\n", c, paramsNote(rs, c))
		writeDetail(w, rs, c)
	}
}

// paramsNote: " (name=value, ...)" of a config's recorded sizes.
func paramsNote(rs *results, config string) string {
	var parts []string
	for _, p := range rs.params[config] {
		parts = append(parts, fmt.Sprintf("%s=%.0f", p, rs.param(config, p)))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func measuredAnywhere(rs *results, configs []string, workload string) bool {
	for _, c := range configs {
		for _, t := range rs.targets[c] {
			if _, ok := rs.median(key{c, t, workload, "rps"}); ok {
				return true
			}
		}
	}
	return false
}

// writeDetail: one config's medians per workload and target, and ratios.
func writeDetail(w io.Writer, rs *results, config string) {
	targets := rs.targets[config]
	metrics := []struct{ name, label string }{
		{"rps", "req/s"}, {"p99_ms", "p99 ms"}, {"avg_ms", "avg ms"},
		{"cpu_us", "CPU µs/req"}, {"peak_rss_mib", "peak RSS MiB"},
	}
	header := []string{"workload"}
	for _, m := range metrics {
		for _, t := range targets {
			header = append(header, t+" "+m.label)
		}
		if hasBoth(targets) {
			header = append(header, m.label+" ×")
		}
	}
	writeRow(w, header)
	fmt.Fprintf(w, "|---|%s\n", strings.Repeat("---:|", len(header)-1))
	for _, wl := range rs.workloads[config] {
		row := []string{wl}
		for _, m := range metrics {
			for _, t := range targets {
				if v, ok := rs.median(key{config, t, wl, m.name}); ok {
					row = append(row, num(v))
				} else {
					row = append(row, dash)
				}
			}
			if hasBoth(targets) {
				row = append(row, times(rs.ratio(config, "metastore", wl, m.name)))
			}
		}
		writeRow(w, row)
	}
}

func hasBoth(targets []string) bool {
	return slices.Contains(targets, "metastore") && hasEtcd(targets)
}

func writeRow(w io.Writer, cells []string) {
	fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
}

// footprintRows are the figures of engines.sh and scale.sh, in print order.
var footprintRows = []struct{ metric, label string }{
	{"keys_loaded", "keys loaded"},
	{"put_rps", "load, put req/s"},
	{"disk_load_mib", "data dir after the load (MiB)"},
	{"rss_load_mib", "RSS after the load (MiB)"},
	{"range_rps", "random linearizable gets, req/s"},
	{"rss_range_mib", "RSS after the gets (MiB)"},
	{"rewrite_rps", "rewrite of every key, put req/s"},
	{"base_put_p99_ms", "concurrent puts, p99 before the compaction (ms)"},
	{"compact_put_p99_ms", "concurrent puts, p99 during the compaction (ms)"},
	{"compact_put_max_ms", "concurrent puts, slowest during the compaction (ms)"},
	{"compact_put_rps", "concurrent puts during the compaction, req/s"},
	{"compact_s", "compaction of all old revisions (s)"},
	{"peak_rss_mib", "peak RSS of the run (MiB)"},
	{"disk_mib", "data dir at the stop (MiB)"},
	{"first_read_ms", "restart to first read (ms)"},
	{"rss_restart_mib", "RSS after the restart (MiB)"},
}

// writeFootprint: engines.sh's or scale.sh's figures per target, with
// each MetaStore engine's ratio to etcd.
func writeFootprint(w io.Writer, rs *results, config string) {
	targets := rs.targets[config]
	title := map[string]string{
		"footprint": "Footprint (one member; MetaStore engines and etcd 3.6)",
		"scale":     "Scale run (one member; MetaStore on RocksDB and etcd 3.6)",
	}
	if t, ok := title[config]; ok {
		fmt.Fprintf(w, "%s:\n\n", t)
	}
	header := []string{""}
	var engines []string
	for _, t := range targets {
		header = append(header, name(t))
		if t != "etcd" {
			engines = append(engines, t)
		}
	}
	if hasEtcd(targets) {
		for _, e := range engines {
			header = append(header, name(e)+" ÷ etcd")
		}
	}
	writeRow(w, header)
	fmt.Fprintf(w, "|---|%s\n", strings.Repeat("---:|", len(header)-1))
	for _, r := range footprintRows {
		row := []string{r.label}
		measured := false
		for _, t := range targets {
			if v, ok := rs.median(key{config, t, "-", r.metric}); ok {
				row = append(row, num(v))
				measured = true
			} else {
				row = append(row, dash)
			}
		}
		if !measured {
			continue
		}
		if hasEtcd(targets) {
			for _, e := range engines {
				row = append(row, times(rs.ratio(config, e, "-", r.metric)))
			}
		}
		writeRow(w, row)
	}
	for _, t := range targets {
		if v, ok := rs.median(key{config, t, "-", "stopped_at_keys"}); ok {
			fmt.Fprintf(w, "\n%s stopped after %.0f puts (the run's output has the error); the figures that need the whole load are missing.\n", name(t), v)
		}
	}
}

func hasEtcd(targets []string) bool { return slices.Contains(targets, "etcd") }

// name of a target in the footprint tables.
func name(target string) string {
	switch target {
	case "etcd":
		return "etcd 3.6"
	case "memory", "rocksdb":
		return "MetaStore " + target
	}
	return target
}
