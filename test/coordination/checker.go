package coordination

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Rules the checker judges by (doc.go explains each).
const (
	RuleFencing = "fencing" // tokens only increase across successive holders
	RuleOverlap = "overlap" // no two holders believe at the same instant
	RuleFIFO    = "fifo"    // waiters are granted in queue order
	RuleHang    = "hang"    // no call goes unanswered past the bound
	RuleLease   = "lease"   // a lease renewed through a follower survives
	RuleRelease = "release" // an abandoned lock goes to the next waiter within its bound
)

const (
	// RequestTimeout is the members' request timeout: etcd's 5 s plus
	// two election timeouts of 1 s, which MetaStore keeps.
	RequestTimeout = 7 * time.Second
	// HangMargin is added to RequestTimeout before a call counts as
	// hung: scheduling and connection set-up on a loaded 2-core machine.
	HangMargin = 2 * time.Second
	// OverlapMargin is how far apart two beliefs must be. Both ends of
	// every belief are read on the one clock of the test process, each
	// on the holder's own side (granted: when the lock call returned;
	// ended: before the unlock is sent, or when Lost() was seen), so the
	// clocks cannot disagree and no margin is needed: any overlap is one.
	OverlapMargin = 0
)

// CheckConfig tunes the checker; the zero value takes the constants.
type CheckConfig struct {
	HangBound time.Duration // RequestTimeout + HangMargin when zero
}

// Violation is one broken rule.
type Violation struct {
	Rule     string
	Resource string
	At       time.Time // when it happened, to tell which fault it belongs to
	What     string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s on %s: %s", v.Rule, v.Resource, v.What)
}

// Report is the checker's verdict and the run's figures.
type Report struct {
	Violations []Violation
	Calls      int
	Grants     int
	Writes     int
	Refusals   int // writes the fenced resources refused
	// MinGap is the smallest time between one holder's end and the next
	// grant of the same lock (negative: an overlap); MinGapAt names it.
	MinGap   time.Duration
	MinGapAt string
	// MaxSilence is the longest a call went without an answer (an SDK
	// lock call: without an answer nor a key in the queue); MaxLockWait
	// the longest lock call, queueing included.
	MaxSilence  time.Duration
	MaxLockWait time.Duration
	// Releases says, for each abandoned lock, how long after it was
	// abandoned the next waiter was granted it.
	Releases []string
}

// Count returns how many violations broke rule.
func (r Report) Count(rule string) int {
	n := 0
	for _, v := range r.Violations {
		if v.Rule == rule {
			n++
		}
	}
	return n
}

// Verdict is "pass", or "FAIL" with the violations counted by rule.
func (r Report) Verdict() string {
	if len(r.Violations) == 0 {
		return "pass"
	}
	var parts []string
	for _, rule := range []string{RuleFencing, RuleOverlap, RuleFIFO, RuleHang, RuleLease, RuleRelease} {
		if n := r.Count(rule); n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", rule, n))
		}
	}
	return "FAIL(" + strings.Join(parts, ",") + ")"
}

// Check judges a history.
func Check(s Snapshot, cfg CheckConfig) Report {
	if cfg.HangBound <= 0 {
		cfg.HangBound = RequestTimeout + HangMargin
	}
	r := Report{Calls: len(s.Calls), Grants: len(s.Holds), Writes: s.Writes, Refusals: s.Refusals, MinGap: time.Duration(1<<63 - 1)}
	holds := holdsByResource(s)
	for _, res := range slices.Sorted(maps.Keys(holds)) {
		checkFencing(&r, res, holds[res])
		checkOverlap(&r, res, holds[res], s.At, OverlapMargin)
	}
	checkFIFO(&r, s)
	checkHangs(&r, s, cfg.HangBound)
	checkReleases(&r, s, holds)
	checkLateWrites(&r, s)
	for _, p := range s.Probes {
		if !p.Survived {
			r.Violations = append(r.Violations, Violation{Rule: RuleLease, Resource: "lease via " + p.Member, At: p.At,
				What: fmt.Sprintf("a lease kept alive through follower %s did not survive %s: %s", p.Member, p.Fault, p.Detail)})
		}
	}
	if r.MinGapAt == "" {
		r.MinGap = 0
	}
	slices.SortStableFunc(r.Violations, func(a, b Violation) int { return a.At.Compare(b.At) })
	return r
}

// holdsByResource groups the beliefs by lock, each group in grant order.
func holdsByResource(s Snapshot) map[string][]Hold {
	out := map[string][]Hold{}
	for _, h := range s.Holds {
		out[h.Resource] = append(out[h.Resource], h)
	}
	for _, hs := range out {
		slices.SortStableFunc(hs, func(a, b Hold) int { return a.Granted.Compare(b.Granted) })
	}
	return out
}

