// Command tracehops summarises an execution trace of a server under a
// one-request-at-a-time load (bench/trace.sh): where a request's time goes
// between goroutines. It reads the text of `go tool trace -d=parsed FILE`
// on standard input and prints, per request (-requests: how many the
// trace covers):
//
//   - goroutine wake-ups (Waiting -> Runnable), by waker and woken
//     goroutine, with the woken goroutine's mean scheduling latency
//     (Runnable -> Running) in microseconds;
//   - running time per goroutine (µs per request);
//   - system calls by call site: count per request and mean duration.
//
// A goroutine is named by the outermost frame of its stack that is not
// the runtime's (its entry function), learned from any stack the trace
// records for it.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// event is one goroutine state transition of the trace.
type event struct {
	g        int64 // goroutine running when the event happened (-1: none)
	goid     int64 // goroutine whose state changed
	time     int64 // ns
	from, to string
	reason   string
	stack    []string // the running goroutine's stack (Stack=)
	tstack   []string // the transitioning goroutine's stack (TransitionStack=)
}

var lineRE = regexp.MustCompile(`^M=\S+ P=\S+ G=(-?\d+) StateTransition Time=(\d+) GoID=(\d+) (\w+)->(\w+) Reason="([^"]*)"`)

func main() {
	requests := flag.Float64("requests", 1, "requests the trace covers")
	top := flag.Int("top", 25, "rows per table")
	path := flag.String("path", "", "milestones of one request's path, separated by '|': each a substring of an event's label (-labels prints them); the mean time between consecutive milestones is printed")
	labels := flag.Bool("labels", false, "print every event's label and exit")
	marks := flag.String("marks", "", "like -path, but the first milestone is an anchor and the others may come in any order: the mean time from the anchor to the first of each before the next anchor is printed")
	flag.Parse()
	evs, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracehops:", err)
		os.Exit(1)
	}
	names := roles(evs)
	if *labels {
		for _, e := range evs {
			fmt.Printf("%d %s\n", e.time, label(e, names))
		}
		return
	}
	report(evs, names, *requests, *top)
	if *marks != "" {
		fmt.Println()
		offsets(evs, names, strings.Split(*marks, "|"))
	}
	if *path != "" {
		fmt.Println()
		critical(evs, names, strings.Split(*path, "|"))
	}
}

// roles names each goroutine by its entry function.
func roles(evs []event) map[int64]string {
	role := map[int64]string{}
	for _, e := range evs {
		if r := entry(e.tstack); r != "" && role[e.goid] == "" {
			role[e.goid] = r
		}
		if r := entry(e.stack); r != "" && e.g >= 0 && role[e.g] == "" {
			role[e.g] = r
		}
	}
	return role
}

func name(role map[int64]string, g int64) string {
	if g < 0 {
		return "(no goroutine)"
	}
	if r := role[g]; r != "" {
		return r
	}
	return "(unknown)"
}

// label describes an event for -path: "wake WAKER [SITE] -> WOKEN",
// "run G", "block G [SITE]", "syscall G SYSCALL in SITE", "return G".
func label(e event, role map[int64]string) string {
	switch {
	case e.from == "Waiting" && e.to == "Runnable":
		return "wake " + name(role, e.g) + " [" + site(e.stack) + "] -> " + name(role, e.goid)
	case e.from == "Syscall":
		return "return " + name(role, e.goid)
	case e.to == "Running":
		return "run " + name(role, e.goid)
	case e.to == "Waiting":
		return "block " + name(role, e.goid) + " [" + site(e.tstack) + "]"
	case e.to == "Syscall":
		return "syscall " + name(role, e.goid) + " " + sysName(e.tstack) + " in " + site(e.tstack)
	}
	return e.from + "->" + e.to + " " + name(role, e.goid)
}

