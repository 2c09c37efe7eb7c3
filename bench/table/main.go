package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: table compare|summary|engines FILE")
		os.Exit(2)
	}
	cmd := os.Args[1]
	if err := run(cmd, os.Args[2], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "table %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

func run(cmd, path string, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	withConfig := cmd == "summary"
	rs, err := parse(f, withConfig)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	switch cmd {
	case "compare":
		writeDetail(w, rs, "")
	case "engines":
		writeFootprint(w, rs, "")
	case "summary":
		writeSummary(w, rs)
	default:
		return fmt.Errorf("unknown subcommand %q", cmd)
	}
	return nil
}

// key names one figure: its config, target, workload and metric.
type key struct{ config, target, workload, metric string }

// results holds every round's value of each figure, and the order in which
// configs, targets and workloads first appeared (the order of the run).
type results struct {
	values    map[key][]float64
	configs   []string
	targets   map[string][]string // per config
	workloads map[string][]string // per config
	params    map[string][]string // per config: names of its recorded sizes
}

// parse reads the scripts' lines; withConfig says whether the first field
// is the config (a results file) or absent (one run's file).
func parse(r io.Reader, withConfig bool) (*results, error) {
	rs := &results{values: map[key][]float64{}, targets: map[string][]string{}, workloads: map[string][]string{}, params: map[string][]string{}}
	want := 5
	if withConfig {
		want = 6
	}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != want {
			return nil, fmt.Errorf("line %d: %d tab-separated fields, want %d: %q", n, len(f), want, line)
		}
		config := ""
		if withConfig {
			config, f = f[0], f[1:]
		}
		v, err := strconv.ParseFloat(f[4], 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: value: %w", n, err)
		}
		k := key{config: config, target: f[1], workload: f[2], metric: f[3]}
		if _, seen := rs.targets[config]; !seen {
			rs.configs = append(rs.configs, config)
			rs.targets[config] = nil
		}
		rs.values[k] = append(rs.values[k], v)
		if k.target == paramTarget {
			rs.params[config] = appendNew(rs.params[config], k.metric)
			continue
		}
		rs.targets[config] = appendNew(rs.targets[config], k.target)
		rs.workloads[config] = appendNew(rs.workloads[config], k.workload)
	}
	return rs, sc.Err()
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// paramTarget and paramWorkload mark a line that records one of the run's
// sizes (clients, watchers...) as its metric.
const paramTarget, paramWorkload = "-", "param"

// param is one of a config's sizes, 0 if not recorded.
func (rs *results) param(config, name string) float64 {
	v, _ := rs.median(key{config, paramTarget, paramWorkload, name})
	return v
}

// median of the figure's rounds; ok is false when it was not measured.
func (rs *results) median(k key) (float64, bool) {
	vs := slices.Clone(rs.values[k])
	if len(vs) == 0 {
		return 0, false
	}
	slices.Sort(vs)
	m := len(vs) / 2
	if len(vs)%2 == 1 {
		return vs[m], true
	}
	return (vs[m-1] + vs[m]) / 2, true
}

// ratio of target's median to etcd's for one config, workload and metric.
func (rs *results) ratio(config, target, workload, metric string) (float64, bool) {
	a, ok := rs.median(key{config, target, workload, metric})
	if !ok {
		return 0, false
	}
	b, ok := rs.median(key{config, "etcd", workload, metric})
	if !ok || b == 0 {
		return 0, false
	}
	return a / b, true
}
