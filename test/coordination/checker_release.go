package coordination

import (
	"fmt"
	"time"
)

// checkReleases: a lock whose client left it without a word (Abandon)
// must be granted to the next waiter within the abandon's bound. The
// next grant is the first of the lock after the abandon, to any other
// client; none by the end of the run is a violation once the bound has
// passed.
func checkReleases(r *Report, s Snapshot, holds map[string][]Hold) {
	for _, a := range s.Abandons {
		var next *Hold
		for i, h := range holds[a.Resource] { // in grant order
			if h.Granted.After(a.At) && h.Client != a.Client {
				next = &holds[a.Resource][i]
				break
			}
		}
		if next == nil {
			r.Releases = append(r.Releases, fmt.Sprintf("%s: never", a.How))
			if s.At.Sub(a.At) > a.Bound {
				r.Violations = append(r.Violations, Violation{Rule: RuleRelease, Resource: a.Resource, At: a.At.Add(a.Bound),
					What: fmt.Sprintf("the lock %s abandoned (%s) was granted to nobody within %v", a.Client, a.How, a.Bound)})
			}
			continue
		}
		took := next.Granted.Sub(a.At)
		r.Releases = append(r.Releases, fmt.Sprintf("%s: %v", a.How, took.Round(time.Millisecond)))
		if took > a.Bound {
			r.Violations = append(r.Violations, Violation{Rule: RuleRelease, Resource: a.Resource, At: a.At.Add(a.Bound),
				What: fmt.Sprintf("the lock %s abandoned (%s) went to %s (token %d) %v later, past the bound of %v",
					a.Client, a.How, next.Client, next.Token, took.Round(time.Millisecond), a.Bound)})
		}
	}
}

// checkLateWrites: a write with a stale holder's token after the lock
// went to another holder must be refused by the fenced store.
func checkLateWrites(r *Report, s Snapshot) {
	for _, w := range s.Late {
		if w.Accepted {
			r.Violations = append(r.Violations, Violation{Rule: RuleFencing, Resource: w.Resource, At: w.At,
				What: fmt.Sprintf("the fenced store accepted %s's late write with token %d, after the lock went to another holder", w.Client, w.Token)})
		}
	}
}