// critical follows the milestones through the trace in order (a chain
// restarts when its first milestone comes again) and prints the mean
// time from each milestone to the next over the chains completed.
func critical(evs []event, role map[int64]string, steps []string) {
	sums := make([]int64, len(steps))
	times := make([]int64, len(steps))
	next, done := 0, 0
	for _, e := range evs {
		l := label(e, role)
		if strings.Contains(l, steps[0]) {
			next = 0
		}
		if !strings.Contains(l, steps[next]) {
			continue
		}
		times[next] = e.time
		next++
		if next == len(steps) {
			for i := 1; i < len(steps); i++ {
				sums[i] += times[i] - times[i-1]
			}
			done++
			next = 0
		}
	}
	if done == 0 {
		fmt.Println("no request followed the whole path")
		return
	}
	var total int64
	fmt.Printf("path over %d requests (mean µs from the milestone before):\n", done)
	for i := range steps {
		if i > 0 {
			total += sums[i]
		}
		fmt.Printf("%8.1f  %s\n", float64(sums[i])/1e3/float64(done), steps[i])
	}
	fmt.Printf("%8.1f  total\n", float64(total)/1e3/float64(done))
}

func parse(r io.Reader) ([]event, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var evs []event
	var cur *event
	var into *[]string
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "M=") {
			cur, into = nil, nil
			m := lineRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			g, _ := strconv.ParseInt(m[1], 10, 64)
			t, _ := strconv.ParseInt(m[2], 10, 64)
			id, _ := strconv.ParseInt(m[3], 10, 64)
			evs = append(evs, event{g: g, goid: id, time: t, from: m[4], to: m[5], reason: m[6]})
			cur = &evs[len(evs)-1]
			continue
		}
		if cur == nil {
			continue
		}
		switch {
		case line == "Stack=":
			into = &cur.stack
		case line == "TransitionStack=":
			into = &cur.tstack
		case strings.HasPrefix(line, "\t\t"), line == "":
		case strings.HasPrefix(line, "\t") && into != nil:
			fn := strings.TrimSpace(line)
			if i := strings.LastIndex(fn, " @ "); i >= 0 {
				fn = fn[:i]
			}
			*into = append(*into, fn)
		}
	}
	return evs, sc.Err()
}

// short drops the import path of a function name.
func short(fn string) string {
	if i := strings.LastIndex(fn, "/"); i >= 0 {
		fn = fn[i+1:]
	}
	return fn
}

// entry is the outermost non-runtime frame of a stack.
func entry(stack []string) string {
	for i := len(stack) - 1; i >= 0; i-- {
		if !strings.HasPrefix(stack[i], "runtime.") {
			return short(stack[i])
		}
	}
	return ""
}

// site is the innermost frame outside the runtime, syscall and
// internal/poll packages: what a goroutine was doing.
func site(stack []string) string {
	for _, fn := range stack {
		s := short(fn)
		if strings.HasPrefix(fn, "runtime.") || strings.HasPrefix(s, "syscall.") || strings.HasPrefix(fn, "internal/") ||
			strings.HasPrefix(s, "poll.") || strings.HasPrefix(s, "os.") || strings.HasPrefix(s, "net.") ||
			strings.HasPrefix(s, "sync.") || strings.HasPrefix(s, "time.") {
			continue
		}
		return s
	}
	if len(stack) > 0 {
		return short(stack[0])
	}
	return "?"
}

type stat struct {
	n   int
	sum int64
}