// end is when a belief ended, or at for one still held then.
func (h Hold) end(at time.Time) time.Time {
	if h.End.IsZero() {
		return at
	}
	return h.End
}

// checkFencing: in grant order, each holder's token must be above every
// earlier holder's, or the resource refuses the new holder's first write.
// The one exception is the holder that held the top token asking again:
// the HTTP service hands a node its own surviving place back.
func checkFencing(r *Report, res string, hs []Hold) {
	var top Hold
	for i, h := range hs {
		again := h.Token == top.Token && h.Client == top.Client
		if i > 0 && h.Token <= top.Token && !again {
			r.Violations = append(r.Violations, Violation{Rule: RuleFencing, Resource: res, At: h.Granted,
				What: fmt.Sprintf("%s granted token %d after %s held token %d", h.Client, h.Token, top.Client, top.Token)})
		}
		if i == 0 || h.Token > top.Token {
			top = h
		}
	}
}

// checkOverlap: each grant must come more than margin after every
// earlier belief of the same lock ended.
func checkOverlap(r *Report, res string, hs []Hold, at time.Time, margin time.Duration) {
	var last Hold // the earlier belief that ended last
	reported := -1
	for i, h := range hs {
		if i > 0 {
			gap := h.Granted.Sub(last.end(at))
			if gap < r.MinGap {
				r.MinGap = gap
				r.MinGapAt = fmt.Sprintf("%s: %s (token %d) after %s (token %d, %s)", res, h.Client, h.Token, last.Client, last.Token, cmp.Or(last.EndCause, "still held"))
			}
			if gap <= margin && last.Call != reported {
				// One violation per stale belief, at the first grant it
				// overlaps; the grants after it overlap it too.
				reported = last.Call
				r.Violations = append(r.Violations, Violation{Rule: RuleOverlap, Resource: res, At: h.Granted,
					What: fmt.Sprintf("%s (token %d) granted while %s (token %d) still believed it held, for %v more (ended by %s)",
						h.Client, h.Token, last.Client, last.Token, -gap, cmp.Or(last.EndCause, "nothing"))})
			}
		}
		if i == 0 || h.end(at).After(last.end(at)) {
			last = h
		}
	}
}

// checkFIFO: a waiter the HTTP service said was queued before another
// contender asked is ahead of it in the queue, so if both calls return
// the lock, the waiter's must come first. A contender asks when it sends
// the first lock call since its last clean unlock: the service hands a
// node that asks again its place from an earlier request whose lease
// still lives (a request that timed out, a stream cut while held). The
// SDK says nothing while it waits; its queue order is the order of the
// claim tokens, which checkFencing holds against the grant order.
func checkFIFO(r *Report, s Snapshot) {
	granted := map[int]Hold{}
	for _, h := range s.Holds {
		granted[h.Call] = h
	}
	asked := askedTimes(s.Calls)
	byRes := map[string][]Call{}
	for _, c := range s.Calls {
		if c.Op == OpLock && c.Granted {
			byRes[c.Resource] = append(byRes[c.Resource], c)
		}
	}
	for _, res := range slices.Sorted(maps.Keys(byRes)) {
		calls := byRes[res]
		for _, w := range calls {
			if w.Queued.IsZero() {
				continue
			}
			for _, o := range calls {
				if asked[o.ID].After(w.Queued) && o.End.Before(w.End) {
					r.Violations = append(r.Violations, Violation{Rule: RuleFIFO, Resource: res, At: o.End,
						What: fmt.Sprintf("%s was granted (token %d) ahead of %s, queued before %s asked, granted later (token %d)",
							o.Client, granted[o.ID].Token, w.Client, o.Client, granted[w.ID].Token)})
				}
			}
		}
	}
}

// askedTimes maps each granted lock call to when its client asked: the
// start of its first lock call on that resource since its last unlock
// that was answered without error.
func askedTimes(calls []Call) map[int]time.Time {
	type who struct{ client, resource string }
	since := map[who]time.Time{}
	out := map[int]time.Time{}
	for _, c := range calls { // in the order they were sent
		k := who{c.Client, c.Resource}
		switch {
		case c.Op == OpUnlock && c.Err == "" && !c.End.IsZero():
			delete(since, k)
		case c.Op == OpLock:
			if _, ok := since[k]; !ok {
				since[k] = c.Start
			}
			if c.Granted {
				out[c.ID] = since[k]
			}
		}
	}
	return out
}
