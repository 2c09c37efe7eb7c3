// Command summarize reads the test2json output of one etcd suite run and
// prints its leaf tests' counts and failures, holding the failures against
// test/etcdsuites/known-failures.txt.
//
//	summarize -suite common -target metastore -known known-failures.txt run.json
//
// A leaf is a test no other test of the run names as its parent (a
// subtest without subtests of its own, or a test without subtests). A
// failing leaf listed for the suite and target is known and printed with
// its reason; any other failing leaf, and any test still running when the
// output ended (a hang cut off by the timeout), makes the exit status 1.
// A known failure that passed is printed too, so the list can shrink. A
// skipped leaf is printed with its listed reason, or as unlisted.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
)

type event struct {
	Action string
	Test   string
}

// known is one line of the known-failures file:
//
//	suite  target  pattern  reason
//
// tab-separated; target is metastore, etcd or *; pattern is a test name
// where * matches any run of characters (path.Match rules, "/" included
// only through "*" in each element).
type known struct {
	suite, target, pattern, reason string
}

func main() {
	suite := flag.String("suite", "", "suite name (common, e2e-ctl, e2e-misc)")
	target := flag.String("target", "metastore", "binary under test: metastore or etcd")
	knownPath := flag.String("known", "", "known-failures file")
	flag.Parse()
	if flag.NArg() != 1 || *suite == "" {
		fmt.Fprintln(os.Stderr, "usage: summarize -suite S [-target T] [-known F] run.json")
		os.Exit(2)
	}
	list, err := readKnown(*knownPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "summarize:", err)
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "summarize:", err)
		os.Exit(2)
	}
	defer f.Close()
	res, err := readRun(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "summarize:", err)
		os.Exit(2)
	}
	if !report(os.Stdout, *suite, *target, res, applicable(list, *suite, *target)) {
		os.Exit(1)
	}
}

func readKnown(p string) ([]known, error) {
	if p == "" {
		return nil, nil
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var out []known
	for i, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			return nil, fmt.Errorf("%s:%d: want 4 tab-separated fields, have %d", p, i+1, len(f))
		}
		if _, err := path.Match(f[2], ""); err != nil {
			return nil, fmt.Errorf("%s:%d: pattern %q: %w", p, i+1, f[2], err)
		}
		out = append(out, known{suite: f[0], target: f[1], pattern: f[2], reason: f[3]})
	}
	return out, nil
}

func applicable(list []known, suite, target string) []known {
	var out []known
	for _, k := range list {
		if k.suite == suite && (k.target == "*" || k.target == target) {
			out = append(out, k)
		}
	}
	return out
}

// run is what one suite run's output says of each test.
type run struct {
	outcome map[string]string // test name -> pass, fail, skip; "" still running
	order   []string
}

func readRun(r io.Reader) (run, error) {
	res := run{outcome: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev event
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Test == "" {
			continue // a line the test binary printed outside test2json
		}
		switch ev.Action {
		case "run":
			if _, seen := res.outcome[ev.Test]; !seen {
				res.order = append(res.order, ev.Test)
			}
			res.outcome[ev.Test] = ""
		case "pass", "fail", "skip":
			if _, seen := res.outcome[ev.Test]; !seen {
				res.order = append(res.order, ev.Test)
			}
			res.outcome[ev.Test] = ev.Action
		}
	}
	return res, sc.Err()
}

// leaves are the tests without subtests.
func (r run) leaves() []string {
	parent := map[string]bool{}
	for _, t := range r.order {
		for i := strings.LastIndex(t, "/"); i > 0; i = strings.LastIndex(t[:i], "/") {
			parent[t[:i]] = true
		}
	}
	var out []string
	for _, t := range r.order {
		if !parent[t] {
			out = append(out, t)
		}
	}
	return out
}

func match(list []known, test string) (known, bool) {
	for _, k := range list {
		if ok, _ := path.Match(k.pattern, test); ok || k.pattern == test {
			return k, true
		}
	}
	return known{}, false
}

// report prints the counts and failures and says whether the run is
// acceptable: every failure known, nothing left running.
func report(w io.Writer, suite, target string, r run, list []known) bool {
	var pass, skip int
	var unknown, knownFail, hung, fixed, skipped []string
	reasons := map[string]string{}
	for _, t := range r.leaves() {
		k, isKnown := match(list, t)
		switch r.outcome[t] {
		case "pass":
			pass++
			if isKnown {
				fixed = append(fixed, t)
			}
		case "skip":
			skip++
			if isKnown {
				reasons[t] = k.reason
			}
			skipped = append(skipped, t)
		case "fail":
			if isKnown {
				knownFail = append(knownFail, t)
				reasons[t] = k.reason
			} else {
				unknown = append(unknown, t)
			}
		default:
			hung = append(hung, t)
		}
	}
	fails := len(unknown) + len(knownFail)
	fmt.Fprintf(w, "%s on %s: %d leaves, %d pass, %d fail (%d known), %d skip, %d unfinished\n",
		suite, target, pass+skip+fails+len(hung), pass, fails, len(knownFail), skip, len(hung))
	for _, t := range knownFail {
		fmt.Fprintf(w, "  known failure  %s: %s\n", t, reasons[t])
	}
	for _, t := range skipped {
		if r, ok := reasons[t]; ok {
			fmt.Fprintf(w, "  skipped        %s: %s\n", t, r)
		} else {
			fmt.Fprintf(w, "  skipped        %s (unlisted)\n", t)
		}
	}
	for _, t := range fixed {
		fmt.Fprintf(w, "  listed, passed %s\n", t)
	}
	slices.Sort(unknown)
	for _, t := range unknown {
		fmt.Fprintf(w, "  FAIL           %s\n", t)
	}
	for _, t := range hung {
		fmt.Fprintf(w, "  UNFINISHED     %s\n", t)
	}
	return len(unknown) == 0 && len(hung) == 0
}