func report(evs []event, role map[int64]string, requests float64, top int) {
	name := func(g int64) string { return name(role, g) }
	wakes := map[string]*stat{}
	runs := map[string]*stat{}
	sys := map[string]*stat{}
	runnableSince := map[int64]int64{}
	runningSince := map[int64]int64{}
	syscallSince := map[int64]int64{}
	syscallSite := map[int64]string{}
	wokenBy := map[int64]string{}
	add := func(m map[string]*stat, k string, d int64) {
		s := m[k]
		if s == nil {
			s = &stat{}
			m[k] = s
		}
		s.n++
		s.sum += d
	}
	for _, e := range evs {
		switch {
		case e.from == "Waiting" && e.to == "Runnable":
			runnableSince[e.goid] = e.time
			wokenBy[e.goid] = name(e.g) + " [" + site(e.stack) + "]"
		case e.from == "Runnable" && e.to == "Running":
			if t, ok := runnableSince[e.goid]; ok {
				add(wakes, wokenBy[e.goid]+" -> "+name(e.goid), e.time-t)
				delete(runnableSince, e.goid)
			}
		}
		if e.to == "Running" {
			runningSince[e.goid] = e.time
		} else if e.from == "Running" {
			if t, ok := runningSince[e.goid]; ok {
				add(runs, name(e.goid), e.time-t)
				delete(runningSince, e.goid)
			}
		}
		if e.to == "Syscall" {
			syscallSince[e.goid] = e.time
			syscallSite[e.goid] = sysName(e.tstack) + " in " + site(e.tstack)
		} else if e.from == "Syscall" {
			if t, ok := syscallSince[e.goid]; ok {
				add(sys, syscallSite[e.goid], e.time-t)
				delete(syscallSince, e.goid)
			}
		}
	}
	total := 0
	for _, s := range wakes {
		total += s.n
	}
	fmt.Printf("wake-ups per request: %.2f (scheduling latency: mean µs after the wake-up)\n", float64(total)/requests)
	table(wakes, requests, top, "wake-up (waker [site] -> woken)", true)
	fmt.Println()
	table(runs, requests, top, "running time per goroutine", false)
	fmt.Println()
	table(sys, requests, top, "system calls (call in site)", true)
}

func sysName(stack []string) string {
	for _, fn := range stack {
		if strings.HasPrefix(fn, "syscall.") || strings.HasPrefix(fn, "internal/runtime/syscall") {
			return short(fn)
		}
	}
	if len(stack) > 0 {
		return short(stack[0])
	}
	return "?"
}

func table(m map[string]*stat, requests float64, top int, title string, mean bool) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]].sum > m[keys[j]].sum })
	fmt.Printf("%-8s %-9s %-8s %s\n", "per req", "µs/req", "mean µs", title)
	for i, k := range keys {
		if i == top {
			break
		}
		s := m[k]
		fmt.Printf("%-8.2f %-9.1f %-8.1f %s\n", float64(s.n)/requests, float64(s.sum)/1e3/requests, float64(s.sum)/1e3/float64(s.n), k)
	}
}

// offsets prints, for each mark after the anchor (steps[0]), the mean
// time from an anchor to the first event matching the mark before the
// next anchor, and in how many of the anchors' windows it occurred.
func offsets(evs []event, role map[int64]string, steps []string) {
	sums := make([]int64, len(steps))
	counts := make([]int, len(steps))
	anchors := 0
	var anchor int64
	seen := make([]bool, len(steps))
	for _, e := range evs {
		l := label(e, role)
		if strings.Contains(l, steps[0]) {
			anchors++
			anchor = e.time
			clear(seen)
			continue
		}
		if anchors == 0 {
			continue
		}
		for i := 1; i < len(steps); i++ {
			if !seen[i] && strings.Contains(l, steps[i]) {
				seen[i] = true
				sums[i] += e.time - anchor
				counts[i]++
			}
		}
	}
	fmt.Printf("after %d anchors (%s): mean µs to the first of each, share of anchors where it came\n", anchors, steps[0])
	for i := 1; i < len(steps); i++ {
		if counts[i] == 0 {
			fmt.Printf("%8s  %5s  %s\n", "-", "0%", steps[i])
			continue
		}
		fmt.Printf("%8.1f  %4.0f%%  %s\n", float64(sums[i])/1e3/float64(counts[i]), 100*float64(counts[i])/float64(anchors), steps[i])
	}
}
